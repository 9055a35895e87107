"""The ``gates`` of the neural-net family: tensors named one by one, or channel groups
found by tracing (``"channels"``), gated on the user's module; the batch norms a
declared filter gate takes along; lambda_max over the declared groups; compaction."""

from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array
from torch import nn

from ..channels import channel_groups, compact_channels, gate_channels, norms_after
from ..compaction import CompactionReport, compact_module
from ..sparsifiers import sparsified_tensors, sparsify
from ..training import ArrayDataset, seeded

_CONVS = (nn.Conv1d, nn.Conv2d)
_CHANNELS = "channels"


def parse_gates(gates):
    """``(tensor specs, channel scope)``: ``{name: groups}`` of the tensors named, and
    ``None`` (no channel groups), ``"all"`` or a list of module name prefixes."""
    if isinstance(gates, str):
        if gates != _CHANNELS:
            raise ValueError(
                f"gates={gates!r}: a string must be 'channels' (every convolution's "
                "channels and hidden Linear unit); name tensors with a dict, e.g. "
                "gates={'conv1.weight': 'out'}."
            )
        return {}, "all"
    if isinstance(gates, (list, tuple)):
        if not gates or not all(isinstance(p, str) for p in gates):
            raise ValueError(
                f"gates={gates!r}: a list names module prefixes whose layers' channels "
                "are gated (e.g. ['layer3']); give at least one string."
            )
        return {}, list(gates)
    specs = dict(gates)
    scope = specs.pop(_CHANNELS, None)
    if isinstance(scope, str):
        scope = "all" if scope == "all" else [scope]
    elif scope is not None:
        scope = list(scope)
        if not scope or not all(isinstance(p, str) for p in scope):
            raise ValueError(
                "gates['channels'] must be 'all', a module name prefix or a list of them, "
                f"got {gates[_CHANNELS]!r}."
            )
    if not specs and scope is None:
        raise ValueError(
            "gates is empty: name at least one parameter to sparsify, e.g. "
            "gates={'0.weight': 'in'}, or gates='channels' for every convolution's channels "
            "and hidden Linear unit."
        )
    return specs, scope


def _example(est, user):
    dtype = next(user.parameters()).dtype
    return torch.zeros((2, *est._sample_shape_), dtype=dtype)


def gate_declared(est, module, init):
    """Gate ``module.module`` (the user's) as ``est.gates`` declares; returns the names
    of the gated tensors that lead their groups (one per set of factors), in order."""
    specs, scope = parse_gates(est.gates)
    user = module.module
    names = dict(user.named_parameters())
    for name in specs:
        if name not in names:
            raise ValueError(
                f"gates: {name!r} is not a parameter of the module; its parameters are "
                f"{sorted(names)}."
            )
    leaders = []
    for name, groups in specs.items():
        path, _, attr = name.rpartition(".")
        owner = user.get_submodule(path)
        try:
            est._sparsify(owner, attr, groups, init, f"groups of {name}")
        except ValueError as exc:
            raise ValueError(f"gates[{name!r}]: {exc}") from None
        leaders.append(name)
        if isinstance(owner, _CONVS) and attr == "weight" and groups == "out":
            _couple_norms(est, user, path, owner)
    if scope is not None:
        leaders += _gate_channel_groups(est, user, scope, init)
    return leaders


def _couple_norms(est, user, path, conv):
    """Tie the conv's bias and the batch norm right after it to its filters' groups (a
    batch norm divides a filter's scale out: a penalty on the filter alone removes
    nothing), or warn naming the batch norm where that cannot be done."""
    if not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in user.modules()):
        return
    try:
        norms = norms_after(user, _example(est, user), path)
    except ValueError as exc:
        warnings.warn(
            f"gates: could not trace the module to find a batch norm after '{path}' ({exc}); "
            "a batch norm there keeps its channels alive: gate its weight and bias too.",
            UserWarning,
            stacklevel=4,
        )
        return
    leader = conv.parametrizations.weight[0]
    for norm in norms:
        bn = user.get_submodule(norm)
        if not type(leader).tieable or bn.num_features != conv.out_channels:
            why = (
                f"sparsifier {leader.method!r} has no ties"
                if not type(leader).tieable
                else f"it has {bn.num_features} channels, the conv {conv.out_channels}"
            )
            warnings.warn(
                f"gates: '{path}' feeds the batch norm '{norm}', whose scale and shift cannot "
                f"share its gates ({why}); the batch norm divides the filters' scale out, "
                "so they will not shrink. Use gates='channels' with sparsifier='dgating'.",
                UserWarning,
                stacklevel=4,
            )
            continue
        tied = [(conv, "bias")] + [(bn, "weight"), (bn, "bias")]
        for owner, attr in tied:
            param = getattr(owner, attr, None)
            if isinstance(param, nn.Parameter) and not _parametrized(owner, attr):
                sparsify(owner, attr, groups="out", tie=leader)


def _parametrized(owner, attr):
    return torch.nn.utils.parametrize.is_parametrized(owner, attr)


