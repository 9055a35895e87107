"""The user's torch module of the general estimators' tests (sized by the estimator)."""

import torch


class TwoLayer(torch.nn.Module):
    """One hidden ReLU layer named ``hidden`` (the tests gate its input features)."""

    def __init__(self, n_features, n_outputs, hidden=8):
        super().__init__()
        self.hidden = torch.nn.Linear(n_features, hidden)
        self.out = torch.nn.Linear(hidden, n_outputs)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))
