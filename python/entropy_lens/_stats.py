"""The paper's statistics: the kNN diagnostic (as ``entropy-lens classify``, equal to
scikit-learn) and the C1/C2 validation. Computed by the Rust library."""

import json
from typing import Any, Dict, Sequence

import numpy as np

from . import _native
from ._profile import Profile


def knn_auc(
    features: Any,
    labels: Sequence[Any],
    k: int = 29,
    folds: int = 10,
    seed: int = 42,
    weights: str = "uniform",
    standardize: bool = False,
    search: str = "brute",
) -> Dict[str, Any]:
    """Stratified k-fold cross-validated kNN: ROC-AUC (one-vs-rest, macro), macro F1, and the
    stratified dummy baseline with a paired t-test, as the CLI's ``classify --json``.

    ``features``: array-like ``(samples, features)`` (converted to float64); ``labels``: one per
    sample (any values; compared as strings). The paper's settings are the defaults (k = 29,
    10 folds). Returns ``auc_mean``, ``auc_std``, ``auc_folds``, ``baseline_auc_mean``,
    ``f1_macro_mean``, ``t_statistic``, ``p_value``, …
    """
    x = np.ascontiguousarray(np.asarray(features, dtype=np.float64))
    if x.ndim != 2:
        raise ValueError(f"features must be 2-D (samples × features), got shape {x.shape}")
    names = [str(v) for v in labels]
    if isinstance(k, bool) or isinstance(folds, bool):
        raise TypeError("k and folds must be ints")
    for name, v in (("k", k), ("folds", folds), ("seed", seed)):
        if int(v) < 0:
            raise ValueError(f"{name} must be ≥ 0, got {v}")
    text = _native.knn_auc(
        x, names, int(k), int(folds), int(seed), str(weights), bool(standardize), str(search)
    )
    return json.loads(text)


def _natives(profiles: Sequence[Profile]) -> "list[Any]":
    if isinstance(profiles, Profile):
        profiles = [profiles]
    out = []
    for i, p in enumerate(profiles):
        if not isinstance(p, Profile):
            raise TypeError(f"profiles[{i}] is {type(p).__name__}, not an entropy_lens.Profile")
        out.append(p._p)
    if not out:
        raise ValueError("no profiles given")
    return out


def c1(profiles: Sequence[Profile], model: str = "") -> Dict[str, Any]:
    """C1: Spearman's ρ between each block's entropy change and its top-p count change, pooled
    over every measured token (``rho``, ``p_value``, ``n_pairs``)."""
    natives = _natives(profiles)
    return json.loads(_native.c1(model or natives[0].model, natives))


def c2(profiles: Sequence[Profile], model: str = "") -> Dict[str, Any]:
    """C2: the share of each top-p set that the next block keeps, by whether the set grew or
    shrank. Profile with ``top_p_ids=True``."""
    natives = _natives(profiles)
    return json.loads(_native.c2(model or natives[0].model, natives))
