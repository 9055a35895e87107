"""A fitted torch module as the persistence formats see it.

Pickle (and ``copy.deepcopy``) store the module itself. skops, which rebuilds objects
from their ``__getstate__`` and refuses torch tensors (they cannot be built from a
dictionary of attributes), sees its tensors as named numpy arrays; the estimator that
owns the module rebuilds it from its parameters and loads them back
(:meth:`PortableModule.restore`). So a skops file holds no torch class at all, and the
types a user must trust stay the estimators' own.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["PortableModule"]


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
    """

    def __init__(self, module=None, arrays=None):
        self.module = module
        self.arrays = arrays

    def __reduce__(self):
        # pickle and deepcopy: the module object itself. skops does not take a
        # constructor other than the class, and reads __getstate__ instead.
        return (_from_module, (self.module,))

    def __getstate__(self):
        if self.module is None:
            return {"arrays": self.arrays}
        return {"arrays": {k: v.detach().cpu().numpy() for k, v in _tensors(self.module)}}

    def __setstate__(self, state):
        self.module, self.arrays = None, dict(state["arrays"])

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


PortableModule.__module__ = "sksparse_nn.export"
