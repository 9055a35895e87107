"""Group structures: which entries of a weight tensor, or which features of a linear
model, share a gate and a penalty.

The package holds, by job: the groupings of weight tensors (:class:`Grouping`, resolved
from the specifications below; ``_tensors``), the group specifications of the linear
models, one integer label per feature (:func:`group_labels_from_sizes` and the checks the
solvers and the D-gated linear estimators share; ``_features``), the arithmetic of the
group penalty on labelled rows (``_penalty``).

A grouping maps every entry of a tensor of a fixed shape to one of ``J`` groups (or to
no group at all). It answers two questions, both as batched tensor operations:

* :meth:`Grouping.expand` turns one value per group (shape ``(J,)``) into a tensor that
  broadcasts against the weight, with 1 for entries in no group;
* :meth:`Grouping.group_sum` sums a weight-shaped tensor within each group, giving ``(J,)``.

Specifications accepted by :func:`resolve_groups` (and therefore by
:func:`sksparse_nn.gating.dgate`):

``"in"``
    one group per input column of a ``Linear`` weight ``(out, in)``, i.e. per input
    feature; for a convolution ``(out, in, *k)``, per input channel.
``"out"``
    one group per output neuron (row) or convolution filter.
``"element"``
    every entry is its own group (deep weight factorization).
``AxisGroups(dim, labels)``
    entries grouped by an integer label along one axis, e.g. attention heads as blocks of
    rows of a projection matrix, or groups of input features of a linear model.
an integer array of the weight's shape
    explicit labels per entry. Labels ``>= 0`` name groups, ``-1`` means "in no group"
    (such entries are neither gated nor penalized). Groups are numbered by sorted label.
"""

# __all__ is the public API. The names re-exported by alias are the package-internal API,
# shared by the proximal solvers and the D-gated linear estimators: the group
# specifications of the linear models (check_groups, count_groups, resolve_group_weights,
# same_group_pairs, spec_key, held_penalty_groups) and the group penalty's arithmetic on
# labelled rows (norms_by_label, penalty_value).
from ._features import check_groups as check_groups
from ._features import count_groups as count_groups
from ._features import group_labels_from_sizes
from ._features import held_penalty_groups as held_penalty_groups
from ._features import resolve_group_weights as resolve_group_weights
from ._features import same_group_pairs as same_group_pairs
from ._features import spec_key as spec_key
from ._penalty import norms_by_label as norms_by_label
from ._penalty import penalty_value as penalty_value
from ._tensors import AxisGroups, Grouping, resolve_groups

__all__ = ["AxisGroups", "Grouping", "group_labels_from_sizes", "resolve_groups"]
