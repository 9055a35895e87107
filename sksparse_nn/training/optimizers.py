"""Optimizers: the table of names the estimators take, and FactorSGD for D-Gating factors."""

from __future__ import annotations

import torch
from torch.optim import optimizer as _torch_optimizer


def resolve_optimizer(name):
    """Map an optimizer name (or a ``torch.optim.Optimizer`` class) to (class, kwargs)."""
    if isinstance(name, type) and issubclass(name, torch.optim.Optimizer):
        return name, {}
    table = {
        "sgd": (torch.optim.SGD, {"momentum": 0.9, "nesterov": True}),
        "adam": (torch.optim.Adam, {}),
        "adamw": (torch.optim.AdamW, {"weight_decay": 0.0}),
        "lbfgs": (
            torch.optim.LBFGS,
            {
                "max_iter": 50,
                "history_size": 10,
                "line_search_fn": "strong_wolfe",
                "tolerance_grad": 1e-10,
                "tolerance_change": 0.0,
            },
        ),
    }
    if name not in table:
        raise ValueError(
            f"optimizer must be one of {sorted(table)} or a torch.optim.Optimizer class, "
            f"got {name!r}."
        )
    return table[name]


__all__ = ["FactorSGD", "plain_sgd_step", "zero_grads"]

#: Options of torch's SGD under which its step is the plain per-tensor loop that
#: :func:`plain_sgd_step` repeats (any other value: torch's own step).
_PLAIN_OPTIONS = (
    ("foreach", (None, False)),
    ("fused", (None, False)),
    ("differentiable", (False,)),
)


def _plain_sgd(optimizer):
    """Whether ``optimizer`` is a torch SGD whose step :func:`plain_sgd_step` repeats: the
    per-tensor loop (no foreach / fused / differentiable group, numbers as learning
    rates), no step hooks (which only torch's wrapper calls) and no step wrapped on the
    instance (as torch's learning-rate schedulers do to see that it was called)."""
    if type(optimizer) is not torch.optim.SGD:
        return False
    if "step" in vars(optimizer):  # a step wrapped on the instance (an LR scheduler's)
        return False
    if optimizer._optimizer_step_pre_hooks or optimizer._optimizer_step_post_hooks:
        return False
    registry = _torch_optimizer  # the hooks every optimizer's step calls
    if registry._global_optimizer_pre_hooks or registry._global_optimizer_post_hooks:
        return False
    return all(
        group.get(name, None) in allowed and not torch.is_tensor(group["lr"])
        for group in optimizer.param_groups
        for name, allowed in _PLAIN_OPTIONS
    )


def plain_sgd_step(optimizer):
    """The update of ``torch.optim.SGD.step()`` (no closure), without its wrapper; False
    (and nothing done) where that wrapper or another route would do more.

    The same tensor operations in the same order as torch's per-tensor loop (weight
    decay, momentum buffer, Nesterov, the step), so the same numbers; the momentum
    buffers live in the optimizer's state as torch keeps them. Skipped: the wrapper's
    profiler record, hook dispatch and grad-mode switch, which on a small model's step
    cost about as much as the update.
    """
    if not _plain_sgd(optimizer):
        return False
    work = []
    for group in optimizer.param_groups:
        params = [p for p in group["params"] if p.grad is not None]
        if any(p.grad.is_sparse for p in params):
            return False
        # foreach=None: torch picks its foreach route for accelerator tensors
        if group.get("foreach") is None and any(p.device.type != "cpu" for p in params):
            return False
        work.append((group, params))
    state = optimizer.state
    with torch.no_grad():
        for group, params in work:
            lr, decay, momentum = group["lr"], group["weight_decay"], group["momentum"]
            dampening, nesterov, maximize = group["dampening"], group["nesterov"], group["maximize"]
            bufs = [state[p].get("momentum_buffer") for p in params] if momentum != 0 else []
            # (CPU only: elsewhere _foreach may take fused kernels of its own)
            cpu = all(p.device.type == "cpu" for p in params)
            if cpu and bufs and all(b is not None for b in bufs):
                _momentum_step(params, bufs, lr, decay, momentum, dampening, nesterov, maximize)
                continue
            for p in params:
                grad = -p.grad if maximize else p.grad
                if decay != 0:
                    grad = grad.add(p, alpha=decay)
                if momentum != 0:
                    entry = state[p]
                    buf = entry.get("momentum_buffer")
                    if buf is None:
                        buf = grad.detach().clone()
                        entry["momentum_buffer"] = buf
                    else:
                        buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                    grad = grad.add(buf, alpha=momentum) if nesterov else buf
                p.add_(grad, alpha=-lr)
    return True


