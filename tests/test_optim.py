"""FactorSGD: SGD with a relative trust region on flagged groups, another optimizer on
the rest (pure torch)."""

import pytest
import torch

from sksparse_nn.training import FactorSGD, plain_sgd_step, zero_grads


def _params():
    torch.manual_seed(0)
    rows = torch.nn.Parameter(torch.tensor([[3.0, 4.0], [0.0, 0.0]]))  # norms 5 and 0
    gate = torch.nn.Parameter(torch.tensor([2.0, -1.0]))
    other = torch.nn.Parameter(torch.ones(3))
    return rows, gate, other


@pytest.mark.parametrize("trust", [0.25, 0.5])
def test_a_step_moves_each_trust_unit_by_at_most_its_bound(trust):
    rows, gate, other = _params()
    opt = FactorSGD(
        [
            {"params": [rows], "sgd": True, "trust_dim": 0},
            {"params": [gate], "sgd": True, "trust_dim": None},
            {"params": [other]},
        ],
        lr=1.0,
        trust=trust,
        trust_floor=1e-2,
    )
    before = [p.detach().clone() for p in (rows, gate, other)]
    rows.grad = torch.full_like(rows, 1e6)  # a huge step, cut by the trust region
    gate.grad = torch.tensor([1e-3, 1e6])  # a small one, left alone
    other.grad = torch.ones(3)
    opt.step()
    moved_rows = (rows - before[0]).norm(dim=1)
    bound_rows = trust * (before[0].norm(dim=1) + 1e-2)
    assert torch.all(moved_rows <= bound_rows * (1 + 1e-6))
    assert torch.allclose(moved_rows, bound_rows)  # the cut is exactly at the bound
    # the small gate step is the plain Nesterov step (1 + momentum) * lr * grad
    assert torch.isclose(before[1][0] - gate[0], torch.tensor(1.9e-3), atol=1e-6)  # float32
    assert abs(float(before[1][1] - gate[1])) <= trust * (1.0 + 1e-2) * (1 + 1e-6)
    # the other group went to the inner optimizer (Adam: first step = lr * sign)
    assert torch.allclose(before[2] - other, torch.ones(3), atol=1e-6)


def _sgd_pair(**options):
    """Two copies of the same parameters (three tensors, two groups) and their SGDs."""
    torch.manual_seed(1)
    values = [torch.randn(4, 3), torch.randn(5), torch.randn(2, 2)]
    sides = []
    for _ in range(2):
        params = [torch.nn.Parameter(v.clone()) for v in values]
        groups = [{"params": params[:2]}, {"params": params[2:], "lr": 0.03}]
        sides.append((params, torch.optim.SGD(groups, lr=0.1, **options)))
    return sides


@pytest.mark.parametrize(
    "options",
    [
        {"momentum": 0.9, "nesterov": True},
        {"momentum": 0.5, "dampening": 0.2, "weight_decay": 0.01},
        {"momentum": 0.0, "maximize": True},
        # after the first step: the _foreach route, every option on its path
        {"momentum": 0.9, "nesterov": True, "weight_decay": 0.01, "maximize": True},
    ],
)
def test_plain_sgd_step_gives_torchs_bits(options):
    # the same tensor operations in the same order: equal bits, momentum state included
    (mine, opt_mine), (theirs, opt_theirs) = _sgd_pair(**options)
    for step in range(4):
        grads = [torch.randn_like(p) for p in mine]
        if step == 2:
            grads[1] = None  # a parameter without a gradient is skipped
        for params in (mine, theirs):
            for p, g in zip(params, grads, strict=True):
                p.grad = None if g is None else g.clone()
        assert plain_sgd_step(opt_mine)
        opt_theirs.step()
        for a, b in zip(mine, theirs, strict=True):
            assert torch.equal(a, b)
    for a, b in zip(mine, theirs, strict=True):
        assert ("momentum_buffer" in opt_mine.state[a]) == (
            "momentum_buffer" in opt_theirs.state[b]
        )
    zero_grads(opt_mine)
    assert all(p.grad is None for p in mine)


def test_plain_sgd_step_leaves_other_routes_to_torch():
    (params, opt), _ = _sgd_pair(momentum=0.9, foreach=True)
    params[0].grad = torch.ones_like(params[0])
    before = params[0].detach().clone()
    assert not plain_sgd_step(opt)  # foreach: torch's own route
    assert torch.equal(params[0], before)
    (params, opt), _ = _sgd_pair(momentum=0.9)
    handle = opt.register_step_post_hook(lambda *args: None)
    params[0].grad = torch.ones_like(params[0])
    assert not plain_sgd_step(opt)  # hooks run only through torch's step
    handle.remove()
    assert plain_sgd_step(opt)
    assert not plain_sgd_step(torch.optim.Adam([params[0]]))
    torch.optim.lr_scheduler.StepLR(opt, step_size=1)  # wraps opt.step on the instance
    assert not plain_sgd_step(opt)  # the scheduler must see its step called
