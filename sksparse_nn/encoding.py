"""The encoding of a raw table that :class:`~sksparse_nn.compose.VariableModel` builds by
default: :class:`TableEncoder`, one-hot codes for categories (rare levels pooled),
imputation with a missing-indicator column and standardization for numbers."""

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

    The column kinds are read from the data at ``fit``: a DataFrame's object, string,
    category and bool columns are *categorical*, its number columns *numeric*; a numeric
    array is numeric, an object array's columns are numeric where every value is a
    number or missing, else categorical. Then:

    - categorical: one-hot columns, levels seen in fewer than ``min_frequency`` rows
      pooled into one "infrequent" column (at most ``max_categories`` columns per
      variable); a missing value is a level of its own; a level unseen at fit time is
      encoded as the infrequent level when there is one, else as all zeros;
    - numeric: missing values imputed by the column's median, plus a 0/1
      missing-indicator column for every column that had missing values at fit time;
      then standardized (the indicator too).

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
        The input columns of each kind (names for a DataFrame, else positions).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when fitted on a DataFrame.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sksparse_nn.encoding import TableEncoder
    >>> df = pd.DataFrame({"city": ["Oslo", "Rome", "Oslo", None],
    ...                    "age": [31.0, np.nan, 45.0, 22.0]})
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
        X : DataFrame or array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self : TableEncoder
        """
        self.fit_transform(X, y)
        return self

    def fit_transform(self, X, y=None):
        """Fit on ``X`` and return its encoding (float64, dense)."""
        self._validate_params()
        # the kinds first (a date column's message), then scikit-learn's messages for
        # empty, 1-d or complex data (a temporary copy at most)
        categorical, numeric = _column_kinds(X)
        check_array(X, dtype=None, ensure_all_finite=False)
        self.categorical_columns_, self.numeric_columns_ = categorical, numeric
        self.column_transformer_ = self._encoding(categorical, numeric)
        out = self.column_transformer_.fit_transform(_as_table(X, categorical, numeric), y)
        self.n_features_in_ = self.column_transformer_.n_features_in_
        if hasattr(self.column_transformer_, "feature_names_in_"):
            self.feature_names_in_ = self.column_transformer_.feature_names_in_
        return np.asarray(out, dtype=np.float64)

    def transform(self, X):
        """The encoding of ``X`` (float64, dense)."""
        check_is_fitted(self, "column_transformer_")
        check_array(X, dtype=None, ensure_all_finite=False)  # scikit-learn's messages
        table = _as_table(X, self.categorical_columns_, self.numeric_columns_)
        out = self.column_transformer_.transform(table)
        return np.asarray(out, dtype=np.float64)

    def get_feature_names_out(self, input_features=None):
        """Names of the output columns (``<variable>_<level>``, ``<variable>``,
        ``missingindicator_<variable>``)."""
        check_is_fitted(self, "column_transformer_")
        return self.column_transformer_.get_feature_names_out(input_features)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        return tags


_CATEGORICAL = ("object", "category", "bool", "string")


def _column_kinds(X):
    """(categorical columns, numeric columns): names of a DataFrame, else positions."""
    if hasattr(X, "dtypes") and hasattr(X, "columns"):  # pandas
        categorical, numeric, other = [], [], []
        for name, dtype in X.dtypes.items():
            kind = getattr(dtype, "kind", "O")
            if str(dtype) in _CATEGORICAL or kind in "OSUb" or str(dtype) == "category":
                categorical.append(name)
            elif kind in "iuf":
                numeric.append(name)
            else:
                other.append(f"{name!r} ({dtype})")
        if other:
            raise ValueError(
                f"TableEncoder: the column(s) {', '.join(other)} are neither numbers nor "
                "categories; convert them (e.g. a date to its year or day count) or give "
                "VariableModel an encoder of your own."
            )
        return categorical, numeric
    X = check_array(X, dtype=None, ensure_all_finite=False)
    if X.dtype.kind in "iufb":
        return [], list(range(X.shape[1]))
    numeric = [j for j in range(X.shape[1]) if _all_numbers(X[:, j])]
    return [j for j in range(X.shape[1]) if j not in numeric], numeric


def _all_numbers(column):
    try:
        np.asarray(column, dtype=np.float64)  # None -> nan
    except (TypeError, ValueError):
        return False
    return True


def _as_table(X, categorical, numeric):
    """What the encoding reads: numeric columns as floats, object columns of levels as
    strings (a column mixing numbers and strings has levels "1.5" and "a"), missing
    values as NaN. A new table where anything changes, never the user's."""
    if not hasattr(X, "columns") and np.asarray(X).dtype.kind != "O":
        return X  # a numeric array: all numeric already
    frame = X if hasattr(X, "columns") else pd.DataFrame(np.asarray(X))
    mixed = [c for c in categorical if frame[c].dtype == object and _mixed(frame[c])]
    cast = {c: np.float64 for c in numeric if frame[c].dtype == object}
    if not mixed and not cast and hasattr(X, "columns"):
        return X
    frame = frame.astype(cast) if cast else frame.copy()
    for c in mixed:
        values = frame[c]
        frame[c] = values.where(values.isna(), values.astype(str))
    return frame


def _mixed(column):
    """Whether an object column holds values of more than one type (missing aside)."""
    return len({type(v) for v in column.dropna()}) > 1
