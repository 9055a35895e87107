"""A family written from the hook table alone (docs/architecture.md), for the tests.

A one-hidden-layer network whose hidden weight is a custom tensor (a bare
``nn.Parameter``, not an ``nn.Linear``), gated by input feature. It declares its traits,
builds its module, names the tensor to sparsify, reports feature importances and folds
the standardization it trains in into the module: six entries of the table, nothing
else. tests/test_common.py holds it to the shared contract
and bad-input tables like every shipped family.
"""

import torch
from torch import nn

from sksparse_nn.estimators import BaseDGated, RegressorTaskMixin, Traits, column_norms
from sksparse_nn.sparsifiers import ZERO_TOL


class OneHidden(nn.Module):
    """``out(relu(x @ W.T + b))`` with ``W`` a plain parameter."""

    def __init__(self, n_features, n_outputs, width=8):
        super().__init__()
        self.W = nn.Parameter(torch.randn(width, n_features) / n_features**0.5)
        self.b = nn.Parameter(torch.zeros(width))
        self.out = nn.Linear(width, n_outputs)

    def forward(self, x):
        return self.out(torch.relu(x @ self.W.T + self.b))


class OneHiddenRegressor(RegressorTaskMixin, BaseDGated):
    """The minimal family: input features selected through the gated ``W``."""

    _traits = Traits(standardize_inputs=True, standardize_targets=True)

    def __init__(
        self,
        lam=1e-3,
        *,
        D=3,
        width=8,
        optimizer="sgd",
        lr=0.05,
        max_epochs=10,
        batch_size=32,
        lr_schedule="cosine",
        tol=None,
        zero_tol=ZERO_TOL,
        early_stopping=False,
        validation_fraction=0.1,
        n_iter_no_change=10,
        warm_start=False,
        random_state=None,
        device="cpu",
        n_threads=None,
        verbose=0,
    ):
        self.lam = lam
        self.D = D
        self.width = width
        self.optimizer = optimizer
        self.lr = lr
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.lr_schedule = lr_schedule
        self.tol = tol
        self.zero_tol = zero_tol
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.warm_start = warm_start
        self.random_state = random_state
        self.device = device
        self.n_threads = n_threads
        self.verbose = verbose

    def _build_module(self, n_features, n_outputs):
        return OneHidden(n_features, n_outputs, self.width)

    def _gate_module(self, module, init):
        self._sparsify(module, "W", "in", init, "input features")

    def _feature_importances(self, module):
        return column_norms(module.W)

    @torch.no_grad()
    def _rescale_inputs(self, module, shift, scale):
        weight = module.W.double() / torch.as_tensor(scale)
        module.b.copy_(module.b.double() - weight @ torch.as_tensor(shift))
        module.W.copy_(weight)

    @torch.no_grad()
    def _rescale_outputs(self, module, shift, scale):
        scale = torch.as_tensor(scale)
        module.out.weight.copy_(module.out.weight.double() * scale[:, None])
        module.out.bias.copy_(module.out.bias.double() * scale + torch.as_tensor(shift))
