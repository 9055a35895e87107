"""skorch plumbing shared by every estimator: data, batches, the penalized loss, callbacks.

Nothing here knows which model is trained or how gating is parametrized: the penalty is
:func:`sksparse_nn.gating.penalty` of whatever module the net holds.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager

import numpy as np
import scipy.sparse as sp
import torch
from skorch import NeuralNet
from skorch.callbacks import Callback, ProgressBar
from skorch.dataset import unpack_data

from .._interrupt import InterruptRequested, interrupt_on, interrupt_requested
from ..gating import penalty, penalty_function
from ..sparsifiers import Sparsifier, sparsified_tensors

__all__ = [
    "ArrayDataset",
    "BatchIterator",
    "EarlyStopping",
    "InterruptRequested",
    "PenalizedNet",
    "RandomSplit",
    "StopTraining",
    "interrupt_on",
    "interrupt_requested",
    "seeded",
    "flush_denormals",
    "make_callbacks",
    "resolve_optimizer",
    "weighted_mean",
]


def weighted_mean(per_sample, sample_weight=None):
    """Mean of per-sample losses, weighted when ``sample_weight`` (a tensor whose mean over
    the training set is 1) is given: the loss convention of every criterion here."""
    if sample_weight is None:
        return per_sample.mean()
    return (per_sample * sample_weight.to(per_sample.dtype)).mean()


class ArrayDataset(torch.utils.data.Dataset):
    """Features (dense ndarray or CSR matrix) and a target tensor, sliced per batch.

    Sparse features stay sparse; only the rows of a batch are densified. Dense features are
    converted to one tensor once, so a batch is a cheap index operation. With ``shift``
    and ``scale`` the rows are standardized, ``(x - shift) / scale`` in float64 before the
    cast to ``dtype``: at construction for dense features, per batch for sparse ones
    (same arithmetic, so sparse and dense inputs give the same batches). ``weight`` holds
    per-sample weights (mean 1); batches then carry ``(y, weight)`` as their targets,
    which :meth:`PenalizedNet.get_loss` hands to the criterion.

    ``sparse_rows``: batches of sparse (unstandardized) features are torch sparse COO
    tensors instead of dense rows, for modules whose first operation is a linear map
    (``F.linear`` takes them): no batch is densified, which in full-batch training
    would be all of ``X``.
    """

    def __init__(
        self, X, y, dtype, device="cpu", shift=None, scale=None, weight=None, sparse_rows=False
    ):
        self.sparse = sp.issparse(X)
        self.dtype, self.device = dtype, device
        self.shift, self.scale = shift, scale
        self.sparse_rows = self.sparse and sparse_rows and scale is None and shift is None
        self._all_rows = None  # the sparse tensor of every row (full-batch epochs)
        if self.sparse:
            self.X = X.tocsr()
        else:
            X = self._standardize(np.asarray(X)) if scale is not None else X
            if not X.flags.writeable:
                X = np.array(X)  # torch tensors cannot share read-only memory
            self.X = torch.as_tensor(X, dtype=dtype, device=device)
        self.y = None if y is None else torch.as_tensor(y, device=device)
        self.weight = None if weight is None else torch.as_tensor(weight, device=device)

    def _standardize(self, dense):
        return (dense - self.shift) / self.scale

    def __len__(self):
        return self.X.shape[0]

    def rows(self, index):
        """Feature tensor of the given rows (an index array or a slice): dense, or sparse
        with ``sparse_rows``."""
        if not self.sparse:
            return self.X[index]
        if isinstance(index, torch.Tensor):
            index = index.cpu().numpy()
        if self.sparse_rows:
            every = isinstance(index, slice) and index == slice(None)
            if every and self._all_rows is not None:
                return self._all_rows
            batch = _sparse_tensor(self.X[index], self.dtype, self.device)
            if every:
                self._all_rows = batch
            return batch
        dense = self.X[index].toarray()
        if self.scale is not None:
            dense = self._standardize(dense)
        return torch.as_tensor(dense, dtype=self.dtype, device=self.device)

    def subset(self, index):
        """A new dataset holding the given rows (used for the validation split)."""
        out = copy.copy(self)  # same dtype, device and standardization
        out._all_rows = None  # the parent's rows are not the subset's
        out.X = self.X[index] if self.sparse else self.X[torch.as_tensor(index)]
        out.y = None if self.y is None else self.y[torch.as_tensor(index)]
        if self.weight is not None:
            out.weight = self.weight[torch.as_tensor(index)]
        return out

    def targets(self, index):
        """The targets of the given rows: ``y``, or ``(y, weight)`` with sample weights."""
        if self.weight is None:
            return self.y[index]
        return self.y[index], self.weight[index]

    def __getitem__(self, i):  # for generic torch tooling; training uses BatchIterator
        return self.rows(slice(i, i + 1))[0], None if self.y is None else self.targets(i)


def _sparse_tensor(X, dtype, device):
    """A CSR matrix as a torch sparse COO tensor (row-major, hence coalesced)."""
    coo = X.tocoo()
    indices = np.vstack([coo.row, coo.col]).astype(np.int64)
    return torch.sparse_coo_tensor(
        torch.as_tensor(indices),
        torch.as_tensor(coo.data, dtype=dtype),
        coo.shape,
        device=device,
        is_coalesced=True,
        check_invariants=False,
    )


class BatchIterator:
    """Mini-batches of an :class:`ArrayDataset` by tensor slicing (no per-sample collate).

    skorch calls it as ``iterator(dataset, batch_size=..., shuffle=...)``.
    """

    def __init__(self, dataset, batch_size, shuffle=False, generator=None):
        self.dataset, self.batch_size, self.shuffle = dataset, int(batch_size), shuffle
        self.generator = generator

    def __len__(self):
        return -(-len(self.dataset) // self.batch_size)

    def __iter__(self):
        n, ds = len(self.dataset), self.dataset
        if self.batch_size >= n and not self.shuffle:
            yield ds.rows(slice(None)), ds.targets(slice(None))
            return
        X, y, w = (ds.X if not ds.sparse else None), ds.y, ds.weight
        order = None
        if self.shuffle:
            order = torch.randperm(n, generator=self.generator).to(ds.y.device)
            if X is not None:  # one gather per epoch; batches are then views
                X, y = X[order], y[order]
                w = None if w is None else w[order]
        for start in range(0, n, self.batch_size):
            index = slice(start, start + self.batch_size)
            if X is not None:
                yield X[index], (y[index] if w is None else (y[index], w[index]))
            else:
                rows = index if order is None else order[index]
                yield ds.rows(rows), ds.targets(rows)


class StopTraining(Exception):  # noqa: N818 (a signal, not an error)
    """Raised by a callback to end training normally (``on_train_end`` still runs).

    skorch's own convention is to raise ``KeyboardInterrupt``, which cannot be told apart
    from a user's Ctrl-C; this package never uses it for its own signals.
    """


class _Interrupted(Exception):  # noqa: N818
    """A KeyboardInterrupt carried past skorch's ``partial_fit`` (which would swallow it)."""

    def __init__(self, epoch, forwarded=False):
        super().__init__(epoch)
        self.epoch, self.forwarded = epoch, forwarded


