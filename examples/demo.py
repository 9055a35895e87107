"""The main job, on data bundled with scikit-learn: a neural network that selects features.

Run with ``make demo``. A D-gated MLP classifier is trained on the breast-cancer data
(30 features); the features it does not need end with exactly zero weights during
training, no pruning step involved. Then the sparse linear model chooses its own lam by
a cross-validated regularization path on the diabetes data.
"""

import time

from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sksparse_nn import DGatedMLPClassifier, SparseLinearRegressor, SparsePathCV


def mlp_feature_selection():
    data = load_breast_cancer(as_frame=True)
    X_train, X_test, y_train, y_test = train_test_split(
        data.data, data.target, stratify=data.target, random_state=0
    )
    model = make_pipeline(StandardScaler(), DGatedMLPClassifier(lam=0.03, D=3, random_state=0))
    start = time.perf_counter()
    model.fit(X_train, y_train)
    est = model[-1]
    seconds = time.perf_counter() - start
    print(f"DGatedMLPClassifier(lam=0.03, D=3) on breast cancer ({seconds:.1f} s)")
    print(f"  test accuracy: {model.score(X_test, y_test):.3f}")
    names = list(X_train.columns[est.selected_features_])
    print(f"  selected {len(names)} of {X_train.shape[1]} features: {names}")
    dropped, live = est.sparsity_gap_
    print(f"  largest dropped group norm (before thresholding): {dropped:.1e}")
    print(f"  smallest kept group norm:                         {live:.1e}")


def linear_cv_path():
    X, y = load_diabetes(return_X_y=True, as_frame=True)
    search = SparsePathCV(SparseLinearRegressor(D=3), n_lams=15, cv=5)
    start = time.perf_counter()
    search.fit(X, (y - y.mean()) / y.std())
    seconds = time.perf_counter() - start
    print(f"\nSparsePathCV(SparseLinearRegressor(D=3)) on diabetes ({seconds:.1f} s)")
    print(f"  lam with the best mean CV score: {search.lam_:.4f}")
    print(f"  selected features: {list(search.feature_names_in_[search.selected_features_])}")


if __name__ == "__main__":
    mlp_feature_selection()
    linear_cv_path()
