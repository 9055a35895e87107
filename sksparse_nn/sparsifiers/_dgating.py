r"""D-Gating of any PyTorch tensor, as a :mod:`torch.nn.utils.parametrize` parametrization.

After ``dgate(module, "weight", groups=..., D=D)`` the module's weight is computed as

.. math::

    w_j = \omega_j \prod_{d=1}^{D-1} \gamma_{j,d}

for every group ``j``: ``omega`` has the weight's shape (stored as the parametrization's
``original``), the gates ``Gamma`` are a ``(D-1, J)`` parameter. Training the smooth
objective ``loss + lam * penalty(model)`` with

.. math::

    \mathrm{penalty} = \frac{1}{D} \sum_j \rho_j \Big(\|\omega_j\|_2^2
        + \sum_{d=1}^{D-1} \gamma_{j,d}^2\Big)

by any gradient method solves the non-smooth problem ``loss + lam * induced_penalty`` with

.. math::

    \mathrm{induced\_penalty} = \sum_j \rho_j \|w_j\|_2^{2/D}

(same local minima; "D-Gating" in *Structured Sparsity via D-Gating*). Groups that the
data do not need shrink geometrically to exact zero during training;
:func:`~sksparse_nn.sparsifiers.collapse` then bakes the effective weights back into plain
parameters.

D-Gating is the ``"dgating"`` method of :mod:`sksparse_nn.sparsifiers`; the penalty,
group norms and :func:`~sksparse_nn.sparsifiers.collapse` exported here are that module's
and cover every sparsifier of a model. This module knows nothing of scikit-learn; it works on any
``nn.Module``.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import nn

from ._base import Sparsifier, sparsify

__all__ = ["DGate", "dgate"]


def _check_D(D):
    if isinstance(D, bool) or not isinstance(D, numbers.Integral) or D < 2:
        raise ValueError(f"D must be an integer >= 2, got {D!r}.")
    return int(D)


class _GatedWeight(torch.autograd.Function):
    """``omega * expand(prod_d gamma_d)`` as one autograd node.

    The same numbers as composing ``prod``, ``expand`` and ``mul`` in autograd, with one
    backward call instead of a chain of small ones: the arithmetic is tiny next to the
    matrix product, the chain's per-node overhead is not. First derivatives only.
    """

    @staticmethod
    def forward(ctx, omega, gates, grouping, fold=None):
        product = gates[0] if gates.shape[0] == 1 else gates.prod(dim=0)
        expanded = grouping.expand(product)
        ctx.save_for_backward(omega, gates, expanded)
        ctx.grouping, ctx.fold = grouping, fold
        return omega * expanded

    @staticmethod
    def backward(ctx, grad):
        omega, gates, expanded = ctx.saved_tensors
        grad_omega = grad * expanded if ctx.needs_input_grad[0] else None
        grad_gates = None
        if ctx.needs_input_grad[1]:
            grad_product = ctx.grouping.group_sum(grad * omega)  # (J,)
            if gates.shape[0] == 1:
                grad_gates = grad_product.unsqueeze(0)
            elif gates.shape[0] == 2:  # D = 3: each gate's partner, no product to form
                grad_gates = grad_product.unsqueeze(0) * gates.flip(0)
            else:  # d prod / d gamma_d = product of the other gates (no division by 0)
                others = [
                    torch.cat([gates[:d], gates[d + 1 :]]).prod(dim=0)
                    for d in range(gates.shape[0])
                ]
                grad_gates = grad_product.unsqueeze(0) * torch.stack(others)
        fold = ctx.fold
        if fold is not None and fold.value is None and grad_omega is not None:
            if grad_gates is not None:  # the step's penalty gradient, added here once
                fold.value = fold.sparsifier._add_pulls(omega, (grad_omega, grad_gates), fold.scale)
        return grad_omega, grad_gates, None, None


class _Fold:
    """One training step's request to add ``scale`` times the penalty's gradient inside
    the gated weight's backward (see :meth:`DGate.fold_penalty_grad`); ``value`` is the
    penalty once added."""

    __slots__ = ("sparsifier", "scale", "value")

    def __init__(self, sparsifier, scale):
        self.sparsifier, self.scale, self.value = sparsifier, scale, None


class DGate(Sparsifier):
    """The parametrization ``omega -> omega * prod_d gamma_d`` (expanded per group).

    The ``"dgating"`` method of :func:`~sksparse_nn.sparsifiers.sparsify`; not usually
    built by hand: see :func:`dgate`.

    Parameters
    ----------
    grouping : Grouping
        Which entries share a gate.
    D : int
        Gating depth (number of factors, omega included).
    group_weights : tensor of shape (J,) or None
        Per-group penalty weights ``rho_j`` (``None`` means all ones).
    """

    method = "dgating"
    inits = ("identity", "balanced", "dwf")
    estimator_options = ("D",)
    downstream_ridge = True
    tieable = True

    @classmethod
    def tied_to(cls, leader, grouping):
        """A DGate on ``grouping`` whose gates are ``leader``'s (one group, several
        tensors)."""
        gate = cls(grouping, D=leader.D, group_weights=leader.group_weights)
        gate.gates = leader.gates
        gate.__dict__["leader"] = leader
        leader.__dict__["n_tied"] = getattr(leader, "n_tied", 0) + 1
        return gate

    @property
    def nonconvex(self):
        """D > 2: the penalty ``||w_j||^(2/D)`` has infinite slope at zero."""
        return self.D > 2

    def curvatures(self, original):
        """omega and the gates, each with curvature ``2 max_j rho_j / D``."""
        rho = self.group_weights
        rho = 1.0 if rho is None else float(rho.max()) if rho.numel() else 0.0
        curvature = 2.0 * rho / self.D
        if self.tied:  # the leader states the shared gates'
            return ((original, curvature),)
        return ((original, curvature), (self.gates, curvature))

    def __init__(
        self, grouping, D=3, group_weights=None, *, dwf_sigma=None, dwf_eps=3e-3, generator=None
    ):
        super().__init__(grouping, group_weights)
        self.D = _check_D(D)
        self.gates = nn.Parameter(torch.ones(self.D - 1, grouping.n_groups))
        self.dwf_sigma, self.dwf_eps, self.generator = dwf_sigma, dwf_eps, generator

    def initialize(self, original, init):
        """Gates 1 (``"identity"``), balanced factors of the same weight (``"balanced"``),
        or new variance-matched factors (``"dwf"``, element groups only). A tied
        tensor keeps its value under the tie's gates (``"identity"`` only; a group the
        tie has at zero is zero in it too)."""
        if self.tied:  # omega = value / the tie's gate product: the same weight
            if init != "identity":
                raise ValueError("a tied tensor starts at init='identity'.")
            product = self.grouping.expand(self.gate_product().detach().to(original.dtype))
            live = product != 0
            original.copy_(torch.where(live, original / torch.where(live, product, 1.0), 0.0))
            return
        self.gates.data.fill_(1.0)
        if init == "balanced":
            original.copy_(_balance(original, self))
        elif init == "dwf":
            if self.grouping.n_groups != original.numel():
                raise ValueError(
                    "init='dwf' is the deep-weight-factorization init: use groups='element'."
                )
            sigma = float(original.std()) if self.dwf_sigma is None else float(self.dwf_sigma)
            if not sigma > 0:
                raise ValueError("init='dwf' needs dwf_sigma > 0 (the weight has zero spread).")
            factors = _dwf_factors(original.shape, self.D, sigma, self.dwf_eps, self.generator)
            original.copy_(factors[0])
            self.gates.data.copy_(factors[1:].reshape(self.D - 1, -1))

    def gate_product(self):
        """Product of the ``D - 1`` gates of each group, shape ``(J,)``."""
        return self.gates[0] if self.D == 2 else self.gates.prod(dim=0)

    def forward(self, omega):
        route = self.__dict__.get("_route") or self._choose_route()
        if route == "function":
            return _GatedWeight.apply(omega, self.gates, self.grouping, self._fold)
        # one gate per slice (or entry) in order, one or two gates: torch's own autograd
        # nodes (C++) cost ~45 us less a step than a Python Function, with the same
        # numbers (the one product of two gates, the same reductions)
        gates = self.gates
        if self.D == 2:  # (1, J)
            product = gates if route == "last axis" else gates.reshape(-1)
        else:
            first, second = gates.unbind(0)
            product = first * second
        if route == "last axis":  # broadcast as it is: no view, no node
            return omega * product
        return omega * self.grouping.expand(product)

    def _choose_route(self):
        """How :meth:`forward` forms the weight (fixed by D and the grouping): ``_GatedWeight``
        (more gates, or groups given by labels), the gates broadcast along the last axis,
        or expanded to the weight's shape."""
        grouping = self.grouping
        if self.D > 3 or grouping.index is not None:
            route = "function"
        elif len(grouping.shape) > 1 and grouping.dim == len(grouping.shape) - 1:
            route = "last axis"
        else:
            route = "expand"
        self.__dict__["_route"] = route
        return route

    def penalty(self, omega):
        """Smooth surrogate ``(1/D) sum_j rho_j (||omega_j||^2 + ||gamma_j||^2)``; a tied
        tensor's omits the gates (its leader's counts them)."""
        if self.tied:
            if self.group_weights is None and self.grouping.complete:
                return omega.pow(2).sum() / self.D
            return self._weighted(self.grouping.group_sum(omega.pow(2))) / self.D
        if self.group_weights is None and self.grouping.complete:
            return (omega.pow(2).sum() + self.gates.pow(2).sum()) / self.D
        per_group = self.grouping.group_sum(omega.pow(2)) + self.gates.pow(2).sum(dim=0)
        return self._weighted(per_group) / self.D

    #: The pending :class:`_Fold` of a training step (None outside one).
    _fold = None

    def fold_penalty_grad(self, scale):
        """Add ``scale`` times the penalty's gradient inside the backward pass of the
        gated weight's next evaluation (see
        :meth:`~sksparse_nn.sparsifiers.Sparsifier.fold_penalty_grad`): the same
        kernels as :meth:`add_penalty_grad_` on the gradients as they are formed, so the
        same numbers, without a pass of their own over ``.grad``. Not for tied tensors
        (their shared gates collect several backward passes) nor ``scale=None``."""
        fold = None
        if (
            scale is not None
            and not self.tied
            and not getattr(self, "n_tied", 0)
            and (self.__dict__.get("_route") or self._choose_route()) == "function"
        ):
            fold = _Fold(self, scale)
        self.__dict__["_fold"] = fold  # a plain attribute: no Module.__setattr__ per step
        return fold is not None

    @torch.no_grad()
    def add_penalty_grad_(self, original, scale):
        """The smooth surrogate's gradient ``scale * (2 / D) rho_j (omega_j, gamma_j)``
        added in place (see :meth:`~sksparse_nn.sparsifiers.Sparsifier.add_penalty_grad_`);
        returns its value. After a backward pass that already added it
        (:meth:`fold_penalty_grad`), only returns the value."""
        fold = self._fold
        if fold is not None:
            self.__dict__["_fold"] = None
            if fold.value is not None:
                if fold.scale != scale:
                    raise ValueError(
                        f"add_penalty_grad_ at scale {scale!r} after a backward pass that "
                        f"added the penalty gradient at scale {fold.scale!r}."
                    )
                return fold.value
        tensors = (original,) if self.tied else (original, self.gates)
        for tensor in tensors:
            if tensor.grad is None:
                tensor.grad = torch.zeros_like(tensor)
        return self._add_pulls(original, [tensor.grad for tensor in tensors], scale)

    def _add_pulls(self, original, grads, scale):
        """``scale * (2 / D) rho_j`` times omega (and the gates, for an untied tensor)
        added to ``grads`` in place; returns the penalty's value."""
        weights = self._entry_weights(original)
        tensors = (original,) if self.tied else (original, self.gates)
        pulls = [
            tensor if weight is None else tensor * weight
            for tensor, weight in zip(tensors, weights[: len(tensors)], strict=True)
        ]
        # one kernel call for all the gradients (each tensor's own add_), one dot each
        torch._foreach_add_(list(grads), pulls, alpha=2.0 * scale / self.D)
        value = tensors[0].reshape(-1).dot(pulls[0].reshape(-1))
        if len(tensors) > 1:
            value = value + tensors[1].reshape(-1).dot(pulls[1].reshape(-1))
        return value / self.D

    @torch.no_grad()
    def drop_(self, original, drop):
        """Zero the groups ``drop`` in omega and in every gate: a group whose factors are
        all zero has a zero gradient in each of them (each factor's gradient carries the
        product of the others), so it stays at zero. A tied tensor zeroes its omega only
        (its leader the shared gates: ``drop_groups_`` drops a tie's groups in all
        its tensors together)."""
        drop = torch.as_tensor(drop, dtype=torch.bool, device=self.gates.device)
        keep_omega = self.grouping.expand((~drop).to(original.dtype))
        original.mul_(keep_omega)
        if self.tied:
            return [(original, keep_omega)]
        keep_gates = (~drop).to(self.gates.dtype).expand_as(self.gates)
        self.gates.mul_(keep_gates)
        return [(original, keep_omega), (self.gates, keep_gates)]

    def _entry_weights(self, original):
        """``rho_j`` per entry of ``original`` (0 for entries in no group) and per gate,
        or None where all are 1: the same every step, so computed once (again if the
        group weights change)."""
        rho = self.group_weights
        version = None if rho is None else rho._version
        key = (original.shape, original.dtype, original.device, version)
        cached = getattr(self, "_entry_weights_cache", None)
        if cached is not None and cached[0] == key and (rho is None or cached[1] is rho):
            return cached[2]
        if rho is None and self.grouping.complete:
            weights = (None, None)
        else:
            rho = torch.ones_like(self.gates[0]) if rho is None else rho.to(self.gates.dtype)
            inside = 1.0 - self.grouping.expand(torch.zeros_like(rho))
            per_entry = (self.grouping.expand(rho) * inside).to(original.dtype)
            unit = bool(torch.all(per_entry == 1.0)) and bool(torch.all(rho == 1.0))
            weights = (None, None) if unit else (per_entry, rho)
        self._entry_weights_cache = (key, self.group_weights, weights)
        return weights

    def induced_penalty(self, weight):
        """Non-smooth penalty ``sum_j rho_j ||w_j||^(2/D)`` of the effective weight."""
        return self._weighted(self.group_norms(weight).pow(2.0 / self.D))

    def extra_repr(self):
        return f"D={self.D}"