class _InterruptOnFlag(Callback):
    """Default callback of :class:`PenalizedNet`: stop as on Ctrl-C when the thread's
    :func:`interrupt_on` flag exists (one thread-local lookup per batch otherwise)."""

    def on_batch_end(self, net, **kwargs):
        if interrupt_requested():
            raise _Interrupted(len(net.history), forwarded=True)


class PenalizedNet(NeuralNet):
    """A skorch net whose training loss is ``criterion + lam * penalty(module)``, plus
    ``lam * sum(c * p^2)`` for every parameter ``p`` that ``ridge`` (``{name: c}``, ``c`` a
    number or a tensor of per-entry weights broadcastable to ``p``) names.

    The penalty enters only when ``training=True``, so validation losses measure the fit
    to the data alone (an early stopping that watches the validation objective adds
    ``lam`` times the penalty itself, as NODE's does).

    Stopping and Ctrl-C. skorch ends training when anything raises ``KeyboardInterrupt``
    and swallows it in ``partial_fit`` (its own ``EarlyStopping`` uses it as a signal), so
    a user's Ctrl-C would silently end just the current fit. This net therefore:

    - lets callbacks end training early by raising :class:`StopTraining`, which
      :meth:`fit_loop` catches (``on_train_end`` callbacks still run, e.g. the best
      weights of :class:`EarlyStopping` are restored); nothing in this package raises
      ``KeyboardInterrupt`` as a signal;
    - turns a real ``KeyboardInterrupt`` in :meth:`fit_loop` into an internal exception
      that skorch does not catch, which :meth:`partial_fit` (and so ``fit``) raises again
      as ``KeyboardInterrupt("Training interrupted during epoch k (Ctrl-C).")`` once
      training has stopped, without ``on_train_end``: the estimator is left unfitted,
      a half-trained model is never presented as a fit;
    - stops the same way when the thread's :func:`interrupt_on` flag is raised
      (:class:`InterruptRequested`, how parallel paths forward a Ctrl-C to their workers).

    No signal handler is installed, so fits work in any thread.
    """

    def __init__(self, *args, lam=0.0, ridge=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lam = lam
        self.ridge = ridge

    def initialize_module(self):
        super().initialize_module()
        # Penalties with a closed-form gradient (D-Gating's L2 on the factors) are added
        # to the gradients after backward (train_step_single); the others enter the loss.
        self.penalty_ = penalty_function(self.module_, direct=False)
        self.direct_penalties_ = [
            (sparsifier, module.parametrizations[name].original)
            for _, module, name, sparsifier in sparsified_tensors(self.module_)
            if type(sparsifier).add_penalty_grad_ is not Sparsifier.add_penalty_grad_
        ]
        # ``ridge``: {parameter name: c}, the term ``lam * sum(c * p^2)`` of the objective
        # per named (ungated) parameter, added like the closed-form penalties; ``c`` as a
        # tensor on the parameter's device and dtype (per-entry weights) or a float
        params = dict(self.module_.named_parameters())
        missing = sorted(set(self.ridge or ()) - set(params))
        if missing:
            raise ValueError(f"ridge names parameters the module does not have: {missing}")
        self.ridge_ = []
        for name, c in (self.ridge or {}).items():
            param = params[name]
            if torch.is_tensor(c):
                self.ridge_.append((param, torch.broadcast_to(c.to(param), param.shape)))
            elif c:
                self.ridge_.append((param, float(c)))
        return self

    @torch.no_grad()
    def ridge_pulls(self):
        """The ridge's gradient ``2 lam c p`` per parameter it names (a list of tensors)."""
        return [2.0 * self.lam * c * param for param, c in self.ridge_]

    @torch.no_grad()
    def _add_ridge_grad(self):
        """``lam * sum(c * p^2)``'s gradient added to every ridge parameter's ``.grad``;
        returns ``sum(c * p^2)`` (a detached 0-dim tensor)."""
        value = 0.0
        for param, c in self.ridge_:
            if param.grad is None:
                param.grad = torch.zeros_like(param)
            # a number scales the kernel's alpha; per-entry weights cost one product
            pull, coef = (param * c, 1.0) if torch.is_tensor(c) else (param, c)
            param.grad.add_(pull, alpha=2.0 * self.lam * coef)
            value = value + coef * param.reshape(-1).dot(pull.reshape(-1))
        return value

    def _ridge_value(self):
        with torch.no_grad():
            return sum(float((c * param.pow(2)).sum()) for param, c in self.ridge_)

    def training_objective(self, dataset):
        """The training objective (mean criterion plus ``lam`` times the penalty) of the
        module as it is, on ``dataset``, as an epoch's training loss sees it (training
        mode: dropout, batch statistics), without gradients; the module's buffers
        (BatchNorm's running statistics) and mode are left as they were."""
        module = self.module_
        was_training = module.training
        saved = [(buffer, buffer.clone()) for buffer in module.buffers()]
        module.train()
        total, count = 0.0, 0
        try:
            with torch.no_grad():
                for Xi, yi in self.get_iterator(dataset, training=False):
                    y_pred = self.infer(Xi)
                    loss = self.get_loss(y_pred, yi, X=Xi, training=False)
                    total += float(loss) * len(y_pred)
                    count += len(y_pred)
                value = float(penalty(module)) + self._ridge_value() if self.lam else 0.0
        finally:
            with torch.no_grad():
                for buffer, copy_ in saved:
                    buffer.copy_(copy_)
            module.train(was_training)
        return total / max(count, 1) + self.lam * value

    def get_loss(self, y_pred, y_true, X=None, training=False):
        if isinstance(y_true, (tuple, list)):  # (targets, sample weights)
            loss = self.criterion_(y_pred, *y_true)
        else:
            loss = self.criterion_(y_pred, y_true)
        if training and self.lam:
            loss = loss + self.lam * self.penalty_()
        return loss

    def train_step_single(self, batch, **fit_params):
        """skorch's step, then ``lam`` times the closed-form penalty gradients added to
        the gradients; the returned loss (history, L-BFGS's line search) includes their
        value, so it is the whole training objective as before.

        skorch's step puts every module and criterion of the net in training mode on every
        batch (``Module.train`` sets an attribute on every submodule, slowly). Here they
        are checked first and switched only when one is not in it (the first batch of an
        epoch, after the validation or a prediction switched them to evaluation); the
        net's torch modules and criteria are skorch's ``_modules`` and ``_criteria`` (a
        subclass's extra modules included). The rest of the step is skorch's as it is.
        """
        owners = [getattr(self, name + "_") for name in (*self._modules, *self._criteria)]
        owners = [o for o in owners if isinstance(o, torch.nn.Module)]
        if not all(m.training for o in owners for m in o.modules()):
            for o in owners:
                o.train()
        Xi, yi = unpack_data(batch)
        y_pred = self.infer(Xi, **fit_params)
        loss = self.get_loss(y_pred, yi, X=Xi, training=True)
        loss.backward()
        step = {"loss": loss, "y_pred": y_pred}
        if self.lam and (self.direct_penalties_ or self.ridge_):
            value = sum(s.add_penalty_grad_(o, self.lam) for s, o in self.direct_penalties_)
            if self.ridge_:
                value = value + self._add_ridge_grad()
            step["loss"] = step["loss"] + self.lam * value
        return step

    def get_default_callbacks(self):
        return [*super().get_default_callbacks(), ("interrupt_on_flag", _InterruptOnFlag())]

    def fit_loop(self, X, y=None, epochs=None, **fit_params):
        """skorch's fit loop, with subnormal numbers flushed to zero
        (:func:`flush_denormals`); :class:`StopTraining` ends it normally, a Ctrl-C is
        kept."""
        try:
            with flush_denormals():
                return super().fit_loop(X, y, epochs=epochs, **fit_params)
        except StopTraining:
            return self
        except KeyboardInterrupt as exc:
            raise _Interrupted(
                len(self.history), forwarded=isinstance(exc, InterruptRequested)
            ) from exc

    def partial_fit(self, X, y=None, classes=None, **fit_params):
        """skorch's ``partial_fit``; a Ctrl-C during training reaches the caller."""
        try:
            return super().partial_fit(X, y, classes=classes, **fit_params)
        except _Interrupted as exc:
            kind = InterruptRequested if exc.forwarded else KeyboardInterrupt
            raise kind(f"Training interrupted during epoch {exc.epoch} (Ctrl-C).") from None


class _StopWhenConverged(Callback):
    """Stop when an epoch lowers the training loss by less than ``tol`` (relative)."""

    def __init__(self, tol):
        self.tol = tol

    def on_epoch_end(self, net, **kwargs):
        losses = net.history[:, "train_loss"]
        if len(losses) < 2 or not np.isfinite(losses[-1]):  # the divergence guard decides
            return
        if losses[-2] - losses[-1] <= self.tol * max(abs(losses[-1]), 1e-12):
            raise StopTraining


class EarlyStopping(Callback):
    """Stop when the validation loss has not improved for ``patience`` epochs, then
    restore the weights of the best epoch.

    ``monitor`` names the history entry watched (``"valid_loss"``; a subclass may record
    another, e.g. the validation objective, before this reads it)."""

    def __init__(self, patience, monitor="valid_loss"):
        self.patience = patience
        self.monitor = monitor

    def initialize(self):
        self.best_loss_, self.best_state_, self.misses_ = float("inf"), None, 0
        self.best_epoch_ = self.restored_epoch_ = None  # epochs counted from 1
        return self

    def on_epoch_end(self, net, **kwargs):
        loss = net.history[-1, self.monitor]
        if loss < self.best_loss_:
            self.best_loss_, self.misses_ = loss, 0
            self.best_state_ = copy.deepcopy(net.module_.state_dict())
            self.best_epoch_ = len(net.history)
        else:
            self.misses_ += 1
            if self.misses_ >= self.patience:
                raise StopTraining

    def on_train_end(self, net, **kwargs):
        if self.best_state_ is not None:
            net.module_.load_state_dict(self.best_state_)
            self.restored_epoch_ = self.best_epoch_


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


def make_callbacks(*, lr_plan, tol, verbose):
    """The callbacks of a fit: the learning-rate plan (a callback), the relative-decrease
    stop of ``tol`` and an optional progress bar."""
    callbacks = [("lr_schedule", lr_plan)]
    if tol is not None:
        callbacks.append(("converged", _StopWhenConverged(tol)))
    if verbose:
        callbacks.append(("progress", ProgressBar()))
    return callbacks


def as_numpy(tensor):
    """CPU float64 numpy copy of a tensor."""
    return tensor.detach().cpu().numpy().astype(np.float64)


class RandomSplit:
    """Hold out a random fraction of the training data for early stopping."""

    def __init__(self, fraction, seed):
        self.fraction, self.seed = fraction, seed

    def __call__(self, dataset, y=None, **kwargs):
        n = len(dataset)
        n_valid = max(1, int(round(self.fraction * n)))
        order = np.random.RandomState(self.seed).permutation(n)
        return dataset.subset(order[n_valid:]), dataset.subset(order[:n_valid])


def check_device(device, estimator_name):
    """``device`` as a ``torch.device`` this torch build can use; a ValueError naming the
    parameter otherwise (torch raises an AssertionError for an absent backend)."""
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"{estimator_name}: device={device!r} is not a torch device: {exc}"
        ) from None
    backend = getattr(torch, device.type, None)
    available = getattr(backend, "is_available", None)
    if device.type != "cpu" and (available is None or not available()):
        raise ValueError(
            f"{estimator_name}: device={str(device)!r} is not available in this torch build "
            f"(torch {torch.__version__}); use device='cpu'."
        )
    return device


