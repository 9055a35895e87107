"""Training data for skorch: a dataset of dense or sparse rows, batches by slicing."""

from __future__ import annotations

import copy

import numpy as np
import scipy.sparse as sp
import torch


def weighted_mean(per_sample, sample_weight=None):
    """Mean of per-sample losses, weighted when ``sample_weight`` (a tensor whose mean over
    the training set is 1) is given: the loss convention of every criterion here."""
    if sample_weight is None:
        return per_sample.mean()
    return (per_sample * sample_weight.to(per_sample.dtype)).mean()


class ArrayDataset(torch.utils.data.Dataset):
    """Features (dense ndarray or CSR / CSC matrix) and a target tensor, sliced per batch.

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

    Sparse features are kept as given (:attr:`given`: CSR or CSC, what the linear
    family's block steps read by columns); batches slice rows of :attr:`X`, their CSR
    form, converted from CSC on first use only (a fit that trains no epoch holds no
    second copy).
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
            self._given = X
            self._X = X if X.format == "csr" else None  # CSR on first use (see X)
            if X.format not in ("csr", "csc"):
                self._given = self._X = X.tocsr()
        else:
            X = self._standardize(np.asarray(X)) if scale is not None else X
            if not X.flags.writeable:
                X = np.array(X)  # torch tensors cannot share read-only memory
            self._given = self._X = torch.as_tensor(X, dtype=dtype, device=device)
        self.y = None if y is None else torch.as_tensor(y, device=device)
        self.weight = None if weight is None else torch.as_tensor(weight, device=device)

    @property
    def X(self):
        """The features batches slice: a tensor, or a CSR matrix (sparse features given
        as CSC are converted on first use)."""
        if self._X is None:
            self._X = self._given.tocsr()
        return self._X

    @X.setter
    def X(self, value):
        self._given = self._X = value

    @property
    def given(self):
        """The features as given: the tensor, or the sparse matrix (CSR or CSC)."""
        return self._given

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


class RandomSplit:
    """Hold out a random fraction of the training data for early stopping."""

    def __init__(self, fraction, seed):
        self.fraction, self.seed = fraction, seed

    def __call__(self, dataset, y=None, **kwargs):
        n = len(dataset)
        n_valid = max(1, int(round(self.fraction * n)))
        order = np.random.RandomState(self.seed).permutation(n)
        return dataset.subset(order[n_valid:]), dataset.subset(order[:n_valid])


def as_numpy(tensor):
    """CPU float64 numpy copy of a tensor."""
    return tensor.detach().cpu().numpy().astype(np.float64)
