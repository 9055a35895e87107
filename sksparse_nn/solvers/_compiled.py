"""The compiled coordinate-descent kernel, ahead of time: :func:`model_cd` without numba
in the process.

numba's on-disk cache (``cache=True``) saves the compilation, not the start: a fresh
process that loads a cached kernel imports numba and initializes its typing context,
about 0.5 s (measured on the 500 x 5000 group-lasso path: 0.17 s import, 0.38 s to
load the cached overload), a third of that path. This module builds the kernel once
per installation as a plain extension module (``numba.pycc``, for the host CPU), whose
import costs under a millisecond and needs no numba; later processes load it.

* :func:`model_cd`: the AOT kernel where it exists and the arguments have its types
  (int32 CSC indices, the usual scipy layout), else the numba JIT kernel of
  :mod:`._kernels` (compiled or loaded from numba's cache);
* :func:`dense_matvec`, :func:`dense_rmatvec`: the products of a dense working set's
  columns (no row indices stored), from the same module;
* :func:`weighted_sums`, :func:`columns_matvec`, :func:`columns_rmatvec`: a working
  set's per-column sums and a sparse set's products, on its columns read in place from
  a CSC matrix (pointers ``lo``/``hi`` per column), from the same module;
* :func:`csr_columns`: a working set's columns of a CSR matrix as CSC arrays (one pass
  over its entries: no column-ordered copy of all of it), from the same module;
* :func:`build_kernels`: compiles the AOT kernel (15-20 s, once: the first fit that needs the
  kernel runs it when none is built, in place of numba's JIT compilation, 13 s on the
  same machine); also ``python -c "from sksparse_nn.solvers import build_kernels;
  build_kernels()"`` after installing.

The module file's name carries a digest of the kernels' source, numba's version, the
interpreter's ABI and the host CPU, so an edited kernel, another numba or another CPU
gets its own build, never a stale or foreign one. It lives in the package's
``__pycache__`` (where numba keeps its cache; the user's cache directory when the
package is read-only), or in ``SKSPARSE_NN_KERNEL_DIR``;
``SKSPARSE_NN_AOT=0`` turns the AOT kernel off (numba's JIT kernel only). A build that
fails (no C compiler, a read-only directory) leaves the JIT kernel in use, silently: it
is the same computation, to the bit (the AOT code is generated for the host CPU's
features, as the JIT's).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import shutil
import sysconfig
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

__all__ = [
    "build_kernels", "columns_matvec", "columns_rmatvec", "csr_columns", "dense_matvec",
    "dense_rmatvec", "model_cd", "weighted_sums",
]  # fmt: skip

_SOURCE = Path(__file__).with_name("_kernels.py")
# numba.pycc's signature of _kernels.model_cd for scipy's int32 CSC indices (see there)
_A, _I, _B = "f8[::1]", "i8[::1]", "b1[::1]"
_SIGNATURE = (
    f"Tuple((f8[::1], f8[::1], f8, i8))({_A}, {_A}, {_A}, {_I}, {_A}, i8, {_I}, {_I}, {_A}, "
    f"{_A}, {_A}, {_A}, f8, f8, {_B}, b1, {_I}, {_I}, i4[::1], {_A}, b1, f8, i8, i8)"
)
# the dense working sets' products (see _kernels.dense_matvec), built beside model_cd
_DENSE_SIGNATURE = "void(f8[::1], f8[::1], f8[::1])"
_DENSE = ("dense_matvec", "dense_rmatvec")
# the sparse sets' column sums and products (see _kernels.weighted_sums), the same
# column layout as model_cd's: (lo, hi, indices, data, ...)
_COLUMNS = {
    "weighted_sums": f"void({_I}, {_I}, i4[::1], {_A}, {_A}, b1, {_A}, {_A})",
    "columns_matvec": f"void({_I}, {_I}, i4[::1], {_A}, {_A}, {_A})",
    "columns_rmatvec": f"void({_I}, {_I}, i4[::1], {_A}, {_A}, {_A})",
    # a CSR matrix's columns as CSC arrays (see _kernels.csr_columns)
    "csr_columns": f"void(i4[::1], i4[::1], {_A}, i4[::1], {_I}, i4[::1], {_A})",
}
# argument positions of the arrays whose dtypes the AOT kernel fixes
_INT64 = (3, 6, 7, 16, 17)
_INT32 = (18,)
_kernel = None  # the loaded AOT function, or False when there is none
_dense = {}  # the loaded AOT dense products (empty without a module)
# Age after which a build lock counts as left by a builder that died (a build takes
# well under a minute).
_STALE_LOCK_S = 600


def _directories():
    """Where a built kernel may be: ``SKSPARSE_NN_KERNEL_DIR`` alone when set, else the
    package's ``__pycache__`` and then the user's cache (``$XDG_CACHE_HOME`` or
    ``~/.cache``, ``/sksparse_nn``: for a package installed read-only)."""
    if os.environ.get("SKSPARSE_NN_KERNEL_DIR"):
        return [Path(os.environ["SKSPARSE_NN_KERNEL_DIR"])]
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return [_SOURCE.parent / "__pycache__", Path(cache) / "sksparse_nn"]


def _writable(directory):
    """Whether a kernel can be written into ``directory`` (created if missing)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(directory, os.W_OK)


