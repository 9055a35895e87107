"""The training step of a one-hidden-layer ReLU NAM with a factorized first layer, as one
compiled call (:func:`._nam_kernels.training_step`).

Through autograd, such a step is a dozen tensor operations and as many graph nodes around
the NAM's compiled forward and backward: the gated weight, the loss, the chain rule
through the factors, the penalty's and the ridge's pulls. On the small batches the NAM
trains on, their per-call costs outweigh the arithmetic; one call computes the same
gradients. The factorization is arithmetic here (term ``t``'s first layer is ``omega_t``
times a product of scalars); which factors those are is the caller's knowledge.
"""

from __future__ import annotations

import numpy as np
import torch

from ._tracing import loops_take

__all__ = ["NAMTrainingStep"]

#: The losses the compiled step knows, by name.
LOSSES = {"squared_error": 0, "logistic": 1, "cross_entropy": 2}


class NAMTrainingStep:
    """Every gradient of one training step of a factorized one-hidden-layer ReLU NAM.

    The objective is ``mean_i weight_i loss(f(x_i), y_i) + lam / D sum_j rho_j
    (||omega_j||^2 + ||gates_j||^2) + lam sum_t ridge_t ||out_t||^2``, where term ``t``'s
    first layer is ``omega_t * prod_d gates[d, group[t]]`` (``group[t] = -1``: no
    factor and no penalty) and ``D = gates.shape[0] + 1``.

    Parameters
    ----------
    module : NAM
        The module (one hidden ReLU layer, no dropout, no interactions: see
        :meth:`applies`); its ``out`` and ``intercept`` are read and get gradients.
    omega, gates : torch.nn.Parameter
        The first layer's factors: ``omega`` shaped like ``module.first``, ``gates``
        ``(D - 1, J)``.
    group : array-like of int of shape (T,)
        The gate column of each term, -1 for none.
    rho : array-like of shape (J,)
        The penalty weight of each group.
    ridge : array-like of shape (T,)
        The L2 coefficient on each term's output weights.
    loss : {"squared_error", "logistic", "cross_entropy"}
        Half squared error against float targets ``(n, k)``, the logistic loss of one
        logit, or softmax cross-entropy, against class codes.
    """

    def __init__(self, module, omega, gates, group, rho, ridge, loss):
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {sorted(LOSSES)}, got {loss!r}.")
        self.module, self.omega, self.gates = module, omega, gates
        self.group = np.ascontiguousarray(group, dtype=np.int64)
        self.rho = np.ascontiguousarray(rho, dtype=np.float64)
        self.ridge = np.ascontiguousarray(ridge, dtype=np.float64)
        self.loss = LOSSES[loss]
        self.params = (omega, gates, module.out, module.intercept)
        # gradients written in place every step (a step sets each parameter's .grad)
        self.grads = tuple(torch.empty_like(p) for p in self.params)
        self._grad_arrays = tuple(g.detach().numpy() for g in self.grads)
        self._cols, self._widths = module.index.numpy(), module._term_widths.numpy()
        dtype = module.out.detach().numpy().dtype
        self._no_targets = np.zeros((0, 0), dtype=dtype)
        self._no_codes = np.zeros(0, dtype=np.int64)

    @staticmethod
    def applies(module):
        """Whether ``module`` is a NAM this step computes: one hidden ReLU layer, no
        dropout, no interaction terms, CPU parameters."""
        return (
            module._one_relu_layer
            and module.dropout == 0
            and module.feature_dropout == 0
            and module.interactions is None
            and module.out.device.type == "cpu"
        )

    def __call__(self, x, targets, lam):
        """Set every parameter's ``.grad`` to the objective's gradient on the batch
        ``x`` (a dense CPU tensor) with ``targets`` (or ``(targets, sample weights)``);
        returns ``(objective, outputs)`` as tensors, or None (nothing done) for a batch
        the compiled loops do not take."""
        module, omega = self.module, self.omega
        if not (torch.is_tensor(x) and x.layout == torch.strided) or not loops_take(
            x, omega, module.out
        ):
            return None
        from . import _nam_kernels as kernels  # numba, imported on first use

        y, weights = targets if isinstance(targets, (tuple, list)) else (targets, None)
        n = x.shape[0]
        # float64 either way: one compiled version of the step per batch dtype
        weights = np.ones(n) if weights is None else weights.detach().double().numpy()
        if self.loss == 0:
            y, codes = y.detach().to(x.dtype).reshape(n, -1).numpy(), self._no_codes
        else:
            y, codes = self._no_targets, y.detach().to(torch.int64).numpy()
        with torch.no_grad():
            centers = module.centers.sum(dim=0)
        z = torch.empty(n, module.n_outputs, dtype=x.dtype)
        loss, penalty, ridge = kernels.training_step(
            x.detach().t().contiguous().numpy(),
            self._cols,
            self._widths,
            omega.detach().numpy(),
            self.gates.detach().numpy(),
            self.group,
            self.rho,
            module.out.detach().numpy(),
            module.intercept.detach().numpy(),
            centers.numpy(),
            y,
            codes,
            weights,
            self.loss,
            self.ridge,
            float(lam),
            z.numpy(),
            *self._grad_arrays,
        )
        for param, grad in zip(self.params, self.grads, strict=True):
            param.grad = grad
        objective = torch.tensor(loss + lam * (penalty + ridge), dtype=x.dtype)
        return objective, z
