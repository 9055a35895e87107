"""Test-session settings: headless plotting and torch's intra-op thread count.

``SKSPARSE_NN_TEST_THREADS`` sets torch's intra-op threads for the session: an integer
(default ``1``: tiny tensors, shared CPUs) or ``default`` to keep torch's own choice.
``make test`` runs the ``numerics`` tests a second time with 2 threads, so that no
tolerance silently relies on one summation order. (BLAS threads follow
``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``, read when numpy and torch load.)
"""

import os

import matplotlib
import pytest
import torch

THREADS_ENV = "SKSPARSE_NN_TEST_THREADS"

matplotlib.use("Agg")


def _intra_op_threads():
    value = os.environ.get(THREADS_ENV, "1").strip().lower()
    if value == "default":
        return None
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"{THREADS_ENV} must be a positive integer or 'default', got {value!r}.")
    return threads


_THREADS = _intra_op_threads()
if _THREADS is not None:
    torch.set_num_threads(_THREADS)
if _THREADS is None or _THREADS > 1:
    # the estimators run small fits on one thread (n_threads=None); let them use the
    # session's threads, so that this pass really trains with more than one
    from sksparse_nn.training import runtime as _guards

    _guards.SMALL_STEP_WORK = 0


def pytest_report_header(config):
    source = "torch default" if _THREADS is None else f"{THREADS_ENV}={_THREADS}"
    return f"torch intra-op threads: {torch.get_num_threads()} ({source})"


@pytest.fixture
def float64_default():
    """Exact-math tests of the torch layer run in float64 (training the estimators is
    float32's business); use with ``pytestmark = pytest.mark.usefixtures(...)``."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)
