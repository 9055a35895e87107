"""The coordinate-descent kernel compiled ahead of time: the same bits as numba's JIT
kernel, loaded without numba, and the JIT kernel wherever the AOT one cannot serve."""

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from sksparse_nn import SparseLinearClassifier
from sksparse_nn.solvers import _compiled

pytestmark = pytest.mark.numerics


def _sparse_problem():
    X = sp.random(60, 300, density=0.05, format="csr", random_state=0)
    y = (np.asarray(X[:, :10].sum(axis=1)).ravel() > 0.05).astype(int)
    return X, y


def _fit(X, y):
    return SparseLinearClassifier(lam=0.002, D=2, random_state=0).fit(X, y).coef_


@pytest.fixture
def calls(monkeypatch):
    """Which kernel served each call: "aot" (a recording stand-in) or "jit"."""
    from sksparse_nn.solvers import _kernels

    seen = []
    jit = _kernels.model_cd

    def aot(*args):
        seen.append("aot")
        seen.append(args)
        return jit(*args)

    monkeypatch.setattr(_compiled, "_kernel", aot)
    monkeypatch.setattr(_kernels, "model_cd", lambda *a: seen.append("jit") or jit(*a))
    return seen


def test_the_aot_kernel_serves_int32_indices_and_the_jit_the_rest(calls):
    X, y = _sparse_problem()
    _fit(X, y)
    assert calls and "jit" not in calls
    args = list(calls[1])
    calls.clear()
    expected = _compiled.model_cd(*args)
    assert calls[0] == "aot"
    calls.clear()
    _compiled._kernel = False  # no AOT kernel (monkeypatched: restored after the test)
    for got, want in zip(_compiled.model_cd(*args), expected, strict=True):
        np.testing.assert_array_equal(got, want)
    assert calls == ["jit"]
    # int64 indices (scipy's for very large matrices) do not fit the AOT signature
    assert _compiled._fits(args)
    args[18] = args[18].astype(np.int64)
    assert not _compiled._fits(args)


def test_a_failed_build_leaves_the_jit_kernel(monkeypatch, tmp_path):
    # no C toolchain (here: pycc cannot be imported): no module, no error, the JIT serves
    monkeypatch.setenv("SKSPARSE_NN_KERNEL_DIR", str(tmp_path))
    monkeypatch.setitem(sys.modules, "numba.pycc", None)
    monkeypatch.setattr(_compiled, "_kernel", None)
    assert _compiled.build_kernels() is None
    assert _compiled._aot_kernel() is False
    assert not list(tmp_path.iterdir())  # nor a lock left behind


def test_a_held_lock_means_another_process_builds(monkeypatch, tmp_path):
    monkeypatch.setenv("SKSPARSE_NN_KERNEL_DIR", str(tmp_path))
    monkeypatch.setattr(_compiled, "_kernel", None)
    monkeypatch.setattr(_compiled, "build_kernels", lambda: pytest.fail("built twice"))
    path = _compiled._path(_compiled._module_name())
    path.with_name(f".{path.name}.lock").touch()
    assert _compiled._aot_kernel() is False


def test_the_module_name_follows_the_kernel_source(monkeypatch, tmp_path):
    edited = tmp_path / "_kernels.py"
    edited.write_bytes(_compiled._SOURCE.read_bytes() + b"\n# edited\n")
    name = _compiled._module_name()
    monkeypatch.setattr(_compiled, "_SOURCE", edited)
    assert _compiled._module_name() != name


@pytest.mark.slow
def test_the_aot_kernel_gives_the_jit_bits_without_numba(tmp_path):
    # build into a fresh directory (15-20 s), then fit in two fresh processes: the AOT
    # kernel's (numba never imported) and the JIT kernel's; the coefficients are equal
    # to the bit
    env = {**os.environ, "SKSPARSE_NN_KERNEL_DIR": str(tmp_path), "OMP_NUM_THREADS": "1"}
    script = (
        "import sys, numpy as np, scipy.sparse as sp\n"
        "from sksparse_nn import SparseLinearClassifier\n"
        "from sksparse_nn.solvers import _compiled\n"
        "X = sp.random(60, 300, density=0.05, format='csr', random_state=0)\n"
        "y = (np.asarray(X[:, :10].sum(axis=1)).ravel() > 0.05).astype(int)\n"
        "est = SparseLinearClassifier(lam=0.002, D=2, random_state=0)\n"
        "np.save(sys.argv[1], est.fit(X, y).coef_)\n"
        "print(bool(_compiled._kernel), 'numba' in sys.modules)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    build = "from sksparse_nn.solvers import build_kernels; assert build_kernels()"
    subprocess.run([sys.executable, "-c", build], env=env, check=True, cwd=root)
    out = {}
    for kind, flag in (("aot", "1"), ("jit", "0")):
        run = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path / f"{kind}.npy")],
            env={**env, "SKSPARSE_NN_AOT": flag}, cwd=root, check=True,
            capture_output=True, text=True,
        )  # fmt: skip
        out[kind] = run.stdout.split()
    assert out["aot"] == ["True", "False"]  # the AOT kernel, and no numba
    assert out["jit"] == ["False", "True"]
    np.testing.assert_array_equal(np.load(tmp_path / "aot.npy"), np.load(tmp_path / "jit.npy"))


def test_a_read_only_package_builds_into_the_user_cache(monkeypatch, tmp_path):
    # the package's directory first where the kernel is there, else the first writable
    package, user = tmp_path / "package", tmp_path / "user"
    package.mkdir()
    monkeypatch.delenv("SKSPARSE_NN_KERNEL_DIR", raising=False)
    monkeypatch.setattr(_compiled, "_directories", lambda: [package, user])
    monkeypatch.setattr(_compiled, "_writable", lambda d: d != package)
    assert _compiled._path("k").parent == user
    (package / _compiled._path("k").name).touch()  # built there (by an administrator)
    assert _compiled._path("k").parent == package  # a build found is loaded, read-only
