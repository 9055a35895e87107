"""FactorSGD: SGD with a relative trust region on flagged groups, another optimizer on
the rest (pure torch)."""

import pytest
import torch

from sksparse_nn.training import FactorSGD


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
