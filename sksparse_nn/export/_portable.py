"""A fitted torch module (and a training history) as the persistence formats see them.

Pickle (and ``copy.deepcopy``) store the module itself. skops, which rebuilds objects
from their ``__getstate__`` and refuses torch tensors (they cannot be built from a
dictionary of attributes), sees its tensors as named numpy arrays; the estimator that
owns the module rebuilds it from its parameters and loads them back
(:meth:`PortableModule.restore`). So a skops file holds no torch class at all, and the
types a user must trust stay the estimators' own. A skorch ``History`` (a list of
per-epoch dictionaries holding per-batch lists) is one JSON text for skops
(:class:`PortableHistory`): as nested skops nodes it made files 25 times the pickle's.
"""

from __future__ import annotations

import json

import numpy as np
import torch
from skorch.history import History

__all__ = ["PortableHistory", "PortableModule"]


def _tensors(module):
    """``(qualified name, tensor)`` of every parameter and persistent buffer."""
    return list(module.state_dict(keep_vars=False).items())


def _set_tensor(module, name, value):
    """Replace ``module.<name>`` (a parameter or buffer) by ``value``, whatever its shape
    and dtype were (a fitted module may have folded a per-feature scaling into a buffer
    that the freshly built one holds as a scalar)."""
    path, _, attr = name.rpartition(".")
    owner = module.get_submodule(path) if path else module
    tensor = torch.from_numpy(np.array(value, copy=True))
    if attr in owner._parameters:
        old = owner._parameters[attr]
        owner._parameters[attr] = torch.nn.Parameter(tensor, old is None or old.requires_grad)
    elif attr in owner._buffers:
        owner._buffers[attr] = tensor
    else:
        raise ValueError(
            f"the saved tensor {name!r} is not a parameter or buffer of the rebuilt "
            f"{type(module).__name__}: the file comes from another version of its family."
        )


def _from_module(module):
    return PortableModule(module)


class PortableModule:
    """Wrapper of a fitted module in an estimator's saved state.

    Parameters
    ----------
    module : torch.nn.Module or None
        The module (pickle and copies keep it as it is).
    arrays : dict of str to ndarray, optional
        Its parameters and buffers by qualified name (what skops stores).
    unbuildable : str or None, default=None
        Why the owner cannot rebuild this module (a module given as a parameter
        instance): skops then refuses it with that message instead of storing arrays
        no one can load.
    """

    def __init__(self, module=None, arrays=None, unbuildable=None):
        self.module = module
        self.arrays = arrays
        self.unbuildable = unbuildable

    def __reduce__(self):
        # pickle and deepcopy: the module object itself. skops does not take a
        # constructor other than the class, and reads __getstate__ instead.
        return (_from_module, (self.module,))

    def __getstate__(self):
        if self.unbuildable:
            raise TypeError(self.unbuildable)
        if self.module is None:
            return {"arrays": self.arrays}
        return {"arrays": {k: v.detach().cpu().numpy() for k, v in _tensors(self.module)}}

    def __setstate__(self, state):
        self.module, self.arrays, self.unbuildable = None, dict(state["arrays"]), None

    def restore(self, build):
        """The module: the one kept, or ``build()`` (a fresh module of the same
        structure, built without touching torch's global random state) with the saved
        arrays loaded, in eval mode."""
        if self.module is not None:
            return self.module
        with torch.random.fork_rng(devices=[]):
            module = build()
        names = {k for k, _ in _tensors(module)}
        missing = names - set(self.arrays)
        if missing:
            raise ValueError(
                f"the saved {type(module).__name__} lacks the tensors {sorted(missing)}: the "
                "file comes from another version of its family."
            )
        with torch.no_grad():
            for name, value in self.arrays.items():
                _set_tensor(module, name, value)
        return module.eval()


def _from_history(history):
    return PortableHistory(history)


class PortableHistory:
    """Wrapper of a skorch ``History`` in an estimator's saved state: pickle keeps the
    object, skops stores it as one JSON text (a history JSON cannot hold stays a list).

    Parameters
    ----------
    history : list of dict
        The training history (``history_``).
    """

    def __init__(self, history):
        self.history = history

    def __reduce__(self):  # pickle and deepcopy: the history itself
        return (_from_history, (self.history,))

    def __getstate__(self):
        try:
            return {"json": json.dumps(list(self.history), allow_nan=True)}
        except (TypeError, ValueError):  # an entry JSON cannot hold
            return {"list": list(self.history)}

    def __setstate__(self, state):
        self.history = json.loads(state["json"]) if "json" in state else state["list"]

    def restore(self):
        """The history as a skorch ``History``."""
        return self.history if isinstance(self.history, History) else History(self.history)


PortableModule.__module__ = "sksparse_nn.export"
PortableHistory.__module__ = "sksparse_nn.export"
