"""The encoding of a raw table that :class:`~sksparse_nn.compose.VariableModel` builds by
default: :class:`TableEncoder`, one-hot codes for categories (rare levels pooled),
imputation with a missing-indicator column and standardization for numbers.

A table is read one column at a time, in whatever form the user holds it: a pandas
DataFrame (object, ``str`` / ``string``, ``category``, ``bool`` / ``boolean``, numpy
and nullable numbers), a polars or pyarrow table (read through narwhals, imported only
when such a table is passed), or a 2-d array. Every form of one table gives the
encoding the same columns: the levels of a categorical column as Python strings, a
missing value as NaN, numbers as float64."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_array, check_is_fitted

__all__ = ["TableEncoder"]


class TableEncoder(TransformerMixin, BaseEstimator):
    """Encode a raw table (strings, categories, booleans, numbers, missing values).

    The column kinds are read from the data at ``fit``. A table's (pandas, polars or
    pyarrow) string, object, category (ordered or not; pandas ``category``, polars
    ``Categorical`` / ``Enum``, Arrow dictionaries) and boolean columns (``bool``,
    nullable ``boolean``) are *categorical*, its number columns (numpy or nullable
    integers and floats) *numeric*; a numeric array is numeric, an object array's
    columns are numeric where every value is a number or missing, else categorical.
    Every form of one table gives the same encoding: a level is the ``str`` of its
    value (``"True"``, ``"Oslo"``, ``"3"``), categories that no row holds are not
    levels, and a missing value (``None``, ``NaN``, ``pd.NA``, a null) is NaN. Then:

    - categorical: one-hot columns, levels seen in fewer than ``min_frequency`` rows
      pooled into one "infrequent" column (at most ``max_categories`` columns per
      variable); a missing value is a level of its own; a level unseen at fit time is
      encoded as the infrequent level when there is one, else as all zeros;
    - numeric: missing values imputed by the column's median, plus a 0/1
      missing-indicator column for every column that had missing values at fit time;
      then standardized (the indicator too).

    At ``transform`` the columns of a table are matched by name, as
    :class:`~sklearn.compose.ColumnTransformer` does: in any order, extra columns
    ignored, missing ones named in a ValueError.

    Every output column comes from one input column (``variable_groups`` reads which),
    so :class:`~sksparse_nn.compose.VariableModel` keeps or drops a variable with its
    levels and its missingness as one group.

    Parameters
    ----------
    min_frequency : int or float, default=10
        Levels seen in fewer rows (a float: a share of the rows) are pooled into the
        variable's "infrequent" column: a level seen a handful of times gives a column
        that can only be fitted to its few rows' noise.
    max_categories : int or None, default=32
        Most output columns of one categorical variable (the pooled column included),
        so an identifier-like column cannot flood the encoding; ``None`` for no limit.

    Attributes
    ----------
    column_transformer_ : ColumnTransformer
        The fitted encoding, parts ``"categorical"`` and ``"numeric"``.
    categorical_columns_, numeric_columns_ : list
        The input columns of each kind (names for a table, else positions).
    input_kinds_ : list of str
        What each input column held at fit: ``"string"`` (strings, objects,
        categories), ``"boolean"``, ``"integer"`` or ``"float"``; the ONNX export
        (:func:`sksparse_nn.export.to_onnx`) types its inputs from it.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when fitted on a table whose column names are all strings.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sksparse_nn.encoding import TableEncoder
    >>> df = pd.DataFrame({"city": ["Oslo", "Rome", "Oslo", None],
    ...                    "age": [31.0, np.nan, 45.0, 22.0]})
    >>> TableEncoder(min_frequency=1).fit(df).get_feature_names_out().tolist()
    ['city_Oslo', 'city_Rome', 'city_nan', 'age', 'missingindicator_age']
    >>> df["city"] = df["city"].astype("category")  # the same encoding
    >>> TableEncoder(min_frequency=1).fit(df).get_feature_names_out().tolist()
    ['city_Oslo', 'city_Rome', 'city_nan', 'age', 'missingindicator_age']
    """

    _parameter_constraints = {
        "min_frequency": [
            Interval(Integral, 1, None, closed="left"),
            Interval(Real, 0, 1, closed="neither"),
        ],
        "max_categories": [Interval(Integral, 2, None, closed="left"), None],
    }

    def __init__(self, *, min_frequency=10, max_categories=32):
        self.min_frequency = min_frequency
        self.max_categories = max_categories

    def _encoding(self, categorical, numeric):
        onehot = OneHotEncoder(
            handle_unknown="infrequent_if_exist",
            min_frequency=self.min_frequency,
            max_categories=self.max_categories,
            sparse_output=False,
        )
        numbers = make_pipeline(
            SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True),
            StandardScaler(),
        )
        return ColumnTransformer(
            [("categorical", onehot, categorical), ("numeric", numbers, numeric)],
            sparse_threshold=0.0,
            verbose_feature_names_out=False,
        )

    def fit(self, X, y=None):
        """Read the column kinds and fit the encoding.

        Parameters
        ----------
        X : DataFrame (pandas, polars), pyarrow Table or array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self : TableEncoder
        """
        self.fit_transform(X, y)
        return self

    def fit_transform(self, X, y=None):
        """Fit on ``X`` and return its encoding (float64, dense).

        Parameters
        ----------
        X : DataFrame (pandas, polars), pyarrow Table or array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        encoded : ndarray of shape (n_samples, n_encoded_columns)
        """
        self._validate_params()
        table = _Table(X)
        kinds = [table.kind(j) for j in range(table.n_columns)]
        categorical = [j for j, k in enumerate(kinds) if k in _LEVELS]
        numeric = [j for j, k in enumerate(kinds) if k not in _LEVELS]
        labels = table.labels()
        self.categorical_columns_ = [labels[j] for j in categorical]
        self.numeric_columns_ = [labels[j] for j in numeric]
        self.input_kinds_ = [_INPUT_KINDS[k] for k in kinds]
        self.column_transformer_ = self._encoding(self.categorical_columns_, self.numeric_columns_)
        every = list(range(table.n_columns))
        out = self.column_transformer_.fit_transform(table.encodable(every, kinds, labels))
        self.n_features_in_ = table.n_columns
        if table.names is not None:
            self.feature_names_in_ = np.asarray(table.names, dtype=object)
        return np.asarray(out, dtype=np.float64)

    def transform(self, X):
        """The encoding of ``X`` (float64, dense).

        Parameters
        ----------
        X : DataFrame (pandas, polars), pyarrow Table or array-like
            The fitted columns (a table's matched by name: in any order, extra columns
            ignored).

        Returns
        -------
        encoded : ndarray of shape (n_samples, n_encoded_columns)
        """
        table, positions = self._fitted_columns(X)
        kinds = [_READ_AS[k] for k in self.input_kinds_]
        labels = list(getattr(self, "feature_names_in_", range(self.n_features_in_)))
        out = self.column_transformer_.transform(table.encodable(positions, kinds, labels))
        return np.asarray(out, dtype=np.float64)

    def read_columns(self, X):
        """The fitted columns of ``X`` as the encoding reads them.

        Parameters
        ----------
        X : DataFrame (pandas, polars), pyarrow Table or array-like
            The fitted columns (a table's matched by name).

        Returns
        -------
        columns : dict
            Input column name (``x0, x1, ...`` without names) -> 1-d array: a
            categorical column's levels as ``str`` objects, missing values NaN; a
            numeric column as float64, missing values NaN.
        """
        table, positions = self._fitted_columns(X)
        names = self._input_names()
        out = {}
        for name, j, kind in zip(names, positions, self.input_kinds_, strict=True):
            column = table.column(j)
            out[name] = _levels(column) if kind in ("string", "boolean") else _numbers(column)
        return out

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns (``<variable>_<level>``, ``<variable>``,
        ``missingindicator_<variable>``).

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Names of the input columns (default: the fitted ones).

        Returns
        -------
        names : ndarray of str
        """
        check_is_fitted(self, "column_transformer_")
        return self.column_transformer_.get_feature_names_out(input_features)

    def _input_names(self):
        if hasattr(self, "feature_names_in_"):
            return [str(n) for n in self.feature_names_in_]
        return [f"x{j}" for j in range(self.n_features_in_)]

    def _fitted_columns(self, X):
        """(table, position in X of every fitted column)."""
        check_is_fitted(self, "column_transformer_")
        table = _Table(X)
        fitted = getattr(self, "feature_names_in_", None)
        if fitted is not None and table.names is not None:
            where = {name: j for j, name in enumerate(table.names)}
            missing = [name for name in fitted if name not in where]
            if missing:
                raise ValueError(
                    f"TableEncoder: X has no column {', '.join(map(repr, missing))} (columns "
                    "are missing); it was fitted on "
                    f"{', '.join(map(repr, fitted))}. Columns are matched by name, in any "
                    "order; extra columns are ignored."
                )
            return table, [where[name] for name in fitted]
        if table.n_columns != self.n_features_in_:
            raise ValueError(
                f"X has {table.n_columns} features, but TableEncoder is expecting "
                f"{self.n_features_in_} features as input."
            )
        return table, list(range(self.n_features_in_))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        return tags


# ------------------------------------------------------------------ reading a table
#: Kinds of column read as levels (the others as numbers).
_LEVELS = ("category", "string", "object", "boolean")
#: ``input_kinds_`` of each kind read.
_INPUT_KINDS = {
    "category": "string",
    "string": "string",
    "object": "string",
    "boolean": "boolean",
    "integer": "integer",
    "float": "float",
}
#: How a column of each fitted input kind is read at transform (whatever its dtype now).
_READ_AS = {"string": "string", "boolean": "string", "integer": "float", "float": "float"}


class _Table:
    """A 2-d input read one column at a time: a pandas DataFrame as it is, a polars or
    pyarrow table (anything narwhals reads eagerly) through narwhals, anything else as
    a 2-d array (scikit-learn's checks and messages)."""

    def __init__(self, X):
        self.names = None
        if isinstance(X, pd.DataFrame):
            self.kind_of, self.frame = "pandas", X
            columns = list(X.columns)
        elif _foreign_table(X):
            self.kind_of, self.frame = "narwhals", _narwhals(X)
            columns = list(self.frame.columns)
        else:
            self.kind_of = "array"
            # scikit-learn's messages for empty, 1-d, n-d or complex data
            self.frame = check_array(X, dtype=None, ensure_all_finite=False)
            columns = list(range(self.frame.shape[1]))
        self.n_columns = len(columns)
        if self.kind_of != "array":
            n_rows = len(self.frame)
            if n_rows == 0 or self.n_columns == 0:
                raise ValueError(
                    f"Found array with {n_rows} sample(s) and {self.n_columns} feature(s) "
                    f"(shape=({n_rows}, {self.n_columns})) while a minimum of 1 of each is "
                    "required by TableEncoder."
                )
            if all(isinstance(c, str) for c in columns):
                self.names = columns
        self._columns = columns

    def labels(self):
        """What the encoding calls the columns: their names, else their positions."""
        return list(self.names) if self.names is not None else list(range(self.n_columns))

    def column(self, j):
        """Column ``j``: a pandas or narwhals Series, or a 1-d array."""
        if self.kind_of == "pandas":
            return self.frame.iloc[:, j]
        if self.kind_of == "narwhals":
            return self.frame.get_column(self._columns[j])
        return self.frame[:, j]

    def kind(self, j):
        """What column ``j`` holds: one of ``_INPUT_KINDS`` (a clear error for others)."""
        if self.kind_of == "array" and self.frame.dtype.kind in "iufb":
            return "integer" if self.frame.dtype.kind in "iu" else "float"
        column = self.column(j)
        kind = _kind(column)
        if kind is None:
            name = self._columns[j]
            raise ValueError(
                f"TableEncoder: the column {name!r} ({_dtype(column)}) is neither numbers "
                "nor categories; convert it (e.g. a date to its year or day count) or give "
                "VariableModel an encoder of your own."
            )
        if kind == "object" and self.kind_of == "array" and _all_numbers(column):
            return "float"  # an object array's column of numbers and missing values
        return kind

    def encodable(self, positions, kinds, labels):
        """What the encoding reads: the columns at ``positions`` (read as ``kinds``: levels
        or numbers) in a new DataFrame, labelled ``labels`` (the names or positions of
        the fit), or a numeric array as it is."""
        if self.kind_of == "array" and self.frame.dtype.kind in "iufb":
            if all(isinstance(c, Integral) for c in labels):
                return self.frame  # numbers by position: what the encoding reads already
        data = {}
        for label, j, kind in zip(labels, positions, kinds, strict=True):
            column = self.column(j)
            data[label] = _levels(column) if kind in _LEVELS else _numbers(column, label)
        return pd.DataFrame(data, copy=False)


def _foreign_table(X):
    """Whether ``X`` is a dataframe other than pandas' (polars, pyarrow, ...)."""
    if isinstance(X, (np.ndarray, pd.Series)):
        return False
    module = type(X).__module__.split(".")[0]
    return module in ("polars", "pyarrow", "modin", "cudf", "pyspark", "duckdb", "ibis") or (
        hasattr(X, "__arrow_c_stream__")
    )


def _narwhals(X):
    try:
        import narwhals as nw
    except ImportError as exc:  # pragma: no cover - scikit-learn >= 1.7 requires it
        raise ImportError(
            f"TableEncoder reads a {type(X).__module__}.{type(X).__name__} through "
            "narwhals: pip install narwhals (or pass a pandas DataFrame)."
        ) from exc
    try:
        return nw.from_native(X, eager_only=True)
    except TypeError as exc:
        raise TypeError(
            f"TableEncoder cannot read a {type(X).__name__}: pass a pandas, polars or "
            "pyarrow table in memory (a lazy frame collected first) or an array."
        ) from exc


def _is_narwhals(column):
    return type(column).__module__.split(".")[0] == "narwhals"


def _kind(column):
    """``"category"``, ``"string"``, ``"object"``, ``"boolean"``, ``"integer"``,
    ``"float"``, or None (dates, durations, complex numbers, nested values...)."""
    if _is_narwhals(column):
        import narwhals as nw

        dtype = column.dtype
        if isinstance(dtype, (nw.Categorical, nw.Enum)):
            return "category"
        if dtype == nw.String:
            return "string"
        if dtype.is_boolean():
            return "boolean"
        if dtype.is_integer():
            return "integer"
        if dtype.is_numeric():
            return "float"
        if dtype == nw.Object or dtype == nw.Unknown:
            return "object"
        return None
    dtype = column.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return "category"
    if pd.api.types.is_object_dtype(dtype):
        return "object"
    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if pd.api.types.is_integer_dtype(dtype):
        return "integer"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if pd.api.types.is_string_dtype(dtype):
        return "string"
    return None


def _dtype(column):
    return str(column.dtype)


def _all_numbers(column):
    try:
        np.asarray(column, dtype=np.float64)  # None -> nan
    except (TypeError, ValueError):
        return False
    return True


_BOOL_LEVELS = np.array(["False", "True", np.nan], dtype=object)


def _levels(column):
    """The column's values as levels: ``str`` objects, missing values NaN (a new array
    wherever a value changes; the user's column is never written)."""
    if _is_narwhals(column):
        import narwhals as nw

        missing = column.is_null().to_numpy()
        if column.dtype.is_boolean():
            codes = column.fill_null(False).to_numpy().astype(np.intp)
            codes[missing] = 2
            return _BOOL_LEVELS[codes]
        if _kind(column) != "object":
            # strings; categories as their strings (pyarrow's dictionaries need the
            # cast: their to_numpy fills nulls)
            values = column.cast(nw.String).to_numpy()
            return _with_nan(np.asarray(values, dtype=object), missing, strings=True)
        return _object_levels(np.asarray(column.to_numpy(), dtype=object))
    if isinstance(column, pd.Series):
        dtype = column.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            codes = column.cat.codes.to_numpy()
            levels = _object_levels(np.asarray(column.cat.categories, dtype=object))
            return np.append(levels, np.nan)[codes]  # code -1: missing
        if pd.api.types.is_bool_dtype(dtype):
            missing = column.isna().to_numpy()
            codes = column.to_numpy(dtype=bool, na_value=False).astype(np.intp)
            codes[missing] = 2
            return _BOOL_LEVELS[codes]
        return _object_levels(column.to_numpy(dtype=object, na_value=np.nan))
    column = np.asarray(column)
    if column.dtype.kind == "b":
        return _BOOL_LEVELS[column.astype(np.intp)]
    return _object_levels(column.astype(object, copy=False))


def _object_levels(values):
    """Object values as levels: missing ones (None, NaN, pd.NA) NaN, others their str."""
    missing = pd.isna(values)
    strings = pd.api.types.infer_dtype(values, skipna=True) in ("string", "empty")
    return _with_nan(values, missing, strings=strings)


def _with_nan(values, missing, *, strings):
    """``values`` (object) with NaN where ``missing`` and ``str`` of every other value
    unless they are strings already; a new array when anything changes."""
    if strings and not missing.any():
        return values
    out = values.copy()
    if not strings:
        out[~missing] = [str(v) for v in values[~missing]]
    out[missing] = np.nan
    return out


def _numbers(column, name=None):
    """The column as float64, missing values NaN (the user's memory where it is
    float64 already: never written)."""
    try:
        if _is_narwhals(column):
            import narwhals as nw

            if _kind(column) in ("integer", "float", "boolean"):
                return np.asarray(column.cast(nw.Float64).to_numpy(), dtype=np.float64)
            values = np.asarray(column.to_numpy(), dtype=object)
        elif isinstance(column, pd.Series):
            if _kind(column) in ("integer", "float", "boolean"):
                return column.to_numpy(dtype=np.float64, na_value=np.nan)
            values = column.to_numpy(dtype=object, na_value=np.nan)
        else:
            values = np.asarray(column)
        return values.astype(np.float64)  # None -> nan
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"TableEncoder: the column {name!r} held numbers at fit; it now holds values "
            f"that are not numbers ({exc})."
        ) from exc
