#!/usr/bin/env bash
# The runs behind docs/results-tuned-lens.md's "Lens methods" section: for each offline model, the
# linear-shortcut lens (closed form, train-lens --method shortcut) and KL training warm-started from it
# (--init shortcut), on the same text as results-tuned-lens.sh's lenses (TinyStories stories 301-1000,
# the last 2,048 tokens held out), so that their train_report.json compare with that script's
# KL-from-zero lenses. Resumable and timed as results.sh. Usage: scripts/results-lens-methods.sh [RUNS_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/results}"
# shellcheck source=scripts/results-common.sh
. scripts/results-common.sh
SHORTCUT="$OUT/lenses-shortcut"
WARM="$OUT/lenses-kl-from-shortcut"
for model in "$SMOL" "$GEMMA"; do
  name="$(basename "$model" .gguf)"
  [ -f "$SHORTCUT/$name/train_report.json" ] ||
    timed "lens-shortcut-$name" "$EL" train-lens --model "$model" --data "$STORIES" --skip-records 300 \
      --method shortcut --out "$SHORTCUT/$name"
done
# KL training from the shortcut at a quarter of the KL-from-zero lenses' tokens (SmolLM2: 16,384 of
# 65,536; Gemma: 4,096 of 16,384, in Gemma's steps of 512).
[ -f "$WARM/$(basename "$SMOL" .gguf)/train_report.json" ] ||
  timed "lens-kl-from-shortcut-$(basename "$SMOL" .gguf)" "$EL" train-lens --model "$SMOL" --data "$STORIES" \
    --skip-records 300 --init shortcut --tokens 16384 --out "$WARM/$(basename "$SMOL" .gguf)"
[ -f "$WARM/$(basename "$GEMMA" .gguf)/train_report.json" ] ||
  timed "lens-kl-from-shortcut-$(basename "$GEMMA" .gguf)" "$EL" train-lens --model "$GEMMA" --data "$STORIES" \
    --skip-records 300 --init shortcut --tokens 4096 --step-tokens 512 --out "$WARM/$(basename "$GEMMA" .gguf)"
print_timings tuned-lens
