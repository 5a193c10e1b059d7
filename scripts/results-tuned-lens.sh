#!/usr/bin/env bash
# The runs behind docs/results-tuned-lens.md: the paper's Tables 1-3 and 5 read through a tuned lens
# trained for each offline model (not the paper's protocol), CPU. Resumable, as scripts/results.sh,
# whose RUNS_DIR it shares (the page compares with that script's logit-lens runs; this one does not
# need them to run). Usage: scripts/results-tuned-lens.sh [RUNS_DIR] (default runs/results).
# Needs data/tinystories/valid.jsonl (or TINYSTORIES=path). Timings, binaries and STEPS as results.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/results}"
# shellcheck source=scripts/results-common.sh
. scripts/results-common.sh
# A lens per model trained on TinyStories stories 301-1000 (the task prompts use the first 100), then
# Tables 1-3 read through it. Gemma's budget is a quarter of SmolLM2's: its 262k-token vocabulary makes
# each token ~4x dearer.
LENSES="$OUT/lenses"
timed "lens-$(basename "$SMOL" .gguf)" "$EL" train-lens --model "$SMOL" --data "$STORIES" --skip-records 300 \
  --out "$LENSES/$(basename "$SMOL" .gguf)"
timed "lens-$(basename "$GEMMA" .gguf)" "$EL" train-lens --model "$GEMMA" --data "$STORIES" --skip-records 300 \
  --tokens 16384 --step-tokens 512 --out "$LENSES/$(basename "$GEMMA" .gguf)"
for model in "$SMOL" "$GEMMA"; do
  name="$(basename "$model" .gguf)"
  lens="tuned:$LENSES/$name"
  run validate --model "$model" --scale paper --n 50 --lens "$lens" --out "$OUT/validate-tuned-$name"
  run tasks --model "$model" --scale paper --n 100 --data "$STORIES" --lens "$lens" --out "$OUT/tasks-tuned-$name"
  run formats --model "$model" --scale paper --n 100 --tokens 256 --lens "$lens" --out "$OUT/formats-256-tuned-$name"
done
print_timings tuned-lens