def _balance(omega, gate, eps=0.0):
    """Balanced factors with the same product: ||omega_j||^2 = gamma_{j,d}^2 = ||w_j||^(2/D).

    A zero group gets all factors zero (gates included): the balanced representation of 0,
    which gradient steps leave at zero. Gates of 1 on a zero omega would instead cost
    ``lam (D-1)/D`` of penalty and let the data gradient revive the group on a warm start.
    """
    norms = gate.group_norms(omega)
    live = norms > eps
    scale = torch.where(live, norms.pow(1.0 / gate.D), torch.zeros_like(norms))
    gate.gates.data.copy_(scale.expand(gate.D - 1, -1))
    divisor = gate.grouping.expand(torch.where(live, scale, torch.ones_like(scale)).pow(gate.D - 1))
    return torch.where(gate.grouping.expand(live) > 0, omega / divisor, torch.zeros_like(omega))


def _dwf_factors(shape, D, sigma_w, eps, generator=None):
    """Variance-matched factors, truncated in absolute value (Deep Weight Factorization).

    Each of the ``D`` factors is drawn i.i.d. from N(0, sigma_w^(2/D)) conditioned on
    eps^(1/D) < |x| < min(1, (2 sigma_w)^(1/D)), so that the product has variance close to
    sigma_w^2 without the mass at zero and the heavy tails of untruncated products.
    """
    sigma = sigma_w ** (1.0 / D)
    lo, hi = eps ** (1.0 / D), min(1.0, (2.0 * sigma_w) ** (1.0 / D))
    if not lo < hi:
        raise ValueError(
            f"dwf init: truncation interval ({lo:.3g}, {hi:.3g}) is empty; lower dwf_eps."
        )
    phi = lambda t: 0.5 * (1.0 + math.erf(t / (sigma * math.sqrt(2.0))))  # noqa: E731
    u = torch.empty((D, *shape)).uniform_(phi(lo), phi(hi), generator=generator)
    absval = sigma * math.sqrt(2.0) * torch.erfinv(2.0 * u - 1.0)
    sign = torch.randint(0, 2, (D, *shape), generator=generator) * 2 - 1
    return (absval * sign).clamp_(min=-hi, max=hi)


