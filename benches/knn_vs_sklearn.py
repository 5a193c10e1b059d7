#!/usr/bin/env python3
"""kNN diagnostic: entropy-lens vs scikit-learn on the same data, in one script.

The paper's task experiment at full size: 2,400 samples × 960 features (30 layers × 32 tokens),
3 classes; 10-fold stratified CV (shuffle, seed 42), KNeighborsClassifier(k=29), one-vs-rest
macro ROC-AUC per fold, a stratified dummy baseline and a paired t-test.

  pip install scikit-learn scipy numpy
  cargo build --release && python3 benches/knn_vs_sklearn.py [path/to/entropy-lens]

Prints a Markdown table with median wall times over 3 runs and the ratio.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from scipy import stats
from sklearn.dummy import DummyClassifier
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier

N, D, C, K, FOLDS, REPS = 2400, 960, 3, 29, 10, 7


def data():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(C), N // C)
    base = rng.normal(size=(C, D))
    X = base[y] * 0.04 + rng.normal(size=(N, D))
    return X, y


def sklearn_cv(X, y):
    skf = StratifiedKFold(n_splits=FOLDS, shuffle=True, random_state=42)
    aucs, base = [], []
    for tr, te in skf.split(X, y):
        knn = KNeighborsClassifier(n_neighbors=K).fit(X[tr], y[tr])
        aucs.append(roc_auc_score(y[te], knn.predict_proba(X[te]), multi_class="ovr"))
        d = DummyClassifier(strategy="stratified", random_state=42).fit(X[tr], y[tr])
        base.append(roc_auc_score(y[te], d.predict_proba(X[te]), multi_class="ovr"))
    return float(np.mean(aucs)), float(stats.ttest_rel(aucs, base).pvalue)


def median_time(f):
    times, out = [], None
    for _ in range(REPS):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2], out


def main():
    exe = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(os.path.dirname(__file__), "..", "target")),
        "release", "entropy-lens")
    X, y = data()
    with tempfile.TemporaryDirectory() as tmp:
        fx, fy = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.txt")
        np.save(fx, X)
        with open(fy, "w") as f:
            f.write("\n".join(f"class{v}" for v in y) + "\n")
        t_sk, (auc_sk, p_sk) = median_time(lambda: sklearn_cv(X, y))

        def ours():
            out = subprocess.run([exe, "classify", "--features", fx, "--labels", fy, "--k", str(K),
                                  "--folds", str(FOLDS), "--json"], check=True, capture_output=True, text=True)
            return json.loads(out.stdout)
        t_el, r = median_time(ours)
    import sklearn
    threads = os.cpu_count()
    print(f"data: {N} × {D}, {C} classes, k = {K}, {FOLDS}-fold CV; {threads} CPUs; median of {REPS}\n")
    print("| implementation | wall time (s) | AUC mean | p (vs dummy) |")
    print("|---|---|---|---|")
    print(f"| scikit-learn {sklearn.__version__} (in-process) | {t_sk:.3f} | {auc_sk:.4f} | {p_sk:.2e} |")
    print(f"| entropy-lens classify (whole process, reads .npy) | {t_el:.3f} | {r['auc_mean']:.4f} | {r['p_value']:.2e} |")
    print(f"\nratio scikit-learn / entropy-lens: {t_sk / t_el:.2f}× (> 1 means entropy-lens is faster)")


if __name__ == "__main__":
    main()
