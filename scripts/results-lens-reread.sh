#!/usr/bin/env bash
# The runs behind docs/results-tuned-lens.md's re-read tables (issue 44, items 3 and 6): the paper's
# Tables 1-3 and 5 and Figure 1 (validate, tasks, formats at 256 tokens, with the results page's
# prompts, generations and folds) through the linear-shortcut lens of
# scripts/results-lens-convergence.sh (65,536 tokens in windows of 512, seed 42), and again through
# the logit lens, each with --kl: KL(final ‖ lens) and the calibration gap per block are measured on
# the tokens the tables are read on (result.json's lens_fit), not on held-out TinyStories text.
# The logit-lens runs repeat the results page's (the same result.json values, with lens_fit and
# c1_ties added). Run scripts/results-lens-convergence.sh first (STEPS='^shortcut' is enough).
# Resumable and timed as results.sh. Usage: scripts/results-lens-reread.sh [RUNS_DIR] (default
# runs/results); STEPS='formats' (an extended regex on the step names) runs a part.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/results}"
# shellcheck source=scripts/results-common.sh
. scripts/results-common.sh
DIR="$OUT/reread"
mkdir -p "$DIR"
lens_of() {
  local m
  m="$(basename "$1" .gguf)"
  local folder="$OUT/lens-convergence/shortcut-65536-$m"
  if [ ! -f "$folder/train_report.json" ]; then
    echo "no shortcut lens in $folder: run scripts/results-lens-convergence.sh first" >&2
    exit 1
  fi
  echo "tuned:$folder"
}
# The cheap experiments first (both lenses, both models), then the formats runs, the shortcut
# lens's before the logit lens's (whose tables the results page already has without KL).
for model in "$SMOL" "$GEMMA"; do
  m="$(basename "$model" .gguf)"
  for lens in shortcut logit; do
    flag=(--lens logit)
    [ "$lens" = shortcut ] && flag=(--lens "$(lens_of "$model")")
    run validate --model "$model" --scale paper --n 50 --kl "${flag[@]}" --out "$DIR/validate-$lens-$m"
    run tasks --model "$model" --scale paper --n 100 --data "$STORIES" --kl "${flag[@]}" \
      --out "$DIR/tasks-$lens-$m"
  done
done
for lens in shortcut logit; do
  for model in "$SMOL" "$GEMMA"; do
    m="$(basename "$model" .gguf)"
    flag=(--lens logit)
    [ "$lens" = shortcut ] && flag=(--lens "$(lens_of "$model")")
    run formats --model "$model" --scale paper --n 100 --tokens 256 --kl "${flag[@]}" \
      --out "$DIR/formats-256-$lens-$m"
  done
done
# The logit lens's KL and calibration gap on formats' own tokens at a quarter of the prompts (25 per
# format: the same first items and greedy generations as the runs above, no chat template): the full
# logit-lens runs cost as much as the shortcut's (Gemma: about 1 h 10 min on a quiet machine, as its
# 262,144-token lens product dominates), and their Table 3 is the results page's already. The page
# reads only lens_fit and prediction depth from these runs, never their AUCs (25 per class).
for model in "$SMOL" "$GEMMA"; do
  m="$(basename "$model" .gguf)"
  run formats --model "$model" --scale paper --n 25 --tokens 256 --kl --lens logit \
    --out "$DIR/formats-256-n25-logit-$m"
done
echo "==> wall time per step (seconds; $TIMES)"
grep -E -- '-(logit|shortcut)-' "$TIMES" || true
