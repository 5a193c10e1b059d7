#!/usr/bin/env bash
# The paired comparisons behind docs/results-tuned-lens.md (entropy-lens compare-runs, no model
# run: seconds), from the folders of scripts/results-lens-convergence.sh and
# scripts/results-lens-reread.sh, as JSON:
#   lens-convergence/compare/<lens>.json: every lens against the 65,536-token shortcut lens of its
#     model (an in-domain lens against the 30,720-token in-domain one), window by window on the held-out windows (each lens's mean KL over blocks 1..L-1 and the
#     difference, with 95 % bootstrap intervals);
#   reread/compare/<experiment>-<model>.json: the shortcut-lens run against the logit-lens run of
#     the same experiment, fold by fold (and prompt by prompt for validate's C1); and
#     validate-indomain-<model>.json, the in-domain lens's validate run against the logit lens's.
# Usage: scripts/results-lens-compare.sh [RUNS_DIR] (default runs/results); ENTROPY_LENS_BIN as
# the other results scripts.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/results}"
EL="${ENTROPY_LENS_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/entropy-lens/target}/release/entropy-lens}"
[ -n "${ENTROPY_LENS_BIN:-}" ] || cargo build --release --quiet
C="$OUT/lens-convergence"
if [ -d "$C" ]; then
  mkdir -p "$C/compare"
  for dir in "$C"/*/; do
    name="$(basename "$dir")"
    [ -f "$dir/train_report.json" ] || continue
    model=""
    for m in SmolLM2-135M-Instruct.Q4_1 gemma-3-270m-q4_k_m; do
      case "$name" in *"-$m") model="$m" ;; esac
    done
    ref="$C/shortcut-65536-$model"
    # The in-domain lenses (scripts/results-lens-indomain.sh) have their own held-out windows.
    case "$name" in shortcut-formats-*) ref="$C/shortcut-formats-30720-$model" ;; esac
    [ "$dir" = "$ref/" ] && continue
    [ -f "$ref/train_report.json" ] || continue
    "$EL" compare-runs "$ref" "$dir" --json >"$C/compare/$name.json"
    echo "wrote $C/compare/$name.json"
  done
fi
R="$OUT/reread"
if [ -d "$R" ]; then
  mkdir -p "$R/compare"
  for dir in "$R"/*-shortcut-*/ "$R"/*-indomain-*/; do
    [ -d "$dir" ] || continue
    name="$(basename "$dir")"
    # validate-shortcut-M → validate-M.json; validate-indomain-M → validate-indomain-M.json.
    logit="$R/${name/-shortcut-/-logit-}"
    logit="${logit/-indomain-/-logit-}"
    dest="$R/compare/${name/-shortcut-/-}.json"
    # formats through the logit lens with --kl is not run yet (docs/results-tuned-lens.md): its
    # committed run without --kl (docs/results/formats-256-M, the same items, generations and folds)
    # is the twin; compare-runs pairs runs that differ only in --lens and --kl.
    if [ ! -f "$logit/result.json" ] && [[ "$name" == formats-256-shortcut-* ]]; then
      logit="docs/results/${name/-shortcut-/-}"
    fi
    [ -f "$dir/result.json" ] && [ -f "$logit/result.json" ] || continue
    "$EL" compare-runs "$logit" "$dir" --json >"$dest"
    echo "wrote $dest"
  done
fi
