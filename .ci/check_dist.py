"""Check the built distributions as a user receives them.

Usage: ``python .ci/check_dist.py DIST_DIR`` (``make dist-check`` builds ``dist/`` first).

1. The wheel and the sdist hold the package's sources and data, and nothing built or
   cached on this machine (no ``__pycache__``, bytecode, numba cache files or compiled
   extensions); their version is the package's ``__version__``.
2. For each of "no extras" and the ``export`` extra: a fresh virtual environment gets the
   pinned torch (``TORCH_SPEC``, as the Makefile) and the wheel; then, from a directory
   outside the repository and with the installed package made read-only, the demo
   (``examples/demo.py``) and ``.ci/smoke.py`` (every family, ONNX with the extra) run,
   and the package's directory is byte for byte what pip installed: nothing (numba's
   cache included) is written inside it.

Read-only: as root (who may write anywhere), the package directory is bind-mounted
read-only in a private mount namespace (``unshare -m``); otherwise its permissions are
removed. Either way the files are compared before and after.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What a distribution must not carry: this machine's caches and builds.
FORBIDDEN = ("__pycache__", ".pyc", ".nbi", ".nbc", ".so", ".pyd", ".dll", ".dylib")


def version():
    for line in (ROOT / "sksparse_nn" / "__init__.py").read_text().splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    raise SystemExit("no __version__ in sksparse_nn/__init__.py")


def check_contents(names, kind, required):
    bad = [n for n in names if any(part in n for part in FORBIDDEN)]
    if bad:
        raise SystemExit(f"{kind} carries built or cached files: {bad[:10]}")
    missing = [r for r in required if not any(n.endswith(r) for n in names)]
    if missing:
        raise SystemExit(f"{kind} lacks {missing}")
    print(f"{kind}: {len(names)} files, none built or cached")


def run(cmd, **kwargs):
    print("+", " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kwargs)


def tree_digest(directory):
    """Every file under ``directory`` with a digest of its bytes."""
    out = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(directory))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def read_only_command(package, cmd):
    """``cmd`` run with ``package`` read-only (see the module docstring)."""
    if os.geteuid() == 0:
        if shutil.which("unshare") is None:
            raise SystemExit("running as root without unshare: cannot make the package read-only")
        inner = f"mount --bind -o ro {shlex.quote(str(package))} {shlex.quote(str(package))}"
        inner += " && exec " + " ".join(shlex.quote(str(c)) for c in cmd)
        return ["unshare", "-m", "sh", "-c", inner]
    for path in [package, *package.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    return cmd


def check_install(wheel, extra, work):
    venv = work / f"venv{'-' + extra if extra else ''}"
    run([sys.executable, "-m", "venv", venv])
    python = venv / "bin" / "python"
    torch_spec = os.environ.get("TORCH_SPEC", "torch==2.13.0")
    run([python, "-m", "pip", "install", "-q", torch_spec])
    run([python, "-m", "pip", "install", "-q", f"{wheel}[{extra}]" if extra else wheel])
    locate = "import pathlib, sksparse_nn; print(pathlib.Path(sksparse_nn.__file__).parent)"
    where = subprocess.run(
        [python, "-c", locate], check=True, capture_output=True, text=True, cwd=work
    ).stdout.strip()
    package = Path(where)
    if not package.is_relative_to(venv):
        raise SystemExit(f"sksparse_nn imported from {package}, not from the new environment")
    before = tree_digest(package)
    home = work / f"home{'-' + extra if extra else ''}"  # numba's user-wide cache goes here
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    for var in ("NUMBA_CACHE_DIR", "PYTHONPATH", "XDG_CACHE_HOME"):
        env.pop(var, None)
    shutil.copy(ROOT / "examples" / "demo.py", work / "demo.py")
    shutil.copy(ROOT / ".ci" / "smoke.py", work / "smoke.py")
    for script in (["demo.py"], ["smoke.py", *(["--export"] if extra == "export" else [])]):
        run(read_only_command(package, [python, *script]), cwd=work, env=env)
    after = tree_digest(package)
    if after != before:
        changed = sorted(set(after.items()) ^ set(before.items()))
        raise SystemExit(f"the run wrote inside the installed package: {changed[:10]}")
    cached = sorted(p.name for p in home.rglob("*.nbi"))
    print(f"{extra or 'no extras'}: the package is unchanged; numba cached {len(cached)} "
          f"kernels under the user's cache directory")  # fmt: skip


def main(dist):
    dist = Path(dist)
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise SystemExit(f"expected one wheel and one sdist in {dist}: {wheels + sdists}")
    wheel, sdist = wheels[0], sdists[0]
    expected = version()
    for path in (wheel, sdist):
        if f"-{expected}" not in path.name:
            raise SystemExit(f"{path.name} is not version {expected}")
    required = ["sksparse_nn/__init__.py", "sksparse_nn/solvers/_kernels.py", ".rst"]
    check_contents(zipfile.ZipFile(wheel).namelist(), "wheel", required)
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    check_contents(names, "sdist", [*required, "pyproject.toml", "README.md", "CHANGELOG.md"])
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        for extra in ("", "export"):
            check_install(wheel.resolve(), extra, work)
    print("distributions checked")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(sys.argv[1])
