"""The skorch net that trains a sparsified module: penalized loss, Ctrl-C, stopping."""

from __future__ import annotations

import torch
from skorch import NeuralNet
from skorch.callbacks import Callback
from skorch.dataset import get_len, unpack_data
from skorch.history import History
from skorch.utils import TeeGenerator

from ..sparsifiers import (
    cached,
    closed_form_penalties,
    penalty,
    penalty_function,
    sparsified_tensors,
)
from ..utils.interrupt import InterruptRequested, interrupt_requested
from .optimizers import plain_sgd_step, zero_grads
from .runtime import flush_denormals

#: Optimizers whose ``step(closure)`` calls the closure once, before their update.
_ONE_CLOSURE_CALL = (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW)


def _listens(callback, hook):
    """Whether ``callback`` overrides skorch's no-op ``hook``."""
    return getattr(type(callback), hook, None) is not getattr(Callback, hook)


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


#: skorch's events of every batch: :meth:`PenalizedNet.notify` sends them to the net and
#: to the callbacks that define them, not to every callback's no-op.
PER_BATCH_EVENTS = ("on_batch_begin", "on_batch_end", "on_grad_computed")


class PenalizedNet(NeuralNet):
    """A skorch net whose training loss is ``criterion + lam * penalty(module)``, plus
    ``lam * sum(c * p^2)`` for every parameter ``p`` that ``ridge`` names.

    The penalty enters only when ``training=True``, so validation losses measure the fit
    to the data alone (an early stopping that watches the validation objective adds
    ``lam`` times the penalty itself).

    skorch ends training on any ``KeyboardInterrupt`` and swallows it in
    ``partial_fit`` (its own ``EarlyStopping`` uses it as a signal), so a user's Ctrl-C
    would silently end just the current fit. This net instead:

    - ends training early when a callback raises :class:`StopTraining`, caught by
      :meth:`fit_loop` (``on_train_end`` callbacks still run, e.g. the best weights of
      :class:`EarlyStopping` are restored);
    - raises a real Ctrl-C again from :meth:`partial_fit` (and so ``fit``) once training
      has stopped, as ``KeyboardInterrupt("Training interrupted during epoch k
      (Ctrl-C).")``, without ``on_train_end``: the estimator is left unfitted, a
      half-trained model is never presented as a fit;
    - stops the same way when the thread's :func:`interrupt_on` flag is raised
      (:class:`InterruptRequested`, how parallel paths forward a Ctrl-C to their workers).

    No signal handler is installed, so fits work in any thread.

    Parameters
    ----------
    *args, **kwargs
        Those of :class:`skorch.NeuralNet`.
    lam : float, default=0.0
        Penalty strength.
    ridge : dict of str to float or tensor, default=None
        ``{parameter name: c}``, ``c`` a number or a tensor of per-entry weights
        broadcastable to the parameter.
    fused_step : callable, default=None
        ``fused_step(net) -> step or None``, called when training starts: a ``step(X,
        targets, lam)`` that sets every learnable parameter's ``.grad`` to the whole
        training objective's gradient on a batch in one call and returns ``(objective,
        outputs)``, or None for a batch it does not take (the autograd step runs). A
        family declares it (``Traits.fused_step``) where the autograd graph's per-node
        costs outweigh its module's arithmetic.
    """

    def __init__(self, *args, lam=0.0, ridge=None, fused_step=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lam = lam
        self.ridge = ridge
        self.fused_step = fused_step

    def initialize_module(self):
        super().initialize_module()
        # Penalties with a closed-form gradient (D-Gating's L2 on the factors) are added
        # to the gradients after backward (train_step_single); the others enter the loss.
        self.penalty_ = penalty_function(self.module_, direct=False)
        self.direct_penalties_ = closed_form_penalties(self.module_)
        # no penalty left for the loss: get_loss skips calling it (a subclass that sets
        # its own penalty_ is called as before)
        n_sparsified = sum(1 for _ in sparsified_tensors(self.module_))
        self._empty_penalty = self.penalty_ if len(self.direct_penalties_) == n_sparsified else None
        self._training_modules = None  # every module of the step, listed at its first
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

    def training_objective(self, dataset, batch_size=None):
        """The training objective (mean criterion plus ``lam`` times the penalty) of the
        module as it is, on ``dataset``, as an epoch's training loss sees it (training
        mode: dropout, batch statistics), without gradients; the module's buffers
        (BatchNorm's running statistics) and mode are left as they were. ``batch_size``:
        rows per forward pass (the net's when None; another size changes the value only
        through batch statistics and dropout masks)."""
        data, penalized = self.training_terms(dataset, batch_size)
        return data + penalized

    def training_terms(self, dataset, batch_size=None):
        """``(data term, lam times the penalty and the ridge)`` of
        :meth:`training_objective`, which is their sum."""
        module = self.module_
        was_training = module.training
        saved = [(buffer, buffer.clone()) for buffer in module.buffers()]
        module.train()
        total, count = 0.0, 0
        try:
            # the gated weights formed once for the pass (they do not change in it)
            with torch.no_grad(), cached():
                for Xi, yi in self._objective_batches(dataset, batch_size):
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
        return total / max(count, 1), self.lam * value

    def _objective_batches(self, dataset, batch_size):
        if batch_size is None:
            return self.get_iterator(dataset, training=False)
        kwargs = {**self.get_params_for("iterator_valid"), "batch_size": batch_size}
        return self.iterator_valid(dataset, **kwargs)

    def get_loss(self, y_pred, y_true, X=None, training=False):
        if isinstance(y_true, (tuple, list)):  # (targets, sample weights)
            loss = self.criterion_(y_pred, *y_true)
        else:
            loss = self.criterion_(y_pred, y_true)
        if training and self.lam and self.penalty_ is not getattr(self, "_empty_penalty", None):
            loss = loss + self.lam * self.penalty_()
        return loss

    def initialize_criterion(self):
        super().initialize_criterion()
        self._training_modules = None
        return self

    def train_step(self, batch, **fit_params):
        """skorch's step; for the optimizers that evaluate a closure once before their
        update (SGD, Adam, AdamW), the same calls without the closure and, when no
        callback listens, without the ``on_grad_computed`` notification (a walk over
        every parameter per step). A plain SGD steps without torch's wrapper
        (:func:`~.optimizers.plain_sgd_step`: the same numbers)."""
        optimizers = [getattr(self, name + "_") for name in self._optimizers]
        if len(optimizers) != 1 or type(optimizers[0]) not in _ONE_CLOSURE_CALL:
            return super().train_step(batch, **fit_params)
        zero_grads(optimizers[0])
        step = self.train_step_single(batch, **fit_params)
        if getattr(self, "_grad_listeners", True):
            self.notify(
                "on_grad_computed",
                named_parameters=TeeGenerator(self.get_all_learnable_params()),
                batch=batch,
                training=True,
            )
        if not plain_sgd_step(optimizers[0]):
            optimizers[0].step()
        return step

    def train_step_single(self, batch, **fit_params):
        """skorch's step, then ``lam`` times the closed-form penalty gradients added to
        the gradients (during backward by the sparsifiers that fold them in, see
        ``Sparsifier.fold_penalty_grad``, after it by the others); the returned loss
        (history, L-BFGS's line search) includes their value, so it is the whole
        training objective.

        The net's modules and criteria (skorch's ``_modules`` and ``_criteria``) are
        switched to training mode only when one is not in it (the first batch after a
        validation or a prediction): skorch's ``Module.train`` on every batch visits
        every submodule. A family's fused step (``fused_step``), when it takes the batch,
        replaces all of it: it sets every ``.grad`` and returns the objective itself.
        """
        members = getattr(self, "_training_modules", None)
        if members is None:  # listed once per module / criterion (re)initialization
            owners = [getattr(self, name + "_") for name in (*self._modules, *self._criteria)]
            owners = [o for o in owners if isinstance(o, torch.nn.Module)]
            members = (owners, [m for o in owners for m in o.modules()])
            self._training_modules = members
        if not all(m.training for m in members[1]):
            for o in members[0]:
                o.train()
        Xi, yi = unpack_data(batch)
        fused = None if fit_params else self.__dict__.get("fused_step_")
        if fused is not None:
            computed = fused(Xi, yi, self.lam)
            if computed is not None:
                return {"loss": computed[0], "y_pred": computed[1]}
        folds = self.lam and self.direct_penalties_
        try:
            for s, _ in folds or ():  # added during backward where a method can
                s.fold_penalty_grad(self.lam)
            y_pred = self.infer(Xi, **fit_params)
            loss = self.get_loss(y_pred, yi, X=Xi, training=True)
            loss.backward()
        except BaseException:  # no request left pending for a later backward pass
            for s, _ in folds or ():
                s.fold_penalty_grad(None)
            raise
        step = {"loss": loss, "y_pred": y_pred}
        if self.lam and (self.direct_penalties_ or self.ridge_):
            value = sum(s.add_penalty_grad_(o, self.lam) for s, o in self.direct_penalties_)
            if self.ridge_:
                value = value + self._add_ridge_grad()
            step["loss"] = step["loss"] + self.lam * value
        return step

    def notify(self, method_name, **cb_kwargs):
        """skorch's ``notify``; the per-batch events (:data:`PER_BATCH_EVENTS`) reach
        only the callbacks that define them (skorch calls every callback's no-op, three
        times a step: a cost next to a small model's arithmetic)."""
        if method_name not in PER_BATCH_EVENTS:
            return super().notify(method_name, **cb_kwargs)
        getattr(self, method_name)(self, **cb_kwargs)  # the net's own first (a new batch)
        for cb in self._listeners[method_name]:
            getattr(cb, method_name)(self, **cb_kwargs)
        return None

    def run_single_epoch(self, iterator, training, prefix, step_fn, **fit_params):
        """skorch's epoch: the same events, steps and history rows (each batch's loss
        and size, the epoch's batch count), with the rows written directly into a
        plain skorch ``History`` (its indexing and ``get_len`` cost ~5% of a small
        model's step); any other history, or a net that overrides
        ``on_batch_begin``, gets skorch's own loop."""
        history = self.history
        plain = type(history) is History and (type(self).on_batch_begin is NeuralNet.on_batch_begin)
        if iterator is None or not plain:
            return super().run_single_epoch(iterator, training, prefix, step_fn, **fit_params)
        rows = list.__getitem__(history, -1)["batches"]
        loss_key, size_key = prefix + "_loss", prefix + "_batch_size"
        begin, end = self._listeners["on_batch_begin"], self._listeners["on_batch_end"]
        count = 0
        for batch in iterator:
            rows.append({})  # the net's own on_batch_begin: a new batch row
            for cb in begin:
                cb.on_batch_begin(self, batch=batch, training=training)
            step = step_fn(batch, **fit_params)
            row = rows[-1]
            row[loss_key] = step["loss"].item()
            X = batch[0] if isinstance(batch, (tuple, list)) else batch
            row[size_key] = X.shape[0] if torch.is_tensor(X) else get_len(X)
            self.on_batch_end(self, batch=batch, training=training, **step)
            for cb in end:
                cb.on_batch_end(self, batch=batch, training=training, **step)
            count += 1
        history.record(prefix + "_batch_count", count)

    def initialize_callbacks(self):
        """skorch's; then which callbacks define each per-batch event (see
        :meth:`notify`; :meth:`train_step` skips ``on_grad_computed`` when none does)."""
        super().initialize_callbacks()
        self._listeners = {
            event: [cb for _, cb in self.callbacks_ if _listens(cb, event)]
            for event in PER_BATCH_EVENTS
        }
        self._grad_listeners = bool(self._listeners["on_grad_computed"])
        return self

    def get_default_callbacks(self):
        return [*super().get_default_callbacks(), ("interrupt_on_flag", _InterruptOnFlag())]

    def fit_loop(self, X, y=None, epochs=None, **fit_params):
        """skorch's fit loop, with subnormal numbers flushed to zero
        (:func:`flush_denormals`); :class:`StopTraining` ends it normally, a Ctrl-C is
        kept."""
        # the family's fused step, built on the initialized module and criterion
        self.__dict__["fused_step_"] = self.fused_step(self) if self.fused_step else None
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