def _flushing_denormals():
    """Whether this thread's CPU arithmetic flushes subnormal float32 numbers to zero."""
    return float(torch.tensor([1e-39], dtype=torch.float32).mul_(1.5)) == 0.0


@contextmanager
def flush_denormals():
    """Subnormal floats flushed to zero on this thread inside the block (where the CPU
    supports it), the caller's setting restored after it.

    An unused D-gated group shrinks geometrically until the fit's end removes it, so its
    factors' product passes below float32's smallest normal number (1.2e-38) within a
    few thousand steps of dying, and CPU arithmetic on subnormal operands is far slower:
    a 64 x 784 by 784 x 300 product and its weight gradient took 36 ms with subnormal
    weights against 0.5 ms (one thread); a 300-epoch deep-weight-factorization fit of
    LeNet-300-100 that keeps 1 in 1000 weights, 232 s against 174 s flushed, and a
    default NODERegressor on scikit-learn's diabetes (610 epochs, trees dying) 27.5 s
    against 15.6 s, both with the same result. Such values lie some 30 orders of
    magnitude below ``zero_tol``. ``torch.set_flush_denormal`` sets the calling thread
    only: other threads of torch's pool (``n_threads > 1``) keep their setting.
    """
    if _flushing_denormals():
        yield
        return
    flushing = torch.set_flush_denormal(True)  # False: not supported here
    try:
        yield
    finally:
        if flushing:
            torch.set_flush_denormal(False)


@contextmanager
def seeded(seed, device="cpu"):
    """Torch's random stream seeded with ``seed`` inside the block, the caller's restored
    after it. Only the generators of ``device`` are touched: ``torch.manual_seed`` seeds
    every backend (queued lazily, with a stack trace each) and costs ~0.4 ms, paid at
    every point of a path, and the backends it seeds outside ``fork_rng``'s devices keep
    the new state after the block."""
    device = torch.device("cpu" if device is None else device)
    if device.type == "cpu":
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(seed)
            yield
    else:
        with torch.random.fork_rng(devices=[device], device_type=device.type):
            torch.manual_seed(seed)
            yield
