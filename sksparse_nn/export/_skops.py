"""What ``skops.io.load`` must be told to trust for the package's estimators."""

from __future__ import annotations

__all__ = ["trusted_types"]


def trusted_types():
    """The types a skops file of the package's estimators holds beyond skops' defaults.

    Fitted torch modules are saved as plain arrays (:class:`PortableModule`) and
    rebuilt by their estimator on loading, so no torch type is ever loaded: the list is
    the package's public estimator classes, ``PortableModule``, ``PortableHistory``, the
    path result ``SparsePathCV`` keeps and ``numpy.dtype`` (a fitted ``SimpleImputer``,
    as in ``TableEncoder``, holds one). A ``DGatedNeuralNet*`` whose ``module`` (or ``optimizer``)
    parameter is a class of your own holds that class too: add it.

    Returns
    -------
    types : list of str
        Qualified names, for ``skops.io.load(file, trusted=types)``.

    Examples
    --------
    >>> import skops.io as sio  # doctest: +SKIP
    >>> est = sio.load("model.skops", trusted=trusted_types())  # doctest: +SKIP
    """
    from sklearn.base import BaseEstimator

    import sksparse_nn

    classes = [getattr(sksparse_nn, name) for name in sksparse_nn.__all__]
    public = [
        f"{cls.__module__}.{cls.__qualname__}"  # where skops looks the class up
        for cls in classes
        if isinstance(cls, type) and issubclass(cls, BaseEstimator)
    ]
    inner = [f"{cls.__module__}.{cls.__qualname__}" for cls in _inner()]
    # a fitted SimpleImputer (TableEncoder's) keeps the dtype it was fitted on; skops
    # does not trust numpy's dtype objects by default
    return sorted(set(public) | set(inner) | {"numpy.dtype"})


def _inner():
    """Types the package's fitted objects hold beyond its public estimators."""
    from ..path import RegularizationPath
    from ._portable import PortableHistory, PortableModule

    return [PortableHistory, PortableModule, RegularizationPath]
