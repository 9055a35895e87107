"""D-Gating on a whole model: its gated tensors and factors, setting a gated weight, the
induced penalty and the misalignment of the factors.
"""

from __future__ import annotations

import torch
from torch.nn.utils import parametrize

from ._dgating import DGate, _balance
from ._model import sparsified_tensors

__all__ = ["gate_factors", "gated_tensors", "induced_penalty", "misalignment", "set_weight"]


def gated_tensors(model):
    """Iterate over every D-gated tensor of ``model``.

    Parameters
    ----------
    model : nn.Module

    Yields
    ------
    qualified_name : str
        e.g. ``"0.weight"`` for the weight of the first layer of a ``Sequential``.
    module : nn.Module
        The module owning the tensor.
    name : str
        The tensor's name in ``module``.
    gate : DGate
        The parametrization.
    """
    for qname, module, name, sparsifier in sparsified_tensors(model):
        if isinstance(sparsifier, DGate):
            yield qname, module, name, sparsifier


def gate_factors(model):
    """Every D-Gating factor of ``model`` (each gated tensor's omega and its gates).

    For optimizers that treat the factors apart from the other parameters, e.g. a step
    size bounded by the penalty's curvature: the smooth penalty is quadratic in every
    factor, ``lam * penalty(model)`` has second derivative at most ``lam * curvature``
    along it, and a gradient step of size ``lr`` contracts it by ``1 - lr * lam *
    curvature`` (oscillates beyond 1, diverges beyond 2 for plain SGD).

    Parameters
    ----------
    model : nn.Module

    Yields
    ------
    parameter_name : str
        The factor's name in ``model.named_parameters()``.
    parameter : nn.Parameter
    curvature : float
        ``2 max_j rho_j / D`` (``rho_j`` the group weights, 1 when not given).
    """
    names = {id(p): n for n, p in model.named_parameters()}
    for _, module, name, gate in gated_tensors(model):
        for param, curvature in gate.curvatures(module.parametrizations[name].original):
            yield names[id(param)], param, curvature


def _gate_of(module, name):
    if parametrize.is_parametrized(module, name):
        for p in module.parametrizations[name]:
            if isinstance(p, DGate):
                return p
    raise ValueError(f"'{name}' of {type(module).__name__} is not D-gated.")


@torch.no_grad()
def set_weight(module, name, weight, revive=None):
    """Set the effective weight of a D-gated tensor, split into balanced factors.

    Live groups get ``||omega_j||^2 = gamma_{j,d}^2 = ||w_j||^(2/D)`` (the stationarity
    condition of the penalty for their product); groups of ``weight`` at zero get all
    factors zero, a point gradient steps keep at zero, except those flagged in
    ``revive``, which get gates 1 so that the data's gradient can grow them again.

    Parameters
    ----------
    module : nn.Module
        Module owning the D-gated tensor.
    name : str
        The tensor's name, e.g. ``"weight"``.
    weight : tensor of the tensor's shape
        The effective weight to set.
    revive : bool tensor of shape (n_groups,), default=None
        Zero groups that must be able to come back.

    Returns
    -------
    module : nn.Module
    """
    gate = _gate_of(module, name)
    if gate.tied or getattr(gate, "n_tied", 0):
        raise ValueError(
            f"'{name}' of {type(module).__name__} shares its gates with other tensors (a "
            "tie): set_weight balances one tensor's factors and would move the others."
        )
    omega = module.parametrizations[name].original
    omega.copy_(torch.as_tensor(weight, dtype=omega.dtype, device=omega.device))
    gate.gates.fill_(1.0)
    omega.copy_(_balance(omega, gate))
    if revive is not None:
        revive = torch.as_tensor(revive, dtype=torch.bool, device=omega.device)
        gate.gates[:, revive & (gate.group_norms(omega) == 0)] = 1.0
    return module


def induced_penalty(model):
    """Non-smooth penalty ``sum_j rho_j ||w_j||^(2/D)`` of the effective weights.

    Equals :func:`~sksparse_nn.sparsifiers.penalty` at balanced factors and never exceeds
    it. For monitoring: its gradient is infinite at zero groups when ``D > 2``.

    Parameters
    ----------
    model : nn.Module

    Returns
    -------
    penalty : tensor
        0-dim, on the CPU; summed over the D-gated tensors.
    """
    total = torch.zeros(())
    for gate, weight, _ in _ties(model):
        total = total + gate.induced_penalty(weight).cpu()
    return total


def _ties(model):
    """``(gate, weight, members)`` per tie of D-gated tensors (a tensor alone is a tie of
    one): ``gate.induced_penalty(weight)`` is the tie's induced penalty (for several
    tensors, the leader reading the tie's group norms) and ``members`` its
    ``(gate, original)`` pairs."""
    ties = {}
    for qname, module, name, gate in gated_tensors(model):
        ties.setdefault(id(gate.leader if gate.tied else gate), []).append(
            (qname, module, name, gate)
        )
    for members in ties.values():
        pairs = [(g, m.parametrizations[n].original) for _, m, n, g in members]
        if len(members) == 1:
            _, module, name, gate = members[0]
            yield gate, getattr(module, name), pairs
            continue
        # the group's norm over all the tie's tensors (differentiable, as a tensor's is)
        squares = [g.group_norms(getattr(m, n)).pow(2) for _, m, n, g in members]
        joint = torch.stack(squares).sum(0).sqrt()
        gate = members[0][3]
        yield _NormsAsWeight(gate.leader if gate.tied else gate), joint, pairs


def misalignment(model):
    """Smooth minus induced penalty of the D-gated tensors.

    Parameters
    ----------
    model : nn.Module

    Returns
    -------
    gap : tensor
        0-dim, on the CPU; ``>= 0``, and zero exactly at balanced factors.
    """
    total = torch.zeros(())
    for gate, weight, members in _ties(model):
        smooth = members[0][0].penalty(members[0][1])
        for member, original in members[1:]:
            smooth = smooth + member.penalty(original)
        total = total + (smooth - gate.induced_penalty(weight)).cpu()
    return total


class _NormsAsWeight:
    """A tie's leader whose ``induced_penalty`` reads group norms given directly."""

    def __init__(self, gate):
        self.gate = gate

    def induced_penalty(self, norms):
        return self.gate._weighted(norms.pow(2.0 / self.gate.D))
