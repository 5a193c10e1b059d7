#!/usr/bin/env bash
# Copies what docs/results-tuned-lens.md's lens study reads from a RUNS_DIR into docs/results/: for
# every lens of lens-convergence/ its config.json, train_report.json, train_state.json (KL training's
# per-step losses) and the sha256 of params.pt (the lenses are 40-80 MB, too large to commit); for
# every run of reread/ its config.json and result.json; the compare/ JSON of both
# (scripts/results-lens-compare.sh); and the steps' lines of timings.tsv and binaries.tsv.
# Usage: scripts/results-lens-collect.sh [RUNS_DIR] (default runs/results).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/results}"
DOCS=docs/results
for part in lens-convergence reread; do
  [ -d "$OUT/$part" ] || continue
  mkdir -p "$DOCS/$part"
  for dir in "$OUT/$part"/*/; do
    name="$(basename "$dir")"
    dest="$DOCS/$part/$name"
    if [ "$name" = compare ]; then
      mkdir -p "$dest"
      for f in "$dir"/*.json; do [ -f "$f" ] && cp "$f" "$dest/"; done
      continue
    fi
    # Finished runs only: a lens with its report, a run with its result.
    [ -f "$dir/train_report.json" ] || [ -f "$dir/result.json" ] || continue
    mkdir -p "$dest"
    for f in config.json train_report.json train_state.json result.json; do
      [ -f "$dir/$f" ] && cp "$dir/$f" "$dest/"
    done
    [ -f "$dir/params.pt" ] && (cd "$dir" && sha256sum params.pt) >"$dest/params.pt.sha256"
  done
done
# The study's steps of timings.tsv (its names: shortcut-, kl-, and the re-read runs').
grep -E '^(shortcut|kl)-|-(logit|shortcut|indomain)-' "$OUT/timings.tsv" >"$DOCS/lens-study-timings.tsv" || true
cp "$OUT/binaries.tsv" "$DOCS/lens-study-binaries.tsv"
echo "copied into $DOCS: lens-convergence/, reread/, lens-study-timings.tsv, lens-study-binaries.tsv"
