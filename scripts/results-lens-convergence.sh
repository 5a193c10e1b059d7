#!/usr/bin/env bash
# The runs behind docs/results-tuned-lens.md's "Convergence" section (issue 44, item 2): for each
# offline model, held-out KL per layer against the training budget, for the two lens methods that
# finish on a CPU:
#   - the linear-shortcut lens (closed form) on 4,096, 16,384 and 65,536 tokens, and on 65,536
#     tokens of other windows (seed 7: the text gives about 120k training tokens in windows of 512,
#     so the two 65,536-token fits share about half of their windows);
#   - KL training warm-started from the 65,536-token shortcut lens (--init lens:DIR), with the number
#     of steps and the tokens per step varied separately, and a second seed at the largest budget.
# Every lens reads windows of 512 tokens: the experiments read positions up to about 300 (formats:
# the prompt and 256 generated tokens), and a lens fitted on the package's 128-token windows would
# never have seen a position past 127. 8,192 tokens are held out (16 windows of 512, the unit of the
# bootstrap intervals in train_report.json). Text: TinyStories validation stories 301-1000, as the
# page's other lenses. Resumable (a finished lens is skipped, an interrupted KL training resumes)
# and timed as results.sh. Usage: scripts/results-lens-convergence.sh [RUNS_DIR] (default
# runs/results); STEPS='shortcut' limits it to the steps whose name matches.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/results}"
# shellcheck source=scripts/results-common.sh
. scripts/results-common.sh
DIR="$OUT/lens-convergence"
mkdir -p "$DIR"
COMMON=(--data "$STORIES" --skip-records 300 --seq-len 512 --holdout-tokens 8192)
# lens NAME MODEL ARGS…: trains one lens into $DIR/NAME unless its report is there.
lens() {
  local name="$1" model="$2"
  shift 2
  [ -f "$DIR/$name/train_report.json" ] ||
    timed "$name" "$EL" train-lens --model "$model" "${COMMON[@]}" "$@" --out "$DIR/$name"
}
for model in "$SMOL" "$GEMMA"; do
  m="$(basename "$model" .gguf)"
  for tokens in 4096 16384 65536; do
    lens "shortcut-$tokens-$m" "$model" --method shortcut --tokens "$tokens"
  done
  lens "shortcut-65536-seed7-$m" "$model" --method shortcut --tokens 65536 --seed 7
done
# KL training warm-started from the 65,536-token shortcut lens (--init lens:DIR), so that every
# budget starts from the same lens and the curve shows what the KL steps add to it. The package's
# rate (lr-scale 1) diverged from Gemma's shortcut (docs/results-tuned-lens.md, "Lens methods"); a
# tenth of it is used for both models. Budgets: steps × tokens per step, in whole 512-token windows.
#   SmolLM2: 2, 4 and 8 steps of 1,024; 4 steps of 512 (the batch halved at 4 steps); 8 steps of
#   1,024, seed 7; then 32 steps of 1,024, to see whether the curve flattens. About 25 ms of the two
#   cores per training token (the lens product forward and backward at every block) and 2.5 minutes
#   per evaluation: about 40 minutes in all.
#   Gemma: 2, 4 and 8 steps of 512; 4 steps of 1,024; 8 steps of 512, seed 7. Each training token
#   costs about four times SmolLM2's and each evaluation about 6 minutes: 8-15 minutes per run, 63
#   minutes for the five on 2026-12-07 (beside other work).
kl() {
  local name="$1" model="$2" steps="$3" per_step="$4"
  shift 4
  local m
  m="$(basename "$model" .gguf)"
  lens "$name-$m" "$model" --init "lens:$DIR/shortcut-65536-$m" --lr-scale "${LR_SCALE:-0.1}" \
    --tokens $((steps * per_step)) --step-tokens "$per_step" "$@"
}
kl kl-2x1024 "$SMOL" 2 1024
kl kl-4x1024 "$SMOL" 4 1024
kl kl-8x1024 "$SMOL" 8 1024
kl kl-4x512 "$SMOL" 4 512
kl kl-8x1024-seed7 "$SMOL" 8 1024 --seed 7
kl kl-32x1024 "$SMOL" 32 1024
# Gemma's in the order that answers most if the grid is cut short: steps (2 → 4), then the batch at
# 4 steps (512 → 1,024), then steps again (8) and the second seed.
kl kl-2x512 "$GEMMA" 2 512
kl kl-4x512 "$GEMMA" 4 512
kl kl-4x1024 "$GEMMA" 4 1024
kl kl-8x512 "$GEMMA" 8 512
kl kl-8x512-seed7 "$GEMMA" 8 512 --seed 7
echo "==> wall time per step (seconds; $TIMES)"
grep -E '^(shortcut|kl)-' "$TIMES" || true