def _momentum_step(params, bufs, lr, decay, momentum, dampening, nesterov, maximize):
    """The per-tensor loop of :func:`plain_sgd_step` once every momentum buffer exists,
    one call per operation over all the CPU tensors: there torch's ``_foreach``
    operations run the same per-tensor kernels in C++ (the same numbers, less Python per
    step)."""
    grads = [p.grad for p in params]
    if maximize:
        grads = torch._foreach_neg(grads)
    if decay != 0:
        grads = torch._foreach_add(grads, params, alpha=decay)
    torch._foreach_mul_(bufs, momentum)
    torch._foreach_add_(bufs, grads, alpha=1 - dampening)
    grads = torch._foreach_add(grads, bufs, alpha=momentum) if nesterov else bufs
    torch._foreach_add_(params, grads, alpha=-lr)


def zero_grads(optimizer):
    """``optimizer.zero_grad()`` (``set_to_none=True``, torch's default) without its
    profiler record: every gradient of its parameters set to None."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = None


class FactorSGD(torch.optim.Optimizer):
    """SGD with Nesterov momentum on the parameter groups flagged ``sgd=True``, ``inner``
    (e.g. Adam) on all others.

    D-Gating removes a group because plain gradient steps shrink its factors
    geometrically to exact zero; Adam's per-coordinate normalization keeps unused factors
    jittering at the size of the step instead. NODE's tree internals (feature choices,
    thresholds, temperatures), on the other hand, train far better with Adam. Both share
    one ``param_groups`` list, so learning-rate schedules act on both.

    The SGD step has a relative trust region: the factors of one tree (a row of omega
    along ``trust_dim``, or one gate when ``trust_dim`` is None) change by at most
    ``trust * (size + trust_floor)`` per step. The effective step of a product of
    factors grows with their size (a tree of norm ``r`` with balanced factors moves
    ``r^(2(D-1)/D)`` times faster), and trained trees span norms over orders of
    magnitude: unbounded, the largest ones diverge. Shrinking groups are unaffected: the
    penalty step is capped below half their size.

    Parameters
    ----------
    params : iterable of dict
        Parameter groups; those with ``sgd=True`` take the SGD step, and may set
        ``trust_dim``.
    lr : float
        Learning rate of both optimizers.
    inner : torch.optim.Optimizer class, default=torch.optim.Adam
        Optimizer of the other groups.
    sgd_momentum : float, default=0.9
        Nesterov momentum of the SGD step.
    trust : float, default=0.25
        Largest relative change of a trust unit per step.
    trust_floor : float, default=1e-2
        Added to a unit's size, so that units near zero can still move.
    **inner_kwargs
        Passed to ``inner``.
    """

    def __init__(
        self,
        params,
        lr,
        inner=torch.optim.Adam,
        sgd_momentum=0.9,
        trust=0.25,
        trust_floor=1e-2,
        **inner_kwargs,
    ):
        defaults = {
            "lr": lr,
            "sgd": False,
            "sgd_momentum": sgd_momentum,
            "trust_dim": None,
            "trust": trust,
            "trust_floor": trust_floor,
        }
        super().__init__(params, defaults)
        others = [group for group in self.param_groups if not group["sgd"]]
        self.inner = inner(others, lr=lr, **inner_kwargs) if others else None

    @staticmethod
    def _sizes(tensor, dim):
        """Size of each trust unit, broadcast to the tensor's shape."""
        if dim is None:
            return tensor.abs()
        other = [d for d in range(tensor.dim()) if d != dim]
        return tensor.pow(2).sum(dim=other, keepdim=True).sqrt()

    @torch.no_grad()
    def step(self, closure=None):
        if self.inner is not None:
            loss = self.inner.step(closure)
        elif closure is not None:
            with torch.enable_grad():
                loss = closure()
        else:
            loss = None
        for group in self.param_groups:
            if not group["sgd"]:
                continue
            mu, dim = group["sgd_momentum"], group["trust_dim"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = p.grad.clone()
                else:
                    state["momentum_buffer"].mul_(mu).add_(p.grad)
                step = p.grad.add(state["momentum_buffer"], alpha=mu).mul_(group["lr"])
                bound = group["trust"] * (self._sizes(p, dim) + group["trust_floor"])
                ratio = (bound / self._sizes(step, dim).clamp_min(1e-38)).clamp_(max=1.0)
                p.sub_(step.mul_(ratio))
        return loss
