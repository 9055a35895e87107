"""Functions on a whole model, covering every sparsifier it holds (and ties of tensors)."""

from __future__ import annotations

import torch
from torch.nn.utils import parametrize

from ._base import ZERO_TOL, Sparsifier, _qualified

__all__ = [
    "cached",
    "can_drop",
    "closed_form_penalties",
    "collapse",
    "drop_groups_",
    "group_norms",
    "penalty",
    "penalty_curvatures",
    "penalty_function",
    "sparsified_tensors",
    "support",
]


def sparsified_tensors(model):
    """Iterate over every sparsified tensor of ``model``.

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
    sparsifier : Sparsifier
        The parametrization.
    """
    for prefix, module in model.named_modules():
        if not parametrize.is_parametrized(module):
            continue
        for name, plist in module.parametrizations.items():
            for p in plist:
                if isinstance(p, Sparsifier):
                    yield _qualified(prefix, name), module, name, p


def penalty(model):
    """Sum of the penalties of every sparsified tensor of ``model``.

    Parameters
    ----------
    model : nn.Module

    Returns
    -------
    penalty : tensor
        0-dim and differentiable: add ``lam * penalty(model)`` to the training loss.
    """
    return penalty_function(model)()


def penalty_function(model, *, direct=True):
    """A callable returning :func:`penalty` of ``model``, with the tensors looked up once.

    For training loops: calling it costs only the penalty arithmetic, not a walk over the
    model's modules. Re-create it if sparsifiers are added or removed.

    Parameters
    ----------
    model : nn.Module
    direct : bool, default=True
        ``False`` leaves out the sparsifiers with a closed-form gradient
        (:meth:`Sparsifier.add_penalty_grad_`), for loops that add those to the
        gradients themselves.

    Returns
    -------
    penalty : callable
        Without arguments; returns a 0-dim tensor.
    """
    terms = [
        (sparsifier, module.parametrizations[name].original)
        for _, module, name, sparsifier in sparsified_tensors(model)
        if direct or type(sparsifier).add_penalty_grad_ is Sparsifier.add_penalty_grad_
    ]
    if not terms:
        return lambda: torch.zeros(())

    def _penalty():
        total = terms[0][0].penalty(terms[0][1])
        for sparsifier, original in terms[1:]:
            total = total + sparsifier.penalty(original)
        return total

    return _penalty


def closed_form_penalties(model):
    """``(sparsifier, original)`` of every sparsified tensor whose method adds its penalty
    gradient in closed form (:meth:`Sparsifier.add_penalty_grad_`), for training loops
    that add those after ``backward`` (see :func:`penalty_function` ``direct=False``)."""
    return [
        (sparsifier, module.parametrizations[name].original)
        for _, module, name, sparsifier in sparsified_tensors(model)
        if type(sparsifier).add_penalty_grad_ is not Sparsifier.add_penalty_grad_
    ]


def penalty_curvatures(model):
    """Every penalty factor of ``model`` whose curvature its method states.

    Yields
    ------
    parameter_name : str
        The factor's name in ``model.named_parameters()``.
    parameter : nn.Parameter
    curvature : float
        See :meth:`Sparsifier.curvatures`.
    """
    names = {id(p): n for n, p in model.named_parameters()}
    for _, module, name, sparsifier in sparsified_tensors(model):
        for param, curvature in sparsifier.curvatures(module.parametrizations[name].original):
            yield names[id(param)], param, curvature


#: Evaluate every sparsified tensor once inside the block (``torch.nn.utils.parametrize``'s
#: cache): valid because a sparsifier's ``forward`` is a pure function of its inputs.
cached = parametrize.cached


def _tie_key(sparsifier):
    return id(sparsifier.leader if sparsifier.tied else sparsifier)


def _joint(members, per_tensor):
    """``{qualified name: value}`` of the sparsified tensors ``members`` (the tuples of
    :func:`sparsified_tensors`), where ``per_tensor(module, name, sparsifier)`` gives a
    tensor's own group norms and a tie's tensors all get the group's norm over all of
    them."""
    own = [per_tensor(module, name, s) for _, module, name, s in members]
    ties = {}
    for (*_, s), norms in zip(members, own, strict=True):
        ties.setdefault(_tie_key(s), []).append(norms)
    joint = {
        k: v[0] if len(v) == 1 else torch.stack(v).pow(2).sum(0).sqrt() for k, v in ties.items()
    }
    return {qname: joint[_tie_key(s)] for qname, _, _, s in members}