def _gate_channel_groups(est, user, scope, init):
    # hidden units of Linear layers are channels too; one the trace cannot follow (a
    # Linear over a sequence) is left out, where a convolution's is an error
    groups = channel_groups(
        user,
        _example(est, user),
        None if scope == "all" else scope,
        layers=(*_CONVS, nn.Linear),
        strict=_CONVS,
    )
    if groups.n_groups == 0:
        where = "the module" if scope == "all" else f"the modules under {scope}"
        why = "; ".join(f"'{k}': {v}" for k, v in groups.skipped.items()) or (
            "no convolution or hidden Linear layer"
        )
        raise ValueError(
            f"gates: no channel of {where} can be removed ({why}). Name the tensors to "
            "gate instead, e.g. gates={'conv1.weight': 'out'}."
        )
    method = est._sparsifier_class()
    if not method.tieable:
        raise ValueError(
            f"gates='channels' spans several tensors per group, which sparsifier="
            f"{method.method!r} cannot share factors across; use sparsifier='dgating'."
        )

    def lead(owner, attr, grouping, start):
        est._sparsify(owner, attr, grouping, start, "channels")

    ties = gate_channels(user, groups, lead, init)
    # per leader, the layers each of its groups joins (plain lists: what skops stores)
    est._channel_layers = {
        names[0]: [list(groups.producers[g]) for g in members] for names, members in ties
    }
    return [names[0] for names, _ in ties]


def tied_ridge(est, module):
    """The downstream ridge where a group spans several tensors and ``weight_decay`` is
    0: such groups (behind a batch norm) feed their readers through a positively
    homogeneous map, so without an L2 on the ungated weights training moves their scale
    there instead of removing them."""
    tied = any(s.tied for *_, s in sparsified_tensors(module))
    if not tied or est.weight_decay:
        return None
    scale = est._traits.ridge_scale / est.D
    return {
        name: scale
        for name, param in module.named_parameters()
        if param.dim() >= 2 and "parametrizations" not in name.split(".")
    }


def tie_leaders(module):
    """Names (in ``module``'s qualified form) of the sparsified tensors that own their
    factors."""
    return [q for q, _, _, s in sparsified_tensors(module) if not s.tied]


def declared_lambda_max(probe, X, y, n_rows):
    """The largest gradient norm of a declared group (over all the tensors of its tie)
    at ``probe``'s freshly built module on at most ``n_rows`` rows, gated at
    ``init="identity"`` (gates 1: the gradient of ``original`` is the weight's)."""
    probe._validate_params()
    X = check_array(X, allow_nd=True, dtype=(np.float64, np.float32))
    y = np.asarray(y)
    rows = check_random_state(0).permutation(len(X))[:n_rows]
    targets, probe.n_outputs_ = probe._fit_targets(y)
    scaling = probe._fit_scaling(X, targets)
    X, targets = scaling.transform(X, targets)
    X = X.astype(np.float32)
    if targets.dtype.is_floating_point:
        targets = targets.to(torch.float32)
    seed = int(check_random_state(probe.random_state).randint(np.iinfo(np.int32).max))
    with seeded(seed):
        module = probe._build_module(X.shape[1], probe.n_outputs_).to(torch.float32)
        dataset = ArrayDataset(X[rows], targets[rows], torch.float32)
        probe._init_module(module, dataset, targets)
        probe._gate_module(module, "identity")
        members = list(sparsified_tensors(module))
        originals = [m.parametrizations[n].original for _, m, n, _ in members]
        loss = probe._criterion()(module(dataset.rows(slice(None))), dataset.y)
        grads = torch.autograd.grad(loss, originals)
    per_tie = {}
    for (_, _, _, s), grad in zip(members, grads, strict=True):
        key = id(s.leader if s.tied else s)
        per_tie[key] = per_tie.get(key, 0) + s.grouping.group_sum(grad.double().pow(2))
    return max((float(v.sqrt().max()) for v in per_tie.values() if v.numel()), default=0.0)


def compact_user_module(user, example):
    """Dead channel groups removed everywhere (:func:`compact_channels`), then the
    compaction of plain chains (:func:`compact_module`: units without readers, constants
    folded); one report over both."""
    try:
        first, r1 = compact_channels(user, example)
    except ValueError:  # not traceable: compact_module says why
        return compact_module(user, example)
    small, r2 = compact_module(first, example)
    kept = {}
    for name, units in r2.kept_units.items():
        before = r1.kept_units.get(name)
        kept[name] = [before[k] for k in units] if before is not None else units
    report = CompactionReport(
        r1.params_before, r2.params_after, r1.flops_before, r2.flops_after, kept,
        r2.kept_inputs,
    )  # fmt: skip
    return small, report


def leader_norms(leaders, raw, keep):
    """The ``(norms, keep)`` of ``_collapse`` restricted to the tensors ``leaders`` that
    own their factors: one entry per group."""
    leaders = set(leaders)
    return (
        {k: v for k, v in raw.items() if k in leaders},
        {k: v for k, v in keep.items() if k in leaders},
    )


def split_norms(names, counts, norms):
    """``{leader name: its slice of norms}``."""
    bounds = np.cumsum([0, *counts])
    return {n: norms[a:b] for n, a, b in zip(names, bounds[:-1], bounds[1:], strict=True)}
