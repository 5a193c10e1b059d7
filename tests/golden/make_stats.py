#!/usr/bin/env python3
"""Golden fixtures for entropy-lens' statistics, computed with scikit-learn / scipy.

Run by hand (not in CI):  pip install scikit-learn scipy numpy && python3 tests/golden/make_stats.py
Writes tests/golden/stats/sklearn.json; `cargo test` reads it and needs no Python.

Sections:
  knn        predict_proba of KNeighborsClassifier(algorithm="brute") on fixed splits, uniform and
             distance weights, including exact distance ties and zero distances
  roc_auc    roc_auc_score, binary and one-vs-rest macro, with tied scores
  f1         f1_score(average="macro")
  spearman   scipy.stats.spearmanr with ties
  ttest_rel  scipy.stats.ttest_rel p-values
  pca        PCA(n_components=2) coordinates and explained variance ratios
  tsne       TSNE trustworthiness on clustered data
  cv         10-fold cross-validated kNN ROC-AUC (StratifiedKFold, shuffle, seed 42) on the real
             entropy-profile features in tests/golden/stats/tinystories_smollm2_*.csv, when present
"""
import json
import os

import numpy as np
import scipy
import sklearn
from scipy import stats
from sklearn.decomposition import PCA
from sklearn.dummy import DummyClassifier
from sklearn.manifold import TSNE, trustworthiness
from sklearn.metrics import f1_score, roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "stats", "sklearn.json")
rng = np.random.default_rng(20261129)


def arr(a):
    return np.asarray(a).tolist()


def knn_cases():
    cases = []
    # Gaussian clusters: no ties.
    centers = rng.normal(size=(3, 5)) * 2.0
    y = rng.integers(0, 3, size=90)
    X = centers[y] + rng.normal(size=(90, 5))
    cases.append(("gaussian_3class", X[:70], y[:70], X[70:]))
    # Integer grid: many exact distance ties.
    Xg = rng.integers(0, 3, size=(60, 3)).astype(float)
    yg = rng.integers(0, 2, size=60)
    cases.append(("grid_ties_binary", Xg[:45], yg[:45], Xg[45:]))
    Xg3 = rng.integers(0, 2, size=(50, 4)).astype(float)
    yg3 = rng.integers(0, 3, size=50)
    cases.append(("grid_ties_3class", Xg3[:40], yg3[:40], Xg3[40:]))
    # Test points that coincide with training points (zero distances, duplicated training rows).
    Xd = rng.normal(size=(30, 4))
    Xd[10] = Xd[3]
    yd = rng.integers(0, 2, size=30)
    test = np.vstack([Xd[3], Xd[7], rng.normal(size=(4, 4))])
    cases.append(("zero_distance", Xd, yd, test))
    # scikit-learn's heap keeps {1, 2, 3} here, not the lowest indices {0, 2, 3}.
    Xh = np.array([[-1.0], [-1.0], [0.0], [0.0], [1.0], [1.0], [2.0], [2.0]])
    yh = np.array([0, 1, 0, 1, 1, 0, 1, 0])
    cases.append(("heap_ties", Xh, yh, np.array([[0.0], [0.5], [-0.5]])))
    out = []
    for name, Xtr, ytr, Xte in cases:
        for k in (1, 3, 5, 7):
            for weights in ("uniform", "distance"):
                knn = KNeighborsClassifier(n_neighbors=k, weights=weights, algorithm="brute")
                knn.fit(Xtr, ytr)
                out.append({
                    "name": name, "k": k, "weights": weights,
                    "train_x": arr(Xtr), "train_y": arr(ytr), "test_x": arr(Xte),
                    "classes": arr(knn.classes_),
                    "proba": arr(knn.predict_proba(Xte)),
                })
    return out


def roc_cases():
    out = []
    y = rng.integers(0, 2, size=40)
    s = np.round(rng.normal(size=40) + y, 1)  # rounded: tied scores
    out.append({"kind": "binary", "y": arr(y), "scores": arr(s), "auc": roc_auc_score(y, s)})
    s2 = rng.integers(0, 4, size=40).astype(float)  # heavy ties
    out.append({"kind": "binary", "y": arr(y), "scores": arr(s2), "auc": roc_auc_score(y, s2)})
    for n_classes in (3, 4):
        y = rng.integers(0, n_classes, size=60)
        p = rng.dirichlet(np.ones(n_classes), size=60)
        p = np.round(p, 1)
        p = p / p.sum(axis=1, keepdims=True)
        out.append({"kind": "ovr_macro", "y": arr(y), "proba": arr(p),
                    "auc": roc_auc_score(y, p, multi_class="ovr", average="macro")})
    return out


