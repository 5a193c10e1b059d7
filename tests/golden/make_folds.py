#!/usr/bin/env python3
"""Fixtures for reproducing scikit-learn's StratifiedKFold(shuffle=True) exactly: numpy's legacy
RandomState (MT19937) shuffles and the test folds scikit-learn deals. Writes stats/folds.json.
Run by hand with numpy and scikit-learn (versions recorded in the file)."""
import json
import os

import numpy as np
import sklearn
from sklearn.model_selection import StratifiedKFold

HERE = os.path.dirname(os.path.abspath(__file__))


def shuffles():
    out = []
    for seed, n in [(42, 20), (0, 7), (4294967295, 33), (12345, 1000)]:
        rs = np.random.RandomState(seed)
        a = np.arange(n)
        rs.shuffle(a)
        b = np.arange(5)
        rs.shuffle(b)  # the same generator, continued
        out.append({"seed": seed, "n": n, "first": a.tolist(), "then5": b.tolist()})
    return out


def folds():
    rng = np.random.RandomState(7)
    cases = []
    ys = [
        [0] * 10 + [1] * 10 + [2] * 10,
        ["b", "a", "c"] * 11 + ["a"] * 4,                      # classes not in sorted order
        list(rng.randint(0, 3, size=103)),
        [1] * 70 + [0] * 25 + [2] * 12,
        ["poem", "scientific", "chat_log"] * 100,             # the formats item order
    ]
    for y in ys:
        for n_splits, seed in [(10, 42), (5, 0), (3, 4294967295)]:
            y = [str(v) for v in y]
            if min(y.count(c) for c in set(y)) < n_splits:
                continue
            skf = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)
            test = [t.tolist() for _, t in skf.split(np.zeros(len(y)), y)]
            cases.append({"y": y, "n_splits": n_splits, "seed": seed, "test_folds": test})
    return cases


def main():
    out = {
        "numpy": np.__version__,
        "sklearn": sklearn.__version__,
        "shuffles": shuffles(),
        "stratified_kfold": folds(),
    }
    with open(os.path.join(HERE, "stats", "folds.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")
    print(len(out["stratified_kfold"]), "fold cases")


if __name__ == "__main__":
    main()
