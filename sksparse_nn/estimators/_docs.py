"""Parameter and attribute entries shared by the families' docstrings.

A family writes its own entries (what differs: the penalty's groups, optimizer, defaults)
and names the shared ones as ``$name`` on a line of their own; :func:`fill` puts the one
shared text there, so a parameter every estimator has is explained once, the same way
everywhere (skorch assembles its net docstrings the same way).
"""

from __future__ import annotations

__all__ = ["fill"]

_SHARED = {
    "D": """\
D : int, default=3
    Gating depth >= 2: 2 is the group lasso (convex); 3 and 4 give the sparser
    non-convex penalties ``||w_j||^(2/3)`` and ``||w_j||^(1/2)``, which remove groups
    faster and more cleanly.""",
    "groups": """\
groups : None, int, list of index lists or array of labels, default=None
    Which input features are kept or removed together (e.g. the one-hot columns of a
    categorical variable, or the columns of one modality). ``None``: each feature
    alone; ``k``: consecutive groups of ``k`` features; lists of feature indices
    (features in no list are unpenalized); or one integer label per feature (``-1`` =
    unpenalized). Contiguous group *sizes* (``[1, 3, 2]``, the form of skglm and
    celer) are not labels: convert them with
    :func:`~sksparse_nn.groups.group_labels_from_sizes`.""",
    "group_weights": """\
group_weights : None, "sqrt" or array-like of shape (n_groups,), default=None
    ``rho_j``: ones, square root of group sizes, or explicit non-negative weights.""",
    "sparsifier": """\
sparsifier : {"dgating", "dam", "ds", "l21"}, default="dgating"
    How groups are removed during training (:mod:`sksparse_nn.sparsifiers`):
    ``"dgating"`` (D-Gating, the penalty ``lam * sum_j ||w_j||^(2/D)``); ``"ds"``
    (differentiable sparsification: thresholded scales of the groups with an l1 norm, by
    default the group lasso's penalty ``lam * sum_j ||w_j||``); ``"l21"`` (that penalty
    by plain subgradient steps: no exact zeros, groups below a magnitude threshold,
    ``sparsifier_params={"threshold": 1e-3}`` by default, are removed at the end);
    ``"dam"`` (discriminative masking: ordered gates of hidden neurons with the penalty
    ``lam * (beta + k)``; it cannot select input features). ``D`` applies to
    ``"dgating"`` only.""",
    "sparsifier_params": """\
sparsifier_params : dict or None, default=None
    Options of the sparsifier (e.g. ``{"norm": "l0.5"}`` for ``"ds"``, ``{"k": 5.0}``
    for ``"dam"``); see its class in :mod:`sksparse_nn.sparsifiers`.""",
    "lr_schedule": """\
lr_schedule : {"cosine", "constant"}, default="cosine"
    ``"cosine"``: with an integer ``max_epochs`` the rate decays to zero over them; with
    ``None`` a fresh fit decays it over the automatic budget's cap, while a warm start
    (a path point) holds the full rate, as shrinking groups need, and decays it over the
    cap's last quarter; a settled fit anneals it to zero and stops. ``"constant"``: the
    full rate throughout; a settled fit stops at once.""",
    "tol": """\
tol : float or None, default=None
    Stop early when an epoch lowers the training loss by less than ``tol`` (relative).""",
    "early_stopping": """\
early_stopping : bool, default=False
    Hold out ``validation_fraction`` of the rows and stop after ``n_iter_no_change``
    epochs without improvement of the validation loss, restoring the best weights.""",
    "validation_fraction": """\
validation_fraction : float, default=0.1
    Fraction of the rows held out with ``early_stopping``.""",
    "n_iter_no_change": """\
n_iter_no_change : int, default=10
    Patience of ``early_stopping``, in epochs.""",
    "settle": """\
settle : {"support", "objective"}, default="support"
    What a fit with the automatic budget (``max_epochs=None``) waits for before its
    final anneal, besides a steady support. ``"support"``: also every selected group
    settled, none still on its way to zero, so that the kept groups are exact: the
    model you keep. ``"objective"``: the objective on a plateau, groups on their way to
    zero left where they are (those whose removal the objective allows are dropped as
    they go); faster, for models that are only scored: the CV folds of
    :func:`~sksparse_nn.regularization_path` and :class:`~sksparse_nn.SparsePathCV`
    fit with it (``fold_params()``).""",
    "warm_start": """\
warm_start : bool, default=False
    Start from the previous fit (its factors re-split balanced); the path engine uses it
    to go from one lam to the next.""",
    "random_state": """\
random_state : int, RandomState or None, default=None
    Seeds the initialization and the batch order (torch's global RNG is left
    untouched).""",
    "device": """\
device : str, default="cpu"
    Training device; the fitted model always lives on the CPU.""",
    "n_threads": """\
n_threads : int or None, default=None
    torch intra-op threads during ``fit``; the caller's setting is restored after.
    ``None``: one thread (torch and BLAS) when an optimizer step is small (rows per
    step times features at most 2**20), where extra threads only add
    synchronization; torch's own setting otherwise.""",
    "verbose": """\
verbose : int, default=0
    Show a progress bar when > 0.""",
    "max_epochs_warning": """\
With ``None`` that is a cap: a fit stops once it has settled (the same groups above
``zero_tol``, none still shrinking, and a flat objective over about 100 optimizer
steps), after a short anneal of the learning rate; an integer runs that many epochs.
Warm starts (path points) warm the rate up over about 50 steps. A ``ConvergenceWarning``
says when the cap ends a fit whose loss is still falling or whose groups still shrink.""",
    # method sections
    "fit_returns": """\
Returns
-------
self : object
    The fitted estimator.

Raises
------
TrainingDivergedError
    When the training loss becomes non-finite or explodes (a ``ValueError``; the
    message names ``lr``, ``lam`` and the scale of the data).
KeyboardInterrupt
    On Ctrl-C, once training has stopped; the estimator is then not fitted.""",
    # attributes
    "group_norms_": """\
group_norms_ : ndarray of shape (n_groups,)
    Norm of every penalized group (in the units the penalty sees); exactly 0 for
    removed groups. What :func:`~sksparse_nn.regularization_path` records.""",
    "sparsity_gap_": """\
sparsity_gap_ : tuple of float
    (largest group norm set to exactly zero, smallest group norm kept) before the
    ``zero_tol`` threshold: a clean fit has a gap of many orders of magnitude.""",
    "history_": """\
history_ : skorch.History
    Per-epoch training (and validation) losses.""",
    "n_iter_": """\
n_iter_ : int
    Number of epochs run.""",
    "n_features_in_": """\
n_features_in_ : int
feature_names_in_ : ndarray of str
    Defined when ``X`` has feature names (pandas).""",
}


# the parameters every family ends its list with, in this order
_GROUPS = {
    "common_parameters": [
        "early_stopping",
        "validation_fraction",
        "n_iter_no_change",
        "settle",
        "warm_start",
        "random_state",
        "device",
        "n_threads",
        "verbose",
    ],
}


def _indented(text, indent):
    return "\n".join((indent + line) if line else line for line in text.splitlines())


def fill(doc):
    """``doc`` with every line ``<indent>$name`` replaced by the shared text ``name``
    at that indentation (an entry's header at the line's indentation, its body 4 spaces
    deeper; ``$max_epochs_warning`` is body text; ``$common_parameters`` stands for the
    entries every family ends its parameters with)."""
    lines = []
    for line in doc.splitlines():
        stripped = line.strip()
        name = stripped[1:] if stripped.startswith("$") else None
        if name in _SHARED or name in _GROUPS:
            indent = line[: len(line) - len(line.lstrip())]
            for key in _GROUPS.get(name, [name]):
                lines.append(_indented(_SHARED[key], indent))
        else:
            lines.append(line)
    out = "\n".join(lines)
    if "\n" in doc and doc.endswith("\n"):
        out += "\n"
    return out