def dgate(
    module,
    name="weight",
    *,
    groups="in",
    D=3,
    init="identity",
    group_weights=None,
    dwf_sigma=None,
    dwf_eps=3e-3,
    generator=None,
):
    """D-gate the tensor ``module.<name>`` in place.

    Parameters
    ----------
    module : nn.Module
        Module owning the parameter (e.g. an ``nn.Linear``).
    name : str, default="weight"
        Name of an ``nn.Parameter`` of ``module``.
    groups : {"in", "out", "element"}, AxisGroups or array-like of int, default="in"
        The group structure, see :mod:`sksparse_nn.groups`.
    D : int, default=3
        Gating depth, an integer >= 2. ``D=2`` gives the group lasso, larger ``D`` the
        non-convex penalty ``||w_j||^(2/D)``.
    init : {"identity", "balanced", "dwf"}, default="identity"
        ``"identity"``: gates 1 and omega the current weight. ``"balanced"``: the same
        effective weight split into balanced factors (the stationarity condition; used for
        warm starts; zero groups get all-zero factors and stay zero). Both leave the
        module's output unchanged. ``"dwf"`` (only with ``groups="element"``):
        re-initializes the weight with variance-matched, truncated
        factors, needed by deep weight factorization for ``D > 2``.
    group_weights : array-like of shape (J,), default=None
        Non-negative penalty weight ``rho_j`` of each group (0 leaves a group unpenalized).
    dwf_sigma : float, default=None
        Standard deviation of the standard init the ``"dwf"`` product should match;
        defaults to the current weight's standard deviation.
    dwf_eps : float, default=3e-3
        Smallest absolute value of the product of the ``"dwf"`` factors.
    generator : torch.Generator, default=None
        Random generator for ``"dwf"``.

    Returns
    -------
    module : nn.Module
        The same module, now parametrized.

    Examples
    --------
    >>> import torch
    >>> from sksparse_nn.gating import dgate, penalty
    >>> layer = torch.nn.Linear(5, 3)
    >>> _ = dgate(layer, groups="in", D=3)   # one group per input feature
    >>> layer.parametrizations.weight[0].gates.shape
    torch.Size([2, 5])
    >>> loss = layer(torch.randn(8, 5)).pow(2).mean() + 0.1 * penalty(layer)
    """
    D = _check_D(D)
    if init not in DGate.inits:
        raise ValueError(f"init must be 'identity', 'balanced' or 'dwf', got {init!r}.")
    if init == "dwf" and not (isinstance(groups, str) and groups == "element"):
        raise ValueError("init='dwf' is the deep-weight-factorization init: use groups='element'.")
    return sparsify(
        module,
        name,
        method=DGate,
        groups=groups,
        group_weights=group_weights,
        init=init,
        D=D,
        dwf_sigma=dwf_sigma,
        dwf_eps=dwf_eps,
        generator=generator,
    )
