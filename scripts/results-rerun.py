#!/usr/bin/env python3
"""Check a second run of scripts/results.sh (and scripts/results-tuned-lens.sh) against the committed results,
byte for byte, and keep its timings.

    python3 scripts/results-rerun.py RUNS_DIR OUT_DIR [--page docs/results]

RUNS_DIR is the folder a later `scripts/results.sh RUNS_DIR` (and/or `scripts/results-tuned-lens.sh RUNS_DIR`) wrote
(on another machine or build). For every step
RUNS_DIR/timings.tsv records as done, every file the page commits for that step (`docs/results/<step>/*`; for
`lens-<model>`, `docs/results/lenses/<model>/*`, the lens weights by their `params.pt.sha256`) is compared with
the file the rerun wrote (the profiles and records a run also writes are not on the page). OUT_DIR receives the rerun's timings.tsv and binaries.tsv and `identical.tsv`: one line
per finished step (step, files compared, files identical, the files that differ and how: for a JSON file, how
many values moved, by how much, and whether any headline value outside the lists moved). Exits 1 if any file differs
or is missing, so a rerun that does not reproduce the page cannot be filed as one that does.
Standard library only.
"""
import argparse
import hashlib
import importlib.util
import json
import pathlib
import shutil
import sys

_spec = importlib.util.spec_from_file_location("results_diff", pathlib.Path(__file__).with_name("results-diff.py"))
results_diff = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(results_diff)


def finished_steps(timings):
    """Steps with a `done` line, in the order the script ran them (a resumed step is listed once)."""
    steps = []
    for line in timings.read_text().splitlines():
        step, _, _, status = (line.split("\t") + ["", "", ""])[:4]
        if status.startswith("done") and step not in steps:
            steps.append(step)
    return steps


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def how_json_moved(old, new):
    """How two JSON files differ: values moved, the largest change, whether a headline value (outside lists) moved."""
    a = dict(results_diff.leaves(json.loads(old.read_text())))
    b = dict(results_diff.leaves(json.loads(new.read_text())))
    changed = [p for p in set(a) | set(b) if a.get(p) != b.get(p)]
    numeric = [abs(a[p] - b[p]) for p in changed if p in a and p in b and results_diff.number(a[p]) and results_diff.number(b[p])]
    headline = [p for p in changed if "[" not in p]
    text = f"{len(changed)} of {len(a)} values moved"
    if numeric:
        text += f", by at most {max(numeric):.2g}"
    text += f"; headline values (outside lists) {'moved: ' + ', '.join(sorted(headline)) if headline else 'identical'}"
    return text


def compare_step(page, runs, step):
    """(files compared, [files that differ or are missing, and how]) for one step."""
    if step.startswith("lens-"):
        rel = pathlib.Path("lenses") / step[len("lens-"):]
    else:
        rel = pathlib.Path(step)
    committed = page / rel
    if not committed.is_dir():
        return 0, [f"{rel}/ (not on the page)"]
    compared, differ = 0, []
    for old in sorted(committed.iterdir()):
        if old.name == "package_check.txt":
            continue  # written by scripts/tuned-lens-check.py, not by results.sh
        compared += 1
        if old.name.endswith(".sha256"):
            new = runs / rel / old.name[: -len(".sha256")]
            same = new.is_file() and old.read_text().split()[0] == sha256(new)
        else:
            new = runs / rel / old.name
            same = new.is_file() and new.read_bytes() == old.read_bytes()
        if not same:
            how = "missing" if not new.is_file() else "differs"
            if new.is_file() and old.suffix == ".json":
                how = how_json_moved(old, new)
            differ.append(f"{rel}/{old.name} ({how})")
    if compared == 0:
        differ.append(f"{rel}/ (nothing committed to compare)")
    return compared, differ


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", type=pathlib.Path)
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--page", type=pathlib.Path, default=pathlib.Path("docs/results"))
    a = ap.parse_args()
    timings = a.runs / "timings.tsv"
    if not timings.is_file():
        sys.exit(f"{timings} not found: give the RUNS_DIR that scripts/results.sh or scripts/results-tuned-lens.sh wrote")
    a.out.mkdir(parents=True, exist_ok=True)
    rows, bad = [], 0
    for step in finished_steps(timings):
        compared, differ = compare_step(a.page, a.runs, step)
        bad += bool(differ)
        rows.append(f"{step}\t{compared}\t{compared - len(differ)}\t{'; '.join(differ)}\n")
        print(f"{step}: {compared - len(differ)} of {compared} files identical" + (f"; differ: {differ}" if differ else ""))
    (a.out / "identical.tsv").write_text("".join(rows))
    for name in ("timings.tsv", "binaries.tsv"):
        if (a.runs / name).is_file():
            shutil.copyfile(a.runs / name, a.out / name)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