@torch.no_grad()
def group_norms(model):
    """Norm of every group of every sparsified tensor's effective weight.

    Parameters
    ----------
    model : nn.Module

    Returns
    -------
    norms : dict of str to tensor of shape (J,)
        Keyed by the tensor's qualified name (e.g. ``"0.weight"``), detached.
    """
    return _joint(
        list(sparsified_tensors(model)),
        lambda module, name, s: s.group_norms(getattr(module, name)).detach(),
    )


@torch.no_grad()
def support(model, zero_tol=ZERO_TOL):
    """Which groups of every sparsified tensor survive :func:`collapse` at ``zero_tol``.

    Parameters
    ----------
    model : nn.Module
    zero_tol : float, default=float32 eps
        Absolute threshold on group norms (methods without exact zeros may apply a
        larger one of their own).

    Returns
    -------
    keep : dict of str to bool tensor of shape (J,)
        Keyed by the tensor's qualified name.
    """
    return _support(model, zero_tol)


def _support(model, zero_tol):
    """:func:`support`: the method's own rule for a tensor alone, the tie's norm against
    ``zero_tol`` for tied tensors."""
    members = list(sparsified_tensors(model))
    tied = {_tie_key(s) for *_, s in members if s.tied}
    if tied:
        norms = _joint(members, lambda module, name, s: s.group_norms(getattr(module, name)))
    keep = {}
    for qname, module, name, s in members:
        if _tie_key(s) in tied:
            keep[qname] = (norms[qname] >= zero_tol).detach()
        else:
            keep[qname] = s.keep(getattr(module, name), zero_tol).detach()
    return keep


def _can_drop(sparsifier):
    """Whether the method drops groups (:meth:`Sparsifier.drop_` is defined)."""
    return type(sparsifier).drop_ is not Sparsifier.drop_


def can_drop(model):
    """Whether :func:`drop_groups_` can drop groups of every sparsified tensor of
    ``model`` (False for a model with none)."""
    members = list(sparsified_tensors(model))
    return bool(members) and all(_can_drop(s) for *_, s in members)


@torch.no_grad()
def drop_groups_(model, drop):
    """Set groups of ``model``'s sparsified tensors to exactly zero, in place, where
    their methods can (:meth:`~sksparse_nn.sparsifiers.Sparsifier.drop_`).

    Parameters
    ----------
    model : nn.Module
    drop : dict of str to bool array of shape (J,)
        Per tensor (qualified name, as :func:`group_norms` keys it), the groups to zero.

    Returns
    -------
    touched : list of (tensor, keep) or None
        Every factor changed with its 0/1 mask (what an optimizer's state for it must
        forget); ``None``, with nothing changed, when a tensor's method cannot drop.
    """
    everything = list(sparsified_tensors(model))
    # a tie's groups go in all its tensors at once (their factors are shared)
    per_tie = {}
    for qname, *_, s in everything:
        if qname in drop:
            mask = torch.as_tensor(drop[qname], dtype=torch.bool)
            key = _tie_key(s)
            per_tie[key] = mask if key not in per_tie else per_tie[key] | mask
    members = [m for m in everything if _tie_key(m[3]) in per_tie and per_tie[_tie_key(m[3])].any()]
    if not all(_can_drop(s) for *_, s in members):
        return None
    touched = []
    for _, module, name, s in members:
        original = module.parametrizations[name].original
        touched += s.drop_(original, per_tie[_tie_key(s)]) or []
    return touched


@torch.no_grad()
def collapse(model, zero_tol=ZERO_TOL):
    """Remove every sparsifier, leaving plain effective weights with exact zeros.

    Groups the sparsifier does not keep at ``zero_tol`` (for most methods: norm below it)
    are set to exactly 0; entries in no group are never touched. Works in place.

    Parameters
    ----------
    model : nn.Module
    zero_tol : float, default=float32 eps
        Absolute threshold on group norms. ``0`` keeps every weight as computed.

    Returns
    -------
    model : nn.Module
        The same module, without sparsifiers.
    """
    if zero_tol is None or not zero_tol >= 0:
        raise ValueError(f"zero_tol must be a number >= 0, got {zero_tol!r}.")
    keeps = _support(model, zero_tol)  # before any tensor of a tie is collapsed
    for qname, module, name, sparsifier in list(sparsified_tensors(model)):
        keep = keeps[qname].to(getattr(module, name).dtype)
        parametrize.remove_parametrizations(module, name, leave_parametrized=True)
        getattr(module, name).mul_(sparsifier.grouping.expand(keep))
    return model
