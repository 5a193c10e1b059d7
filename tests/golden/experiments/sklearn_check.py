#!/usr/bin/env python3
"""scikit-learn's kNN diagnostic on the experiment fixtures in this folder, read the way a Python user
reads any entropy-lens run: `numpy.load("profiles.npy")` and `json.load(open("index.json"))`.

For every sub-folder: KNeighborsClassifier(k) (euclidean, uniform), StratifiedKFold(10, shuffle=True,
random_state=42), one-vs-rest macro ROC-AUC per fold; for `formats`, one slice of the features per Rényi
order (axes alpha × window × layer). Writes sklearn.json beside the fixture; tests/experiment_fixtures.rs
compares it with result.json. Run by hand (needs scikit-learn): python sklearn_check.py
"""
import json
import os
import sys

import numpy as np
import sklearn
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier

HERE = os.path.dirname(os.path.abspath(__file__))


def cv_auc(x, y, k):
    folds = StratifiedKFold(n_splits=10, shuffle=True, random_state=42)
    aucs = []
    for train, test in folds.split(x, y):
        knn = KNeighborsClassifier(n_neighbors=k, metric="euclidean").fit(x[train], y[train])
        proba = knn.predict_proba(x[test])
        aucs.append(roc_auc_score(y[test], proba, multi_class="ovr", average="macro"))
    return float(np.mean(aucs)), float(np.std(aucs))


def main():
    for name in sorted(os.listdir(HERE)):
        d = os.path.join(HERE, name)
        if not os.path.isdir(d):
            continue
        x = np.load(os.path.join(d, "profiles.npy"))
        index = json.load(open(os.path.join(d, "index.json")))
        result = json.load(open(os.path.join(d, "result.json")))
        classes = sorted(set(index["labels"]))
        y = np.array([classes.index(label) for label in index["labels"]])
        assert x.shape == (index["n_rows"], index["n_features"]), x.shape
        out = {"sklearn": sklearn.__version__, "numpy": np.__version__, "n_rows": int(x.shape[0])}
        if result["experiment"] == "tasks":
            k = result["knn"]["k"]
            out["auc_mean"], out["auc_std"] = cv_auc(x, y, k)
        elif result["experiment"] == "formats":
            shape = index["layout"]["shape"]
            cube = x.reshape(x.shape[0], *shape)
            out["per_alpha"] = {}
            for i, alpha in enumerate(index["layout"]["alphas"]):
                k = result["per_alpha"][alpha]["k"]
                m, s = cv_auc(cube[:, i].reshape(x.shape[0], -1), y, k)
                out["per_alpha"][alpha] = {"auc_mean": m, "auc_std": s}
        else:
            continue
        with open(os.path.join(d, "sklearn.json"), "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
        print(name, out)


if __name__ == "__main__":
    sys.exit(main())