def _host():
    """What identifies the CPU the kernel is built for (its model and instruction set
    extensions on Linux; the platform's processor name elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [line for line in f if line.startswith(("model name", "flags"))][:2]
        return "".join(lines) or platform.processor()
    except OSError:
        return platform.processor() + platform.machine()


def _module_name():
    """``_sksparse_cd_<digest>``: of the kernels' source, numba's version, the
    interpreter's ABI and the host CPU (a package directory shared between machines
    keeps one build per CPU). Costs about a millisecond: no numba, no llvmlite."""
    digest = hashlib.sha256(_SOURCE.read_bytes())
    spec = importlib.util.find_spec("numba")
    version = Path(spec.origin).with_name("_version.py") if spec and spec.origin else None
    digest.update(version.read_bytes() if version and version.exists() else b"")
    digest.update((sysconfig.get_config_var("EXT_SUFFIX") or "").encode())
    digest.update(_host().encode())
    return f"_sksparse_cd_{digest.hexdigest()[:16]}"


def _path(name):
    """The kernel's file: the first of :func:`_directories` that holds it, else the
    first writable one (where a build goes), else the first."""
    file = name + (sysconfig.get_config_var("EXT_SUFFIX") or ".so")
    candidates = [d / file for d in _directories()]
    found = next((c for c in candidates if c.exists()), None)
    return found or next((c for c in candidates if _writable(c.parent)), candidates[0])


def _load(path, name):
    loader = importlib.machinery.ExtensionFileLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    _dense.update({name: getattr(module, name) for name in (*_DENSE, *_COLUMNS)})
    return module.model_cd


@contextlib.contextmanager
def _host_features(codegen):
    """numba.pycc's code generation for the host CPU's features, as numba's JIT does
    (pycc's default, the features the CPU model implies, rounds differently: 4e-8 on
    a sparse logistic path), so the two kernels give the same bits."""
    aot = codegen.AOTCPUCodegen
    original = aot._customize_tm_features
    aot._customize_tm_features = codegen.JITCPUCodegen._customize_tm_features
    try:
        yield
    finally:
        aot._customize_tm_features = original


def build_kernels():
    """Compile the solvers' coordinate-descent kernel ahead of time, for this machine.

    Optional: the first fit that needs the kernel builds it when it is missing (once per
    installation, 15-20 s, in place of numba's compilation of about the same cost);
    calling this after installing moves that cost out of the first fit. Later processes
    load the built kernel in under a millisecond, without importing numba. The build
    replaces an older one atomically (concurrent processes see a whole file or none).

    Returns
    -------
    path : pathlib.Path or None
        The built extension module, or None when it cannot be built (no C compiler, a
        read-only directory): numba's just-in-time kernel then serves, with the same
        results.
    """
    name = _module_name()
    target = _path(name)
    try:
        import llvmlite.binding as llvm
        from numba.core import codegen
        from numba.pycc import CC

        from . import _kernels

        with (
            tempfile.TemporaryDirectory() as tmp,
            warnings.catch_warnings(),
            _host_features(codegen),
        ):
            warnings.simplefilter("ignore")  # numba.pycc's pending deprecation
            cc = CC(name)
            cc.output_dir = tmp
            cc.verbose = False
            cc.target_cpu = llvm.get_host_cpu_name()
            cc.export("model_cd", _SIGNATURE)(_kernels.model_cd.py_func)
            for dense in _DENSE:
                cc.export(dense, _DENSE_SIGNATURE)(getattr(_kernels, dense).py_func)
            for column, signature in _COLUMNS.items():
                cc.export(column, signature)(getattr(_kernels, column).py_func)
            cc.compile()
            built = next(Path(tmp).glob(name + "*"))
            target.parent.mkdir(parents=True, exist_ok=True)
            staged = target.with_name(f".{target.name}.{os.getpid()}")
            shutil.copyfile(built, staged)
            os.replace(staged, target)  # other processes see the whole file or none
    except Exception:  # no compiler, read-only package, ...: the JIT kernel serves
        return None
    return target


@contextlib.contextmanager
def _build_lock(path):
    """Whether this process may build ``path``: one process at a time (parallel fits'
    workers that find no kernel do not all build it; the others take the JIT kernel).
    A lock older than ``_STALE_LOCK_S`` (a builder that died) is taken over."""
    lock = path.with_name(f".{path.name}.lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if lock.exists() and time.time() - lock.stat().st_mtime > _STALE_LOCK_S:
            lock.unlink(missing_ok=True)
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except OSError:
        yield False
        return
    try:
        os.close(fd)
        yield True
    finally:
        lock.unlink(missing_ok=True)


def _aot_kernel():
    """The AOT function: loaded, else built once (by one process), else False."""
    global _kernel
    if _kernel is None:
        _kernel = False
        if os.environ.get("SKSPARSE_NN_AOT", "1") != "0":
            name = _module_name()
            path = _path(name)
            if not path.exists():
                with _build_lock(path) as mine:
                    if mine:
                        build_kernels()
            if path.exists():
                try:
                    _kernel = _load(path, name)
                except ImportError:
                    _kernel = False
    return _kernel


def _fits(args):
    """Whether the arguments have the AOT signature's types."""
    return all(
        isinstance(args[i], np.ndarray) and args[i].dtype == np.int64 and args[i].flags.c_contiguous
        for i in _INT64
    ) and all(
        isinstance(args[i], np.ndarray) and args[i].dtype == np.int32 and args[i].flags.c_contiguous
        for i in _INT32
    )


def model_cd(*args):
    """:func:`._kernels.model_cd` (same arguments, same results), by the AOT kernel
    where its types fit."""
    kernel = _aot_kernel()
    if kernel and _fits(args):
        try:
            return kernel(*args)
        except TypeError:  # an argument of another type: the JIT kernel takes it
            pass
    from . import _kernels  # numba, imported only here

    return _kernels.model_cd(*args)


def _dense_product(name, *args):
    """``_kernels.<name>(*args)`` by the AOT module where it is loaded and the arguments
    have its types, else numba's JIT."""
    if _aot_kernel() and name in _dense:
        try:
            return _dense[name](*args)
        except TypeError:  # another dtype or layout: the JIT takes it
            pass
    from . import _kernels

    return getattr(_kernels, name)(*args)


def dense_matvec(data, w, z):
    """:func:`._kernels.dense_matvec` (``z += A w``), by the AOT module where built."""
    _dense_product("dense_matvec", data, w, z)


def dense_rmatvec(data, r, g):
    """:func:`._kernels.dense_rmatvec` (``g = A^T r``), by the AOT module where built."""
    _dense_product("dense_rmatvec", data, r, g)


def weighted_sums(lo, hi, indices, data, h, dense, c, diag):
    """:func:`._kernels.weighted_sums` (``c = A^T h``, ``diag = (A * A)^T h`` per
    column), by the AOT module where built."""
    _dense_product("weighted_sums", lo, hi, indices, data, h, dense, c, diag)


def columns_matvec(lo, hi, indices, data, w, z):
    """:func:`._kernels.columns_matvec` (``z += A w``), by the AOT module where built."""
    _dense_product("columns_matvec", lo, hi, indices, data, w, z)


def columns_rmatvec(lo, hi, indices, data, r, g):
    """:func:`._kernels.columns_rmatvec` (``g = A^T r``), by the AOT module where built."""
    _dense_product("columns_rmatvec", lo, hi, indices, data, r, g)


def csr_columns(indptr, indices, data, where, out_ptr, out_indices, out_data):
    """:func:`._kernels.csr_columns` (the columns ``where`` marks, as CSC arrays), by the
    AOT module where built."""
    _dense_product("csr_columns", indptr, indices, data, where, out_ptr, out_indices, out_data)