def f1_cases():
    out = []
    for n_classes in (2, 3):
        y = rng.integers(0, n_classes, size=50)
        pred = np.where(rng.random(50) < 0.7, y, rng.integers(0, n_classes, size=50))
        out.append({"y": arr(y), "pred": arr(pred), "f1": f1_score(y, pred, average="macro")})
    # A class never predicted (zero division -> 0).
    y = np.array([0, 0, 1, 1, 2, 2])
    pred = np.array([0, 0, 1, 1, 1, 1])
    out.append({"y": arr(y), "pred": arr(pred), "f1": f1_score(y, pred, average="macro", zero_division=0)})
    return out


def spearman_cases():
    out = []
    x = np.round(rng.normal(size=50), 1)
    y = np.round(x + rng.normal(size=50), 1)
    r = stats.spearmanr(x, y)
    out.append({"x": arr(x), "y": arr(y), "rho": float(r.statistic), "p": float(r.pvalue)})
    x = rng.integers(0, 5, size=30).astype(float)
    y = rng.integers(0, 5, size=30).astype(float)
    r = stats.spearmanr(x, y)
    out.append({"x": arr(x), "y": arr(y), "rho": float(r.statistic), "p": float(r.pvalue)})
    return out


def ttest_cases():
    out = []
    for _ in range(3):
        a = 0.9 + 0.03 * rng.normal(size=10)
        b = 0.5 + 0.05 * rng.normal(size=10)
        out.append({"a": arr(a), "b": arr(b), "p": float(stats.ttest_rel(a, b).pvalue),
                    "t": float(stats.ttest_rel(a, b).statistic)})
    a = rng.normal(size=10)
    b = a + 0.01 * rng.normal(size=10)
    out.append({"a": arr(a), "b": arr(b), "p": float(stats.ttest_rel(a, b).pvalue),
                "t": float(stats.ttest_rel(a, b).statistic)})
    return out


def clusters(n_per, dims, n_clusters, spread, seed):
    r = np.random.default_rng(seed)
    centers = r.normal(size=(n_clusters, dims)) * spread
    X = np.vstack([c + r.normal(size=(n_per, dims)) for c in centers])
    y = np.repeat(np.arange(n_clusters), n_per)
    return X, y


def pca_case():
    X, _ = clusters(40, 6, 3, 3.0, 7)
    X[:, 2] *= 5.0
    pca = PCA(n_components=2)
    coords = pca.fit_transform(X)
    return {"x": arr(X), "coords": arr(coords), "explained_variance_ratio": arr(pca.explained_variance_ratio_)}


def tsne_case():
    X, y = clusters(50, 10, 3, 4.0, 11)
    emb = TSNE(n_components=2, perplexity=30.0, random_state=0, init="pca").fit_transform(X)
    return {"x": arr(X), "labels": arr(y), "perplexity": 30.0, "n_neighbors": 5,
            "trustworthiness": float(trustworthiness(X, emb, n_neighbors=5))}


def cv_case():
    feats = os.path.join(HERE, "stats", "tinystories_smollm2_features.csv")
    labels = os.path.join(HERE, "stats", "tinystories_smollm2_labels.txt")
    if not os.path.exists(feats):
        return None
    X = np.loadtxt(feats, delimiter=",")
    y = np.array(open(labels).read().split())
    skf = StratifiedKFold(n_splits=10, shuffle=True, random_state=42)
    aucs, base = [], []
    for train, test in skf.split(X, y):
        knn = KNeighborsClassifier(n_neighbors=29).fit(X[train], y[train])
        aucs.append(roc_auc_score(y[test], knn.predict_proba(X[test]), multi_class="ovr", average="macro"))
        dummy = DummyClassifier(strategy="stratified", random_state=42).fit(X[train], y[train])
        base.append(roc_auc_score(y[test], dummy.predict_proba(X[test]), multi_class="ovr", average="macro"))
    return {"k": 29, "folds": 10, "auc_mean": float(np.mean(aucs)), "auc_std": float(np.std(aucs)),
            "baseline_auc_mean": float(np.mean(base)), "p_value": float(stats.ttest_rel(aucs, base).pvalue)}


def main():
    data = {
        "versions": {"sklearn": sklearn.__version__, "scipy": scipy.__version__, "numpy": np.__version__},
        "knn": knn_cases(),
        "roc_auc": roc_cases(),
        "f1": f1_cases(),
        "spearman": spearman_cases(),
        "ttest_rel": ttest_cases(),
        "pca": pca_case(),
        "tsne": tsne_case(),
        "cv": cv_case(),
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(data, f)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
