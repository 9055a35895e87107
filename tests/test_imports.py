"""The package's import graph points one way: no circle between modules (imports inside
functions included) and no `_private` name or module imported from another package (a
package exports what the others use)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "sksparse_nn"


def _module_name(path):
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(path, name):
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _imports():
    """``[(importer, imported module, imported names, line)]`` of every ``from`` import
    inside the package, relative ones resolved."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        name = _module_name(path)
        package = _package_of(path, name)
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "sksparse_nn":
                found.append((name, target, [a.name for a in node.names], node.lineno))
    return found


def _known_modules():
    return {_module_name(p) for p in ROOT.rglob("*.py")}


def _graph():
    """Module -> the package modules it imports (``from pkg import submodule`` counts as
    importing the submodule; ``from pkg import name`` as importing ``pkg``)."""
    known = _known_modules()
    edges = {}
    for importer, target, names, _ in _imports():
        for n in names:
            module = f"{target}.{n}" if f"{target}.{n}" in known else target
            if module != importer:
                edges.setdefault(importer, set()).add(module)
    return edges


def _cycle(edges):
    """One import cycle as a list of modules, or None (iterative depth-first search)."""
    state = {}
    for start in sorted(edges):
        if state.get(start):
            continue
        stack, path = [(start, iter(sorted(edges.get(start, ()))))], [start]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child) :] + [child]
            elif not state.get(child):
                state[child] = 1
                stack.append((child, iter(sorted(edges.get(child, ())))))
                path.append(child)
    return None


def _package_parts(module):
    """A module's package path below sksparse_nn (its room), e.g. ("training",)."""
    parts = module.split(".")[1:]
    return (
        tuple(parts[:-1]) if (ROOT.joinpath(*parts).with_suffix(".py")).exists() else tuple(parts)
    )


def test_no_import_cycle():
    edges = _graph()
    assert edges, "the import graph was not read"
    cycle = _cycle(edges)
    assert cycle is None, " -> ".join(cycle)


def test_a_cycle_is_found():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None


@pytest.mark.parametrize("kind", ["module", "name"])
def test_no_private_import_across_packages(kind):
    known = _known_modules()
    stray = []
    for importer, target, names, line in _imports():
        own = _package_parts(importer)
        for n in names:
            module = f"{target}.{n}" if f"{target}.{n}" in known else target
            room = _package_parts(module)
            if room[: len(own)] == own and (own or not room):  # its own package (or below)
                continue
            private_module = any(p.startswith("_") for p in module.split(".")[1:])
            private_name = n.startswith("_") and module == target
            if (kind == "module" and private_module) or (kind == "name" and private_name):
                stray.append(f"{importer}:{line} imports {n} from {target}")
    assert not stray, "\n".join(stray)
