"""Which of a table's variables each encoded column comes from: :func:`variable_groups`
reads it off a fitted encoder (a ColumnTransformer, a OneHotEncoder, a Pipeline of them,
any transformer that names its outputs after its inputs). Its public home is
:mod:`sksparse_nn.compose` (also ``sksparse_nn.variable_groups``)."""

from __future__ import annotations

import numpy as np
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder
from sklearn.utils.validation import check_is_fitted

__all__ = ["variable_groups"]


def _input_names(transformer, n_inputs=None):
    names = getattr(transformer, "feature_names_in_", None)
    if names is not None:
        return np.asarray(names, dtype=object)
    n = getattr(transformer, "n_features_in_", n_inputs)
    return np.array([f"x{i}" for i in range(n)], dtype=object)


def _onehot_sources(encoder):
    """Input feature of every output column of a fitted OneHotEncoder."""
    counts = getattr(encoder, "_n_features_outs", None)  # infrequent categories, drop
    if counts is None:
        drop = getattr(encoder, "drop_idx_", None)
        counts = [
            len(c) - (drop is not None and drop[i] is not None)
            for i, c in enumerate(encoder.categories_)
        ]
    return np.repeat(np.arange(len(counts)), counts)


def _imputer_sources(imputer, n_inputs):
    """Input of every output column of a fitted SimpleImputer: the columns it keeps
    (an empty column is dropped unless ``keep_empty_features``), then one
    missing-indicator column per input that had missing values."""
    statistics = np.asarray(imputer.statistics_)
    kept = np.arange(n_inputs)
    if not imputer.keep_empty_features:
        empty = (
            np.isnan(statistics)
            if statistics.dtype.kind == "f"
            else np.array([s is None or s != s for s in statistics], dtype=bool)
        )
        kept = kept[~empty]
    indicator = getattr(imputer, "indicator_", None)
    if indicator is None:
        return kept
    return np.concatenate([kept, np.asarray(indicator.features_, dtype=np.intp)])


def _sources_by_name(transformer, inputs):
    """Input of every output column from the output names: an output named like an
    input, or ``<input>_<suffix>`` (the longest such input), comes from that input."""
    outputs = np.asarray(transformer.get_feature_names_out(inputs), dtype=object)
    if len(outputs) == len(inputs) and np.array_equal(outputs, inputs):
        return np.arange(len(inputs))  # one to one (scalers, imputers, ...)
    order = sorted(range(len(inputs)), key=lambda i: -len(str(inputs[i])))
    sources = np.empty(len(outputs), dtype=np.intp)
    for k, name in enumerate(map(str, outputs)):
        match = [i for i in order if name == str(inputs[i]) or name.startswith(f"{inputs[i]}_")]
        if not match:
            raise ValueError(
                f"Cannot tell which input variable the output column {name!r} of "
                f"{type(transformer).__name__} comes from (its name starts with none of "
                f"{list(map(str, inputs))}). Give groups by hand, or encode such outputs "
                "in a step of their own."
            )
        sources[k] = match[0]
    return sources


def _sources(transformer, n_inputs):
    """Input index (of the transformer's own inputs) of every output column."""
    if isinstance(transformer, str):  # "passthrough" inside a ColumnTransformer
        return np.arange(n_inputs)
    if hasattr(transformer, "transformers_"):  # a (nested) ColumnTransformer
        sources = np.empty(0, dtype=np.intp)
        for _, part, columns in _parts(transformer):
            sub = _sources(part, len(columns))
            sources = np.concatenate([sources, np.asarray(columns, dtype=np.intp)[sub]])
        return sources
    if isinstance(transformer, Pipeline):
        sources = np.arange(n_inputs)
        for _, step in transformer.steps:
            if step is None or step == "passthrough":
                continue
            sources = sources[_sources(step, len(sources))]
        return sources
    if isinstance(transformer, OneHotEncoder):
        return _onehot_sources(transformer)
    if isinstance(transformer, SimpleImputer):
        return _imputer_sources(transformer, n_inputs)
    if hasattr(transformer, "column_transformer_"):  # TableEncoder: its fitted encoding
        return _sources(transformer.column_transformer_, n_inputs)
    if not hasattr(transformer, "get_feature_names_out"):
        raise ValueError(
            f"{type(transformer).__name__} has no get_feature_names_out: cannot map its "
            "output columns to input variables."
        )
    return _sources_by_name(transformer, _input_names(transformer, n_inputs))


def _parts(column_transformer):
    """(name, fitted transformer, input column indices) of every part that has outputs,
    in output order."""
    n_inputs = column_transformer.n_features_in_
    names = _input_names(column_transformer, n_inputs)
    lookup = {str(n): i for i, n in enumerate(names)}
    out = []
    for name, part, columns in column_transformer.transformers_:
        if isinstance(part, str) and part == "drop":
            continue
        sl = column_transformer.output_indices_[name]
        if sl.stop == sl.start:
            continue
        index = np.arange(n_inputs)[_column_selector(columns, names, lookup)]
        out.append((name, part, index))
    return out


def _column_selector(columns, names, lookup):
    columns = np.atleast_1d(np.asarray(columns))
    if columns.dtype == bool:
        return np.flatnonzero(columns)
    if columns.dtype.kind in "OUS":
        return np.array([lookup[str(c)] for c in columns], dtype=np.intp)
    return columns.astype(np.intp)


def variable_groups(encoder):
    """The input variable of every column a fitted encoder outputs.

    Parameters
    ----------
    encoder : fitted transformer
        A :class:`~sklearn.compose.ColumnTransformer` (parts may be pipelines, one-hot
        encoders, scalers, ``"passthrough"``...), a
        :class:`~sklearn.preprocessing.OneHotEncoder`, a
        :class:`~sklearn.pipeline.Pipeline` of such steps, or any transformer whose
        ``get_feature_names_out`` names outputs ``<input>`` or ``<input>_<suffix>``.

    Returns
    -------
    labels : ndarray of int of shape (n_output_columns,)
        Index into ``names`` of the variable each output column comes from: a valid
        ``groups`` label array for the estimators of this package.
    names : ndarray of object of shape (n_variables,)
        The encoder's input column names (``feature_names_in_``, or ``x0, x1, ...``).
        Columns the encoder drops have no output column.

    Examples
    --------
    >>> import pandas as pd
    >>> from sklearn.compose import make_column_transformer
    >>> from sklearn.preprocessing import OneHotEncoder, StandardScaler
    >>> from sksparse_nn.compose import variable_groups
    >>> df = pd.DataFrame({"color": ["red", "blue", "green"],
    ...                    "age": [30.0, 40.0, 50.0]})
    >>> ct = make_column_transformer((OneHotEncoder(), ["color"]),
    ...                              (StandardScaler(), ["age"]))
    >>> labels, names = variable_groups(ct.fit(df))
    >>> labels.tolist(), names.tolist()
    ([0, 0, 0, 1], ['color', 'age'])
    """
    check_is_fitted(encoder)
    n_inputs = encoder.n_features_in_
    return _sources(encoder, n_inputs).astype(np.intp), _input_names(encoder, n_inputs)
