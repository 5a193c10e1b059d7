"""The statistics are the CLI's (and so scikit-learn's), computed by the library."""

import json

import numpy as np
import pytest
from conftest import cli

import entropy_lens as el


def blobs(seed=0):
    rng = np.random.default_rng(seed)
    x = np.vstack(
        [rng.normal(0, 1, (40, 5)), rng.normal(0.8, 1, (40, 5)), rng.normal(-0.8, 1, (40, 5))]
    )
    y = ["a"] * 40 + ["b"] * 40 + ["c"] * 40
    return x, y


def test_knn_auc_equals_the_cli_classify(tmp_path):
    x, y = blobs()
    np.savetxt(tmp_path / "x.csv", x, delimiter=",", fmt="%.17g")
    (tmp_path / "y.txt").write_text("\n".join(y) + "\n")
    for k, weights, standardize in [(29, "uniform", False), (7, "distance", True)]:
        got = el.knn_auc(x, y, k=k, folds=5, seed=3, weights=weights, standardize=standardize)
        flags = ["--k", str(k), "--folds", "5", "--seed", "3", "--weights", weights]
        flags += ["--standardize"] if standardize else []
        want = json.loads(
            cli(
                "classify",
                "--features",
                str(tmp_path / "x.csv"),
                "--labels",
                str(tmp_path / "y.txt"),
                "--json",
                *flags,
            ).stdout
        )
        assert got == want
        assert 0.5 < got["auc_mean"] <= 1.0 and len(got["auc_folds"]) == 5


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(k=500), ValueError),
        (dict(folds=1), ValueError),
        (dict(weights="cosine"), ValueError),
        (dict(search="lsh"), ValueError),
    ],
)
def test_knn_bad_input(kwargs, error):
    x, y = blobs()
    with pytest.raises(error):
        el.knn_auc(x, y, **kwargs)


def test_knn_rejects_nan_and_ragged_input():
    x, y = blobs()
    x[3, 2] = np.nan
    with pytest.raises(ValueError, match="(?i)finite|nan"):
        el.knn_auc(x, y)
    with pytest.raises(ValueError):
        el.knn_auc(np.ones(10), ["a"] * 10)
    with pytest.raises(ValueError, match="labels"):
        el.knn_auc(blobs()[0], ["a", "b"])


def spearman(a, b):
    """Spearman's ρ with average ranks for ties, from numpy alone (an independent reference)."""

    def ranks(v):
        order = np.argsort(v, kind="mergesort")
        r = np.empty(len(v))
        r[order] = np.arange(len(v))
        for value in np.unique(v):
            tie = v == value
            r[tie] = r[tie].mean()
        return r

    return np.corrcoef(ranks(a), ranks(b))[0, 1]


def test_c1_is_spearman_of_the_deltas_and_c2_needs_the_sets(lens):
    profiles = lens.profile(
        ["The sea is", "Once upon a time", "Paris is"], generate=4, top_p_ids=True
    )
    got = el.c1(profiles)
    dh = np.concatenate([np.diff(p.shannon, axis=1).ravel() for p in profiles])
    dc = np.concatenate([np.diff(p.top_p_count, axis=1).astype(float).ravel() for p in profiles])
    assert got["n_pairs"] == len(dh)
    assert got["rho"] == pytest.approx(spearman(dh, dc), abs=1e-12)
    c2 = el.c2(profiles)
    assert c2["model"] == profiles[0].model
    with pytest.raises(ValueError, match="top-p"):
        el.c2(lens.profile("The sea is"))
    with pytest.raises(TypeError):
        el.c1(["not a profile"])
