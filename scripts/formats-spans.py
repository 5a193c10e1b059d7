#!/usr/bin/env python3
"""Where in a `formats` run's generations the format signal lies: the kNN ROC-AUC (entropy-lens
classify: k = 29, stratified 10-fold, seed 42, Shannon entropy) of 8 equal windows over spans of
the generated tokens, and how repetitive the generations are in their first and last 64 tokens.

    python3 scripts/formats-spans.py RUN_DIR [--entropy-lens PATH]

RUN_DIR is an `entropy-lens experiment formats` output folder (it reads records.jsonl). The span
covering every token reproduces the run's own α = 1 row; needs numpy.
"""

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

WINDOWS = 8


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path)
    ap.add_argument("--entropy-lens", default="entropy-lens")
    args = ap.parse_args()
    entropies, labels, generated = [], [], []
    with open(args.run / "records.jsonl", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            entropies.append([p["shannon"] for p in r["profile"]["positions"]])
            labels.append(r["label"])
            generated.append(r["profile"]["generated_ids"])
    h = np.array(entropies)  # [prompts, tokens, blocks]
    n, t, blocks = h.shape
    spans = [(0, t)] + [(a, a + 64) for a in range(0, t, 64) if a + 64 <= t and t > 64]
    if t >= 128:
        spans.insert(1, (0, 128))
    print(f"{args.run.name}: {n} prompts × {t} tokens × {blocks} blocks\n")
    print("| generated tokens | windows | kNN ROC-AUC (%) | dummy (%) |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "labels.txt").write_text("\n".join(labels) + "\n", encoding="utf-8")
        for a, b in spans:
            x = h[:, a:b, :].reshape(n, WINDOWS, (b - a) // WINDOWS, blocks).mean(axis=2)
            np.save(Path(tmp) / "x.npy", x.reshape(n, -1))
            out = subprocess.run([args.entropy_lens, "classify", "--features", f"{tmp}/x.npy",
                                  "--labels", f"{tmp}/labels.txt", "--json"],
                                 check=True, capture_output=True, text=True).stdout
            j = json.loads(out)
            print(f"| {a + 1}-{b} | {WINDOWS} of {(b - a) // WINDOWS} | "
                  f"{100 * j['auc_mean']:.2f} ± {100 * j['auc_std']:.2f} | "
                  f"{100 * j['baseline_auc_mean']:.2f} ± {100 * j['baseline_auc_std']:.2f} |")
    print("\n| format | distinct tokens among the first 64 (mean share) | among the last 64 | "
          "generations with < 25 % distinct in their last 64 |")
    print("|---|---|---|---|")
    for label in sorted(set(labels)):
        gs = [g for g, lab in zip(generated, labels) if lab == label]
        first = np.mean([len(set(g[:64])) / 64 for g in gs])
        last = np.array([len(set(g[-64:])) / 64 for g in gs])
        print(f"| {label} | {first:.2f} | {last.mean():.2f} | {100 * (last < 0.25).mean():.0f} % |")


if __name__ == "__main__":
    main()
