"""Experiments from Python are the CLI's runs: the same folder bytes, resumable after Ctrl-C."""

import html
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import cli

import entropy_lens as el

FILES = ["config.json", "records.jsonl", "profiles.npy", "index.json", "result.json"]


def same_files(a, b):
    for name in FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_run_experiment_writes_the_cli_bytes_and_load_run_reads_them(smollm2, tmp_path):
    ours = tmp_path / "python"
    run = el.run_experiment(
        "tasks", model=smollm2, out=ours, n=4, tokens=3, folds=2, k=3, progress=False
    )
    cli(
        "experiment",
        "tasks",
        "--model",
        smollm2,
        "--out",
        str(tmp_path / "cli"),
        "--n",
        "4",
        "--tokens",
        "3",
        "--folds",
        "2",
        "--k",
        "3",
    )
    same_files(ours, tmp_path / "cli")
    assert run.result == json.loads((ours / "result.json").read_text())
    x = run.features
    assert x.dtype == np.float64 and x.shape[0] == len(run.labels) == 12  # 3 tasks × 4 stories
    assert run.records.shape[0] == 12 and "profile" in run.records.columns
    profiles = run.profiles()
    assert len(profiles) == 12 and profiles[0].shannon.shape[1] == 30
    assert el.load_run(ours).result == run.result
    assert run.report.exists()
    # The charts and tables are the report's own.
    report = run.report.read_text()
    charts = run.charts()
    assert len(charts) == report.count('class="entropy-lens-chart"') >= 2
    assert all(isinstance(c, el.Figure) and c.sketch.startswith("<svg") for c in charts)
    tables = run.tables() + run.tables(comparison=True)
    assert tables and report.count('class="entropy-lens-table"') >= len(tables)
    for t in tables:
        assert html.escape(t.attrs["title"], quote=False) in report
        assert all(html.escape(str(c), quote=False) in report for c in t.iloc[0])


def test_ctrl_c_leaves_a_run_that_resumes_to_the_same_bytes(smollm2, tmp_path):
    whole = tmp_path / "whole"
    el.run_experiment(
        "tasks", model=smollm2, out=whole, n=3, tokens=3, batch=1, folds=3, k=3, progress=False
    )
    stopped = tmp_path / "stopped"

    def interrupt_after_the_first_item(done, total, status):
        if done >= 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        el.run_experiment(
            "tasks",
            model=smollm2,
            out=stopped,
            n=3,
            tokens=3,
            batch=1,
            folds=3,
            k=3,
            progress=interrupt_after_the_first_item,
        )
    records = (stopped / "records.jsonl").read_text().splitlines()
    assert 1 <= len(records) < 9
    assert not (stopped / "result.json").exists()
    el.run_experiment(
        "tasks", model=smollm2, out=stopped, n=3, tokens=3, batch=1, folds=3, k=3, progress=False
    )
    same_files(whole, stopped)


def test_experiment_errors_are_python_exceptions(smollm2, tmp_path):
    with pytest.raises(ValueError, match="unknown experiment"):
        el.run_experiment("nonsense", model=smollm2, out=tmp_path / "x")
    with pytest.raises(ValueError, match="--n"):
        el.run_experiment("tasks", model=smollm2, out=tmp_path / "x", n="many")
    with pytest.raises(ValueError, match="result.json|no"):
        el.load_run(tmp_path)
    names = [e["name"] for e in el.experiments()]
    assert names == ["validate", "tasks", "formats", "mmlu", "skip", "family", "vit"]


def test_compare_runs_is_the_cli_comparison():
    """The committed tasks runs through the logit and the tuned lens: the same JSON as
    ``entropy-lens compare-runs A B --json``, computed by the library."""
    root = Path(__file__).resolve().parents[2] / "docs" / "results"
    a = root / "tasks-SmolLM2-135M-Instruct.Q4_1"
    b = root / "tasks-tuned-SmolLM2-135M-Instruct.Q4_1"
    got = el.compare_runs(a, b)
    assert got == json.loads(cli("compare-runs", str(a), str(b), "--json").stdout)
    paths = [s["path"] for s in got["scores"]]
    assert paths[0] == "knn" and "layer_subsets.last" in paths
    last = got["scores"][paths.index("layer_subsets.last")]
    assert last["mean_difference"] == 0.0 and last["p_value"] is None
    with pytest.raises(ValueError, match="not the same experiment"):
        el.compare_runs(a, root / "formats-SmolLM2-135M-Instruct.Q4_1")
