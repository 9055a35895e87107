"""Regularization paths for every estimator: one warm-started fit per lam, dense to sparse.

For ``D > 2`` a group at exactly zero is a local minimum that never comes back, so paths
run from small lam (dense) to large lam (sparse), each fit starting from the previous
solution re-split into balanced factors. An estimator whose problem is convex may ask for
the other order (``path_order()``: the D = 2 linear models run sparse to dense, their
working sets growing from the empty model). The engine uses only the estimators' public
path protocol (see :func:`regularization_path`); it knows nothing of gating.

With ``cv``, every fold runs the same warm-started path on a common grid, in parallel
through joblib (so ``joblib.parallel_config(backend="dask")`` spreads the folds over a
cluster), while the calling process runs the path on all the data; the result then holds
per-fold scores, their mean and standard error, ``best_lam_`` and ``lam_1se_``.

With ``checkpoint=DIR`` every finished point of every path is written to plain files as
it finishes, and a rerun resumes each path after its last finished point; a directory of
another computation (other data, parameters, grid, folds) is refused.

Failures: a diverged point is recorded as failed and ends its path; Ctrl-C returns the
finished points and folds (``completed=False``) and chooses no lam. Parallel folds do not
receive the calling process's SIGINT: it is forwarded to them through a flag file
(:func:`sksparse_nn.utils.interrupt.interrupt_on`), and a fold that received the
signal itself (a terminal signals the whole process group) raises the flag for the others.

Modules, one job each:

* ``_engine``: :func:`regularization_path`, which runs the full-data path and the folds
  (``fit_params``: e.g. sample weights, the rows of each fold's), and
  :func:`weighted_lambda_max`, the top of a default grid under sample weights;
* ``_grid``: :func:`lambda_grid` and the checks of the grid arguments;
* ``_points``: one warm-started path on one data set (a grid, a fold), point by point;
* ``_parallel``: the CV folds in joblib workers, with Ctrl-C forwarded to them;
* ``_assemble``: the result from the points and folds, and the one-standard-error rule;
* ``_result``: :class:`RegularizationPath`;
* ``_members``: :func:`prefer_linear`, the choice between a network's CV path and its
  linear member's on the same folds;
* ``_warnings``: the path's warnings, raised once in the calling process;
* ``_checkpoint``: a checkpoint directory: its manifest, the point files of each path
  (atomic writes, checksums), the refusal of another computation;
* ``_fingerprint``: what identifies a computation (data hashes, parameters, grid, folds)
  and what differs between two.
"""

from ._assemble import _one_se_rule  # noqa: F401 (importable as sksparse_nn.path._one_se_rule)
from ._engine import regularization_path, weighted_lambda_max
from ._grid import lambda_grid
from ._members import prefer_linear
from ._result import RegularizationPath

__all__ = [
    "RegularizationPath",
    "lambda_grid",
    "prefer_linear",
    "regularization_path",
    "weighted_lambda_max",
]
