#!/usr/bin/env python3
"""Reference values for Kendall's τ-b and the corrected resampled t-test
(`tests/golden/stats/kendall.json`, read by tests/stats_parity.rs).

τ-b and its asymptotic two-sided p-value are scipy.stats.kendalltau's (method="asymptotic", the
one scipy uses with ties or past 50 pairs). The corrected resampled t-test (Nadeau & Bengio 2003,
"Inference for the Generalization Error") has no scipy function: it is the paired t statistic with
the variance of the mean difference inflated from var/k to var·(1/k + n_test/n_train), against
Student's t with k − 1 degrees of freedom (scipy.stats.t.sf).

Usage: python tests/golden/make_kendall.py   (numpy + scipy)
"""
import json
import os

import numpy as np
import scipy
from scipy import stats

rng = np.random.default_rng(2026)
cases = []


def case(name, x, y):
    res = stats.kendalltau(x, y, method="asymptotic")
    tau = None if np.isnan(res.statistic) else float(res.statistic)
    p = None if np.isnan(res.pvalue) else float(res.pvalue)
    cases.append({"name": name, "x": [float(v) for v in x], "y": [float(v) for v in y], "tau_b": tau, "p_value": p})


x = rng.normal(size=60)
case("continuous, no ties", x, 0.5 * x + rng.normal(size=60))
case("integers, heavy ties in both", rng.integers(0, 5, 300), rng.integers(0, 4, 300))
dh = rng.normal(size=2000)
dc = np.where(rng.random(2000) < 0.6, 0, np.round(3 * dh + rng.normal(size=2000)))
case("entropy change against count change, most counts unchanged", dh, dc)
case("monotone with ties", [1, 1, 2, 3, 3, 3, 4], [1, 2, 2, 3, 3, 4, 5])
case("reversed", [1, 2, 3, 4, 5], [5, 4, 3, 2, 1])
case("constant y", [1, 2, 3, 4], [2, 2, 2, 2])

a = 0.74 + 0.05 * rng.normal(size=10)
b = a - 0.02 + 0.02 * rng.normal(size=10)
d = a - b
k = len(d)
test_fraction = 1 / 9  # 10-fold CV: n_test / n_train = 1 / 9
t = d.mean() / np.sqrt((1 / k + test_fraction) * d.var(ddof=1))
p = 2 * stats.t.sf(abs(t), k - 1)
plain = stats.ttest_rel(a, b)
corrected = {"a": a.tolist(), "b": b.tolist(), "test_over_train": test_fraction, "t": float(t), "p_value": float(p),
             "plain_t": float(plain.statistic), "plain_p_value": float(plain.pvalue)}

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stats", "kendall.json")
with open(out, "w") as f:
    json.dump({"scipy": scipy.__version__, "kendall": cases, "corrected_t_test": corrected}, f, indent=1)
print(out)
