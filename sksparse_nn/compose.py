"""Sparse models of a table's *variables*: encode them, select them as wholes.

One-hot encoding turns one categorical variable into several columns, but the question
is which *variables* matter, so a categorical must be kept or dropped as a whole: one
penalty group per variable. :func:`variable_groups` reads that structure off a fitted
encoder (a :class:`~sklearn.compose.ColumnTransformer`, a
:class:`~sklearn.preprocessing.OneHotEncoder`, a :class:`~sklearn.pipeline.Pipeline` of
them...), and :class:`VariableModel` encodes, fits any estimator of this package that
takes ``groups`` with one group per variable, and answers in the user's column names.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.feature_selection import SelectorMixin
from sklearn.utils import _safe_indexing
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .encoding import TableEncoder
from .variables import variable_groups

__all__ = ["TableEncoder", "VariableModel", "variable_groups"]


# ------------------------------------------------------------------ the meta-estimator
def _inner_has(attr):
    def check(self):
        getattr(self.estimator_ if hasattr(self, "estimator_") else self.estimator, attr)
        return True

    return check


def _groups_param(estimator):
    """The name under which ``estimator`` takes ``groups`` (directly or nested)."""
    params = estimator.get_params(deep=True)
    for name in ("groups", "estimator__groups"):
        if name in params:
            return name
    raise ValueError(
        f"{type(estimator).__name__} has no `groups` parameter, so it cannot keep or drop "
        "a variable's encoded columns together. Use an estimator that selects input "
        "features by groups: SparseLinearRegressor/Classifier, GroupLassoRegressor/"
        "Classifier, DGatedMLPRegressor/Classifier or DGatedNAMRegressor/Classifier (NODE "
        "selects trees, the autoencoder components, the general estimator its declared "
        "tensors' groups)."
    )


class VariableModel(SelectorMixin, MetaEstimatorMixin, BaseEstimator):
    """Encode a table, fit a sparse estimator with one group per variable, report variables.

    The raw table (a DataFrame with strings, categories, booleans, numbers and missing
    values, or an array) is encoded by ``encoder`` (by default a
    :class:`~sksparse_nn.encoding.TableEncoder`: one-hot levels with rare ones pooled,
    imputation with a missing-indicator column, standardization);
    :func:`variable_groups` then says which encoded columns come from which of the
    user's columns, and ``estimator`` is fitted on the encoded data with ``groups`` set
    to one group per variable, so a categorical (with all its levels) or a number (with
    its missingness) is kept or dropped whole. Predictions come from the estimator; as a
    selector (like :class:`~sklearn.feature_selection.SelectFromModel`), ``transform``
    keeps the selected *original* columns.

    Parameters
    ----------
    estimator : estimator with a ``groups`` parameter
        SparseLinear*, GroupLasso*, DGatedMLP*, DGatedNAM*, or a
        :class:`~sksparse_nn.SparsePathCV` of one; cloned. Its ``groups`` is set here.
    encoder : "auto" or transformer, default="auto"
        Maps the user's table to numbers; cloned and fitted. ``"auto"`` is
        ``TableEncoder()``, what a raw table needs (unknown levels at predict time
        ignored, missing values imputed). A transformer of your own (e.g. a
        ColumnTransformer) handles unknown categories as it says and must impute
        missing values: the estimators refuse NaN.
    unpenalized : list of str or int, default=None
        Variables (names, or positions among the encoder's inputs) that are never
        removed (label -1).

    Attributes
    ----------
    encoder_ : transformer
        The fitted encoder.
    estimator_ : estimator
        The fitted estimator (on the encoded columns).
    groups_ : ndarray of int of shape (n_encoded_columns,)
        Variable of each encoded column, as passed to the estimator (-1: unpenalized).
    variable_names_ : ndarray of object of shape (n_variables,)
        The user's columns (the encoder's inputs).
    variable_importances_ : ndarray of shape (n_variables,)
        Root sum of squares of the estimator's ``feature_importances_`` over each
        variable's encoded columns: exactly 0 for removed variables.
    selected_features_ : ndarray of int
        Indices of the kept variables among the user's columns.
    selected_variables_ : ndarray of object
        Their names.
    feature_importances_ : ndarray of shape (n_variables,)
        ``variable_importances_`` (what SelectFromModel and paths read).
    n_features_in_ : int
        Number of the user's columns (the encoder's inputs).
    feature_names_in_ : ndarray of str
        The user's column names; only when fitted on a DataFrame.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from sksparse_nn import SparseLinearRegressor
    >>> from sksparse_nn.compose import VariableModel
    >>> rng = np.random.RandomState(0)
    >>> df = pd.DataFrame({"color": rng.choice(["red", "blue", "green"], 200),
    ...                    "shape": rng.choice(["disc", "star"], 200),
    ...                    "size": rng.randn(200)})
    >>> df.loc[::10, "size"] = np.nan  # missing values are fine
    >>> effect = {"red": 1.0, "blue": -1.0, "green": 0.0}
    >>> y = df["color"].map(effect) + 0.1 * rng.randn(200)
    >>> model = VariableModel(SparseLinearRegressor(lam=0.05)).fit(df, y)
    >>> model.selected_variables_.tolist()
    ['color']
    """

    def __init__(self, estimator, *, encoder="auto", unpenalized=None):
        self.estimator = estimator
        self.encoder = encoder
        self.unpenalized = unpenalized

    # -------------------------------------------------------------------- fit
    def _encode_fit(self, X, y):
        """(fitted encoder, encoded X, variable of each column, variable names, groups)."""
        encoder = self._new_encoder()
        encoded = _check_finite(encoder.fit_transform(X, y), encoder)
        sources, names = variable_groups(encoder)
        labels = sources.copy()
        for v in self.unpenalized or ():
            index = v if isinstance(v, (int, np.integer)) else _name_index(names, v)
            if not 0 <= index < len(names):
                raise ValueError(f"unpenalized names variable {v!r}, out of range.")
            labels[sources == index] = -1
        return encoder, encoded, sources, names, labels

    def _new_encoder(self):
        if isinstance(self.encoder, str) and self.encoder == "auto":
            return TableEncoder()
        if not (hasattr(self.encoder, "fit_transform") and hasattr(self.encoder, "transform")):
            raise ValueError(
                f"VariableModel: encoder must be 'auto' or a transformer (fit_transform "
                f"and transform), got {self.encoder!r}."
            )
        return clone(self.encoder)

    def _with_groups(self, labels):
        estimator = clone(self.estimator)
        # groups as labels of the variables present (a label array: -1 stays unpenalized)
        return estimator.set_params(**{_groups_param(estimator): labels})

    def fit(self, X, y=None, **fit_params):
        """Fit the encoder on ``X``, then the estimator on the encoding with one group
        per variable.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        **fit_params : dict
            Passed to the estimator's ``fit`` (e.g. ``sample_weight``).

        Returns
        -------
        self : VariableModel
        """
        self.encoder_, encoded, sources, names, labels = self._encode_fit(X, y)
        self.groups_ = labels
        self.variable_names_ = names
        self.n_features_in_ = len(names)
        if hasattr(self.encoder_, "feature_names_in_"):
            self.feature_names_in_ = self.encoder_.feature_names_in_
        self.estimator_ = self._with_groups(labels).fit(encoded, y, **fit_params)
        importances = np.asarray(self.estimator_.feature_importances_, dtype=np.float64)
        self.variable_importances_ = _per_variable(importances, sources, len(names))
        self.feature_importances_ = self.variable_importances_
        self.selected_features_ = np.flatnonzero(self.variable_importances_ > 0)
        self.selected_variables_ = names[self.selected_features_]
        if is_classifier(self.estimator_):
            self.classes_ = self.estimator_.classes_
        return self

    # -------------------------------------------------------------- delegation
    def _encoded(self, X):
        """(fitted estimator, encoded X)."""
        check_is_fitted(self, "estimator_")
        return self.estimator_, _check_finite(self.encoder_.transform(X), self.encoder_)

    def predict(self, X):
        """The estimator's prediction on the encoded ``X``."""
        estimator, encoded = self._encoded(X)
        return estimator.predict(encoded)

    @available_if(_inner_has("predict_proba"))
    def predict_proba(self, X):
        """The estimator's class probabilities on the encoded ``X``."""
        estimator, encoded = self._encoded(X)
        return estimator.predict_proba(encoded)

    @available_if(_inner_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """The estimator's log class probabilities on the encoded ``X``."""
        estimator, encoded = self._encoded(X)
        return estimator.predict_log_proba(encoded)

    @available_if(_inner_has("decision_function"))
    def decision_function(self, X):
        """The estimator's decision function on the encoded ``X``."""
        estimator, encoded = self._encoded(X)
        return estimator.decision_function(encoded)

    def score(self, X, y, sample_weight=None):
        """The estimator's ``score`` on the encoded ``X``."""
        kwargs = {} if sample_weight is None else {"sample_weight": sample_weight}
        estimator, encoded = self._encoded(X)
        return estimator.score(encoded, y, **kwargs)

    def _get_support_mask(self):
        check_is_fitted(self, "estimator_")
        return self.variable_importances_ > 0

    def transform(self, X):
        """The selected variables' columns of ``X``.

        A table (pandas, polars, pyarrow) stays a table of its kind, its columns taken
        by name when the model was fitted on names (in any order, extra ones ignored);
        an array gives an array.

        Parameters
        ----------
        X : DataFrame (pandas, polars), pyarrow Table or array-like

        Returns
        -------
        X_selected : table or ndarray of shape (n_samples, n_selected_variables)
        """
        check_is_fitted(self, "estimator_")
        columns = _column_names(X)
        if hasattr(self, "feature_names_in_") and columns is not None:
            chosen = [str(n) for n in self.selected_variables_]
            missing = [n for n in chosen if n not in set(columns)]
            if missing:
                raise ValueError(
                    f"VariableModel: X has no column {', '.join(map(repr, missing))} "
                    "(columns are missing); columns are matched by name."
                )
            return _columns_by_name(X, chosen)
        if hasattr(X, "iloc"):
            return _safe_indexing(X, self.selected_features_, axis=1)
        return super().transform(X)

    # ------------------------------------------------------------------- export
    def to_onnx(self, X=None, *, drop_inputs=False, dtype="float32", opset=None):
        """The fitted model as an ONNX graph (see :func:`sksparse_nn.export.to_onnx`).

        With the default encoder the graph takes one input per column of the table,
        named by the column and typed by what it held at fit (string, bool, int64,
        float; a missing string fed as ``""``, a missing number as NaN), encodes the
        variables the estimator reads and runs the compacted estimator;
        :func:`sksparse_nn.export.onnx_feeds` builds the inputs from rows of the table.

        Parameters
        ----------
        X : table, optional
            A few rows of the table: checked to hold the fitted columns (with the
            default encoder), or the types of the inputs (an encoder of your own).
        drop_inputs : bool, default=False
            ``True``: only the columns the graph reads are inputs (default encoder).
        dtype : {"float32", "float64"}, default="float32"
            Float inputs and arithmetic of the graph.
        opset : int or None, default=None
            ONNX operator set (``None``: skl2onnx's default).

        Returns
        -------
        model : onnx.ModelProto
            Outputs ``variable`` (regression) or ``label`` and ``probabilities``
            (classification).
        """
        from .export import to_onnx

        return to_onnx(self, X, drop_inputs=drop_inputs, dtype=dtype, opset=opset)

    # -------------------------------------------------------------------- paths
    def lambda_max(self, X, y, sample_weight=None):
        """Top of the default lam grid of this model's paths (path protocol).

        The estimator's ``lambda_max`` on the encoding of ``X`` with one group per
        variable: where the D = 2 penalty zeroes every variable.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
        sample_weight : array-like of shape (n_samples,), default=None
            Passed to the estimator's ``lambda_max`` where given (a family that takes
            sample weights).

        Returns
        -------
        lam_max : float
        """
        from .path import weighted_lambda_max

        _, encoded, _, _, labels = self._encode_fit(X, y)
        return weighted_lambda_max(self._with_groups(labels), encoded, y, sample_weight)

    def regularization_path(self, X, y, **kwargs):
        """The estimator's regularization path, counted in variables.

        The encoder is fitted once on all of ``X`` (also for ``cv``: a one-hot encoding
        learns only the category lists, so the folds see the same columns) and encodes
        ``X_val`` when given. Keywords are those of
        :func:`sksparse_nn.regularization_path`.

        Returns
        -------
        path : RegularizationPath
            ``selected`` holds variable indices, ``feature_names`` the variable names,
            ``n_selected`` counts variables and ``importances`` are per variable.
        """
        from .path import regularization_path

        encoder, encoded, sources, names, labels = self._encode_fit(X, y)
        if kwargs.get("X_val") is not None:  # validation rows in the same encoding
            kwargs["X_val"] = _check_finite(encoder.transform(kwargs["X_val"]), encoder)
        path = regularization_path(self._with_groups(labels), encoded, y, **kwargs)
        selected = [np.unique(sources[np.asarray(s, dtype=np.intp)]) for s in path.selected]
        importances = path.importances
        if importances is not None and np.ndim(importances) == 2:
            importances = np.stack([_per_variable(row, sources, len(names)) for row in importances])
        return dataclasses.replace(
            path,
            selected=selected,
            n_selected=np.array([s.size for s in selected], dtype=int),
            feature_names=np.asarray(names, dtype=object),
            importances=importances,
            estimators=path.estimators,
            selection_unit="variables",
        )

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = self.estimator.__sklearn_tags__()
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.target_tags = inner.target_tags
        tags.input_tags.string = True
        tags.input_tags.categorical = True
        tags.input_tags.allow_nan = isinstance(self.encoder, str) and self.encoder == "auto"
        return tags


def _column_names(X):
    """The column names of a table (pandas, polars: ``columns``; pyarrow:
    ``column_names``), or None."""
    if isinstance(X, np.ndarray):
        return None
    names = getattr(X, "column_names", None)
    names = getattr(X, "columns", None) if names is None else names
    return None if names is None else [str(n) for n in names]


def _columns_by_name(X, names):
    """The columns ``names`` of a table, as a table of its kind."""
    if hasattr(X, "iloc"):  # pandas
        return X[names]
    if hasattr(X, "select"):  # polars, pyarrow
        return X.select(names)
    return _safe_indexing(X, names, axis=1)


def _check_finite(encoded, encoder):
    """The encoder's output, or a clear error when it holds NaN or infinite values."""
    values = encoded.data if hasattr(encoded, "data") and hasattr(encoded, "tocsr") else encoded
    try:
        finite = np.all(np.isfinite(np.asarray(values, dtype=np.float64)))
    except (TypeError, ValueError):
        return encoded  # non-numeric output: the estimator's validation reports it
    if not finite:
        raise ValueError(
            f"The encoder {type(encoder).__name__} produced NaN or infinite values: X has "
            "missing values (NaN) the encoder does not impute (add a SimpleImputer to the "
            "encoder, or leave encoder='auto', which imputes), or values too large for "
            "the encoder's arithmetic (rescale X)."
        )
    return encoded


def _name_index(names, name):
    matches = np.flatnonzero(np.asarray(names, dtype=object) == name)
    if not matches.size:
        raise ValueError(f"unpenalized names {name!r}, which is not an input variable.")
    return int(matches[0])


def _per_variable(values, sources, n_variables):
    """Root sum of squares of per-column values over each variable's columns."""
    values = np.nan_to_num(np.asarray(values, dtype=np.float64))  # a failed path point
    out = np.zeros(n_variables)
    np.add.at(out, sources, values**2)
    return np.sqrt(out)
