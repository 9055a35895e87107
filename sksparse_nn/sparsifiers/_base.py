"""The sparsifier protocol: structured sparsity as a parametrization of one tensor.

A *sparsifier* rewrites a weight tensor ``W`` (split into groups by a
:class:`~sksparse_nn.groups.Grouping`) as a differentiable function of free parameters,
and adds a penalty on them to the training loss, so that training with any gradient method
removes whole groups. Every method is one subclass of :class:`Sparsifier`, registered under
its ``method`` name; :func:`sparsify` attaches one to a tensor (or ties a further
tensor to one), and the functions of ``_model.py`` (the summed penalty, group norms, the
support, :func:`collapse`) work on any of them. Pure PyTorch.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parametrize

from ..groups import resolve_groups

__all__ = ["DEFAULT_METHOD", "Sparsifier", "get_sparsifier", "sparsifier_names", "sparsify"]

#: Default threshold of :func:`collapse`: float32 machine epsilon. Methods with exact zeros
#: drive unused groups far below it (typically 1e-30 or exact 0); it only removes dust.
ZERO_TOL = float(np.finfo(np.float32).eps)

#: The method estimators use unless told otherwise.
DEFAULT_METHOD = "dgating"

_REGISTRY = {}


class Sparsifier(nn.Module):
    """Base class of the structured-sparsity parametrizations.

    A subclass sets ``method`` (the name it is registered under) and defines

    ``forward(original)``
        the effective weight from the stored tensor ``original`` (the parametrization's
        ``original``, of the weight's shape) and the sparsifier's own parameters: a pure
        function of them, so a training step may evaluate every sparsified tensor once
        inside ``sparsifiers.cached``;
    ``penalty(original)``
        its differentiable penalty (the training loss is ``loss + lam * penalty``);
    ``initialize(original, init)``
        sets ``original`` and its own parameters in place so that the effective weight is
        the tensor's value when it was attached (``init="identity"``) or, for a warm start
        (``init="balanced"``), the same weight at the method's preferred representation,
        groups at zero kept at zero.

    It may override :meth:`keep`, :meth:`add_penalty_grad_` (with
    :meth:`fold_penalty_grad`), :meth:`curvatures`, the property :attr:`nonconvex` and
    the class attributes below.

    A group may span slices of several tensors (a conv filter, its BatchNorm's scale and
    shift and the next layer's input slice): ``sparsify(..., tie=leader)`` gives a further
    tensor an instance of the leader's method that shares the leader's factors, with its
    own grouping onto the same ``J`` groups (methods with ``tieable``). Its ``penalty``,
    :meth:`add_penalty_grad_` and :meth:`curvatures` then cover only its own
    ``original`` (the leader's cover the shared factors), and :func:`group_norms`,
    :func:`support` and :func:`collapse` judge each group by its norm over all the
    tensors of the tie.

    Parameters
    ----------
    grouping : Grouping
        Which entries of the tensor form a group.
    group_weights : tensor of shape (J,) or None
        Per-group penalty weights ``rho_j`` (``None``: all ones), for methods that use them.
    """

    #: Name under which :func:`~sksparse_nn.sparsifiers.sparsify` finds the class (set by each
    #: method).
    method = None
    #: Groups are masked in a fixed order (DAM): they must be interchangeable units.
    ordered = False
    #: Training reaches exact zeros by itself (else :meth:`keep` applies a threshold).
    exact_zeros = True
    #: The ``init`` values ``initialize`` understands.
    inits = ("identity", "balanced")
    #: Estimator parameters the method takes as options (an estimator passes them on).
    estimator_options = ()
    #: Whether an instance can share its factors with further tensors (``tie=``).
    tieable = False
    #: Whether estimators add a small L2 on the ungated weights a sparsified layer feeds
    #: (a penalty on a ReLU layer's scale alone lets training move that scale downstream).
    downstream_ridge = False

    @property
    def nonconvex(self):
        """Whether the penalty's slope is infinite at zero (a tiny group is on its way out,
        never at rest)."""
        return False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("method"):
            _REGISTRY[cls.method] = cls

    def __init__(self, grouping, group_weights=None):
        super().__init__()
        self.grouping = grouping
        self.register_buffer("group_weights", group_weights)
        self.__dict__["leader"] = None  # not a submodule: the tie's first instance

    @property
    def tied(self):
        """Whether this instance shares the factors of another one (its ``leader``)."""
        return self.leader is not None

    @classmethod
    def tied_to(cls, leader, grouping):
        """A new instance on ``grouping`` sharing ``leader``'s factors (methods with
        ``tieable`` define it)."""
        raise NotImplementedError

    @property
    def n_groups(self):
        return self.grouping.n_groups

    def forward(self, original):  # pragma: no cover - abstract
        raise NotImplementedError

    def penalty(self, original):  # pragma: no cover - abstract
        raise NotImplementedError

    def initialize(self, original, init):  # pragma: no cover - abstract
        raise NotImplementedError

    def add_penalty_grad_(self, original, scale):
        """Add ``scale`` times the gradient of :meth:`penalty` to the ``.grad`` of
        ``original`` and of this module's parameters, without an autograd graph, and
        return the penalty's value (a detached 0-dim tensor); ``None`` when the method
        has no closed form (training then differentiates :meth:`penalty` by autograd).

        Training loops call it after ``backward()`` instead of adding ``scale *
        penalty`` to the loss: the same update with a handful of in-place kernels
        instead of a graph of small autograd nodes per step.
        """
        return None

    def drop_(self, original, drop):
        """Set the groups ``drop`` (bool, shape ``(J,)``) to exactly zero in every factor,
        so that they stay zero under any gradient step; returns ``(tensor, keep)`` per
        factor touched (``keep`` broadcastable to it: 0 where dropped), or ``None`` when
        the method cannot (the default: a zero group of it is not a resting point). A
        tied tensor zeroes what is its own (``drop_groups_`` calls every tensor of a
        tie with the same groups). Used by training to remove a group in
        transit to zero at once (see
        :class:`~sksparse_nn.training.schedule.StopWhenSettled`)."""
        return None

    def fold_penalty_grad(self, scale):
        """Offer to add ``scale`` times the gradient of :meth:`penalty` during the backward
        pass of this tensor's next evaluation, as its gradients are formed; returns
        whether it will. The next :meth:`add_penalty_grad_` then only returns the value
        (it adds the gradient itself when no backward pass did). ``scale=None``
        withdraws the offer.

        For training loops that call :meth:`add_penalty_grad_` after ``backward()``
        anyway: called before the forward pass, it saves the separate pass over the
        gradients. ``False`` by default (nothing is folded).
        """
        return False

    def curvatures(self, original):
        """``(parameter, curvature)`` for each factor of the penalty with a known
        curvature: ``lam * penalty`` has second derivative at most ``lam * curvature``
        along it, so an SGD step of size above ``~1 / (lam * curvature)`` oscillates.
        Empty by default (no bound is known; optimizers leave the factor alone)."""
        return ()

    def group_norms(self, weight):
        """Euclidean norm of each group of the effective weight, shape ``(J,)``."""
        return self.grouping.group_sum(weight.pow(2)).sqrt()

    def keep(self, weight, zero_tol):
        """Groups that survive :func:`collapse`: norm at least ``zero_tol``, shape ``(J,)``."""
        return self.group_norms(weight) >= zero_tol

    def _weighted(self, per_group):
        return per_group.sum() if self.group_weights is None else per_group @ self.group_weights


def sparsifier_names():
    """Names of the registered sparsifiers (the ``method`` values of :func:`sparsify`).

    Returns
    -------
    names : list of str
        Sorted.
    """
    return sorted(_REGISTRY)


def get_sparsifier(method):
    """The :class:`Sparsifier` subclass registered as ``method``.

    Parameters
    ----------
    method : str or Sparsifier subclass
        A registered name (see :func:`sparsifier_names`); a subclass is returned as is.

    Returns
    -------
    cls : type
        The :class:`Sparsifier` subclass.

    Raises
    ------
    ValueError
        If no sparsifier is registered under ``method``.
    """
    if isinstance(method, type) and issubclass(method, Sparsifier):
        return method
    try:
        return _REGISTRY[method]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unknown sparsifier {method!r}; the registered ones are {sorted(_REGISTRY)}."
        ) from None


def _qualified(prefix, name):
    return f"{prefix}.{name}" if prefix else name


def _check_target(module, name, label):
    """The parameter ``module.<name>``, or a ValueError saying why it cannot be ``label``."""
    if not isinstance(module, nn.Module):
        raise ValueError(f"{label} needs a torch.nn.Module, got {type(module).__name__}.")
    params = dict(module.named_parameters(recurse=False))
    if parametrize.is_parametrized(module, name):
        for p in module.parametrizations[name]:
            if isinstance(p, Sparsifier):
                raise ValueError(
                    f"'{name}' of {type(module).__name__} is already sparsified "
                    f"(method {p.method!r})."
                )
        raise ValueError(
            f"'{name}' of {type(module).__name__} already has a parametrization; sparsify it first."
        )
    if not isinstance(params.get(name), nn.Parameter):
        raise ValueError(
            f"'{name}' is not a parameter of {type(module).__name__}; its parameters are "
            f"{sorted(params)}."
        )
    return params[name]


def _group_weights(group_weights, grouping, weight):
    if group_weights is None:
        return None
    rho = torch.tensor(np.asarray(group_weights, dtype=np.float64))
    if rho.shape != (grouping.n_groups,):
        raise ValueError(
            f"group_weights must have one entry per group ({grouping.n_groups}), "
            f"got shape {tuple(rho.shape)}."
        )
    if not torch.all(torch.isfinite(rho)) or torch.any(rho < 0):
        raise ValueError("group_weights must be finite and non-negative.")
    return rho.to(dtype=weight.dtype, device=weight.device)


def sparsify(
    module,
    name="weight",
    *,
    method="dgating",
    groups="in",
    group_weights=None,
    init="identity",
    tie=None,
    **options,
):
    """Make the groups of ``module.<name>`` removable by a sparsifier, in place.

    Parameters
    ----------
    module : nn.Module
        Module owning the parameter (e.g. an ``nn.Linear``).
    name : str, default="weight"
        Name of an ``nn.Parameter`` of ``module``.
    method : str or Sparsifier subclass, default="dgating"
        ``"dgating"`` (:class:`~sksparse_nn.gating.DGate`), ``"dam"``
        (:class:`~sksparse_nn.sparsifiers.DAM`), ``"ds"``
        (:class:`~sksparse_nn.sparsifiers.DS`), ``"l21"``
        (:class:`~sksparse_nn.sparsifiers.L21`), or any registered subclass.
    groups : {"in", "out", "element"}, AxisGroups or array-like of int, default="in"
        The group structure, see :mod:`sksparse_nn.groups`.
    group_weights : array-like of shape (J,), default=None
        Non-negative penalty weight of each group, for methods that weight groups.
    init : {"identity", "balanced"} or a method's own, default="identity"
        ``"identity"`` leaves the module's output unchanged; ``"balanced"`` also (the
        method's representation of the same weight for a warm start, zero groups stay 0);
        D-Gating also takes ``"dwf"`` (see :func:`~sksparse_nn.gating.dgate`).
    tie : Sparsifier, default=None
        A sparsifier already attached to another tensor whose groups these extend: the
        new parametrization shares its factors (``groups`` must map onto its ``J``
        groups; method, options and group weights are the tie's; ``init="identity"``).
    **options
        The method's own parameters (e.g. ``D`` for D-Gating, ``norm`` for DS).

    Returns
    -------
    module : nn.Module
        The same module, now parametrized.

    Examples
    --------
    >>> import torch
    >>> from sksparse_nn.sparsifiers import sparsify, penalty
    >>> layer = torch.nn.Linear(5, 3)
    >>> _ = sparsify(layer, groups="in", method="ds")
    >>> loss = layer(torch.randn(8, 5)).pow(2).mean() + 0.1 * penalty(layer)
    """
    if tie is not None and (not isinstance(tie, Sparsifier) or not type(tie).tieable):
        raise ValueError(f"tie must be a sparsifier whose method shares factors, got {tie!r}.")
    cls = get_sparsifier(method) if tie is None else type(tie)
    if tie is not None and method != DEFAULT_METHOD and get_sparsifier(method) is not cls:
        raise ValueError(f"method={method!r} differs from the tie's ({cls.method!r}).")
    weight = _check_target(module, name, "sparsify")
    if init not in cls.inits:
        raise ValueError(f"init must be one of {list(cls.inits)}, got {init!r}.")
    grouping = resolve_groups(groups, weight.shape).to(weight.device)
    if tie is None:
        rho = _group_weights(group_weights, grouping, weight)
        sparsifier = cls(grouping, group_weights=rho, **options)
        sparsifier = sparsifier.to(device=weight.device, dtype=weight.dtype)
    else:
        sparsifier = _tied(tie, grouping, init, group_weights, options)
    with torch.no_grad():
        value = weight.detach().clone()
    parametrize.register_parametrization(module, name, sparsifier)
    original = module.parametrizations[name].original
    try:
        with torch.no_grad():
            original.copy_(value)
            sparsifier.initialize(original, init)
    except ValueError:  # nothing half-registered
        parametrize.remove_parametrizations(module, name, leave_parametrized=False)
        raise
    return module


def _tied(tie, grouping, init, group_weights, options):
    """A new instance of ``tie``'s method sharing its factors, on ``grouping``."""
    if tie.tied:
        tie = tie.leader
    if grouping.n_groups != tie.n_groups:
        raise ValueError(
            f"the groups of a tied tensor must map onto the tie's {tie.n_groups} groups; "
            f"got {grouping.n_groups}."
        )
    if init != "identity" or group_weights is not None or options:
        raise ValueError(
            "a tied tensor takes its method, options and group weights from the tie and "
            "starts at init='identity'."
        )
    return type(tie).tied_to(tie, grouping)
