r"""Reference group-lasso solver (numpy/scipy only, no torch).

The problem solved is the (weighted) group lasso for least-squares regression

.. math::

    \min_{w, b}\; \frac{1}{2n}\,\|y - Xw - b\mathbf{1}\|_2^2
        \;+\; \lambda \sum_{j=1}^{J} \rho_j \,\|w_{G_j}\|_2 ,

optionally with sample weights (the loss ``sum_i s_i (y_i - x_i w - b)^2 / (2n)``, ``s``
rescaled to sum to ``n``) and non-negative coefficients (``positive``),
where ``G_1, ..., G_J`` are disjoint groups of features, ``rho_j >= 0`` are group weights
(``rho_j = 1`` by default, like skglm and celer) and features in no group are not
penalized. The intercept ``b`` is optional and never penalized.

The same penalty with the logistic loss (binary) or the softmax cross-entropy
(multinomial; a group is then its features' coefficients across all classes) is solved by
:func:`solve_group_logistic` with the same stopping rule (proximal Newton steps on working
sets for binary problems with dense ``X``, FISTA otherwise).

It is meant as an exact, dependency-light reference for the D-Gating estimators of this
package (which solve the same problem by smooth gradient descent): it reaches the optimum
to a certified KKT tolerance.

Contents
--------
:func:`solve_group_lasso`
    one problem: working sets (the live groups plus the worst violators of the KKT
    conditions) solved on their Gram blocks by FISTA with adaptive restart and Newton
    steps on the identified support; the stopping rule is checked on all groups.
    Options: non-negative coefficients (``positive``) and ``sample_weight``.
:func:`group_lasso_path`
    a sequence of penalties with warm starts, sharing the precomputations.
:func:`lambda_max`
    the smallest penalty at which every penalized group is zero.
:class:`~sksparse_nn.GroupLassoRegressor`
    the scikit-learn estimator.
:func:`solve_group_logistic`, :class:`~sksparse_nn.GroupLassoClassifier`
    the logistic / multinomial counterparts (``lambda_max(..., loss="log_loss")``).
``check_groups`` / ``resolve_group_weights``
    validation of group specifications and group weights, shared with the estimators of
    the library.

Inside the package the solvers compose as datafit x penalty x solver (datafits
``LeastSquares``, ``Logistic``, ``Multinomial``; penalties ``GroupNorm`` and the gated
``GatedGroupNorm``; ``proximal_gradient`` runs any pair), and the functions above are the
fast presets of those compositions; the D-gated linear estimators call the gated presets
(``gated_least_squares_fit``, ``gated_logistic_fit``). The package's architecture page
draws the whole room.

Stopping rule
-------------
The solver stops when the *relative KKT violation* is at most ``tol``. With
``g = X_c^T (y_c - X_c w) / n`` (``X_c``, ``y_c`` centered when ``fit_intercept``; with
sample weights, weighted-centered and scaled by ``sqrt(s)``) the violation of group ``j``
is its distance to the subdifferential of the penalty,

* ``max(0, ||g_j|| - lam rho_j)`` if ``w_j = 0``,
* ``||g_j - lam rho_j w_j / ||w_j||||`` if ``w_j != 0``,

(with ``positive``, the distance to the subdifferential plus the normal cone of
``w >= 0``: a coordinate at zero only counts ``max(g_i, 0)``, and a zero group
``max(0, ||max(g_j, 0)|| - lam rho_j)``), and unpenalized features (in no group, or in a
group of weight 0) count as groups with
``rho = 0`` (violation ``|g_i|``, respectively ``||g_j||``). The maximum over groups is
divided by the scale ``max_j ||X_{c,j}^T y_c|| / n`` (the same maximum at ``w = 0`` and
``lam = 0``, i.e. ``lambda_max`` for unit weights without unpenalized features; ``1`` if it
is zero), which makes ``tol`` independent of the units of ``y``.

For the logistic loss (:func:`solve_group_logistic`) ``g`` is minus the gradient of the
mean log-loss, ``X_c^T (Y - P) / n`` (``P`` the predicted probabilities; one column per
class, and group norms are Frobenius norms over the rows of the group's features), and the
scale is the same maximum at the null model (intercept fitted, every coefficient zero:
``P`` = the class frequencies; ``1/2`` or ``1/K`` without intercept). The intercepts are
not exact by construction there; they count as one more unpenalized group with violation
``s ||mean(P - Y)||``, where ``s = ||X_c||_2 / sqrt(n)`` (``1`` if ``X_c = 0``) gives them
the units of the columns of ``X_c`` (see ``LogisticDesign``). Hence ``tol`` means the
same for both losses: the largest KKT violation relative to the largest gradient group
norm at the null model.
"""

# check_groups / resolve_group_weights (see Contents) and count_groups live in
# sksparse_nn.groups; re-exported by alias, not in __all__.
from ..groups import check_groups as check_groups
from ..groups import count_groups as count_groups
from ..groups import resolve_group_weights as resolve_group_weights
from ._estimators import GroupLassoClassifier, GroupLassoRegressor
from ._lambda_max import lambda_max
from ._least_squares import GroupLassoResult, group_lasso_path, solve_group_lasso
from ._logistic import GroupLogisticResult, solve_group_logistic

# isort: split
# The composition (package-internal, re-exported by alias, not in __all__): datafits,
# penalties and the solver any pair of them runs on.
from ._composed import ComposedResult as ComposedResult
from ._composed import proximal_gradient as proximal_gradient
from ._datafits import LeastSquares as LeastSquares
from ._datafits import Logistic as Logistic
from ._datafits import Multinomial as Multinomial
from ._penalties import GatedGroupNorm as GatedGroupNorm
from ._penalties import GroupNorm as GroupNorm
from ._routes import gated_fit as gated_fit
from ._routes import solve as solve

# isort: split
# The package-internal API of the linear family (estimators/linear.py and
# _linear_training.py): the gated fits, their data memo and the pieces of the ridge
# start. Re-exported by alias, not in __all__, which lists the user-facing names.
from ._curvature import DenseCurvature as DenseCurvature
from ._curvature import DesignCurvature as DesignCurvature
from ._data_memo import DataMemo as DataMemo
from ._data_memo import data_key as data_key
from ._data_memo import same_key as same_key
from ._gated_fits import GatedFit as GatedFit
from ._gated_fits import gated_least_squares_fit as gated_least_squares_fit
from ._gated_fits import gated_logistic_fit as gated_logistic_fit
from ._gated_setup import KKT_TOL as KKT_TOL
from ._gated_setup import centered_moments as centered_moments
from ._gated_setup import curvature_operator as curvature_operator
from ._gated_setup import is_wide as is_wide
from ._gated_setup import uses_working_sets as uses_working_sets

__all__ = [
    "GroupLassoClassifier",
    "GroupLassoRegressor",
    "GroupLassoResult",
    "GroupLogisticResult",
    "group_lasso_path",
    "lambda_max",
    "solve_group_lasso",
    "solve_group_logistic",
]
