"""entropy-lens: logit-lens entropy profiles of decoder-only language models.

After every block of a frozen model the residual stream is decoded with the model's own final norm
and unembedding (the logit lens, arXiv 2502.16570), and the next-token distribution is reduced to
its Shannon and Rényi entropies, its top-p candidate set and its top-k tokens: the per-layer
sequence is the *entropy profile*.

    >>> import entropy_lens as el
    >>> lens = el.Profiler.load("smollm2")           # downloaded on first use, sha256-checked
    >>> p = lens.profile("The Eiffel Tower is in", generate=8)
    >>> p.shannon.shape                              # (generated tokens, blocks), nats
    (8, 30)
    >>> p.heatmap()                                  # a plotly Figure

Every statistic is computed by the Rust library (the same code as the `entropy-lens` command, whose
`profile --json` output `Profile.to_json()` equals byte for byte); this package turns results into
numpy arrays, pandas tables and Plotly figures.
"""

from typing import TYPE_CHECKING, Any

from ._native import __version__

__all__ = [
    "__version__",
    "Profiler",
    "Profile",
    "knn_auc",
    "c1",
    "c2",
    "run_experiment",
    "load_run",
    "compare_runs",
    "Run",
    "train_lens",
    "fetch_models",
    "experiments",
    "Figure",
    "reset_plotly_js",
]

# Imported on first use, so that the `entropy-lens` command (which starts through this package)
# does not pay for numpy at start-up.
_LAZY = {
    "Profiler": "._profile",
    "Profile": "._profile",
    "knn_auc": "._stats",
    "c1": "._stats",
    "c2": "._stats",
    "run_experiment": "._runs",
    "load_run": "._runs",
    "compare_runs": "._runs",
    "Run": "._runs",
    "train_lens": "._runs",
    "fetch_models": "._runs",
    "experiments": "._runs",
    "Figure": "._figure",
    "reset_plotly_js": "._figure",
}

if TYPE_CHECKING:
    from ._figure import Figure, reset_plotly_js
    from ._profile import Profile, Profiler
    from ._runs import (
        Run,
        compare_runs,
        experiments,
        fetch_models,
        load_run,
        run_experiment,
        train_lens,
    )
    from ._stats import c1, c2, knn_auc


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'entropy_lens' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> "list[str]":
    return sorted(__all__)
