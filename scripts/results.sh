#!/usr/bin/env bash
# The runs behind docs/results.md (the paper's experiments at the paper's sizes), on the two offline
# models, CPU. Resumable: rerun after a kill and it continues where it stopped.
# Usage: scripts/results.sh [RUNS_DIR] (default runs/results).
# Needs data/tinystories/valid.jsonl (or TINYSTORIES=path) and data/mmlu/test.jsonl (or MMLU=path).
# Each step's wall time is appended to RUNS_DIR/timings.tsv (step, seconds, when,
# done/failed/interrupted; a resumed step adds a line, so a step's time is the sum of its lines) and
# the script ends by printing the sums. RUNS_DIR/binaries.tsv records the commit and binary of each start.
# STEPS=<extended regex> runs only the steps whose name matches (e.g. STEPS='gemma'); the others are
# skipped, not timed. The same tables through a tuned lens (docs/results-tuned-lens.md) are
# scripts/results-tuned-lens.sh, into the same RUNS_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/results}"
# shellcheck source=scripts/results-common.sh
. scripts/results-common.sh
for model in "$SMOL" "$GEMMA"; do
  name="$(basename "$model" .gguf)"
  run validate --model "$model" --scale paper --n 50 --out "$OUT/validate-$name"
  run tasks --model "$model" --scale paper --n 100 --data "$STORIES" --out "$OUT/tasks-$name"
done
# The same task prompts wrapped in each model's chat template (not the paper's protocol).
for model in "$SMOL" "$GEMMA"; do
  name="$(basename "$model" .gguf)"
  run tasks --model "$model" --scale paper --n 100 --data "$STORIES" --chat --out "$OUT/tasks-chat-$name"
done
# Table 5 as the paper ran it (A.3): the same prompts, sampled (temperature 1, seed 42) instead of greedy.
for model in "$SMOL" "$GEMMA"; do
  name="$(basename "$model" .gguf)"
  run tasks --model "$model" --scale paper --n 100 --data "$STORIES" --temperature 1 --out "$OUT/tasks-sampled-$name"
done
# The paper's 256 tokens, 8 windows of 32; the three Rényi orders from the same generation.
# (Folders named by the token count: a RUNS_DIR holding the earlier 64-token runs resumes.)
run formats --model "$SMOL" --scale paper --n 100 --tokens 256 --out "$OUT/formats-256-$(basename "$SMOL" .gguf)"
run formats --model "$GEMMA" --scale paper --n 100 --tokens 256 --out "$OUT/formats-256-$(basename "$GEMMA" .gguf)"
# MMLU (Table 4, Figure 6): 150 questions of the test split (seeded, subject-stratified) in the three
# styles; skipping on 60 questions (Base style). Needs data/mmlu/test.jsonl (or MMLU=path).
for model in "$SMOL" "$GEMMA"; do
  name="$(basename "$model" .gguf)"
  run mmlu --model "$model" --scale paper --n 150 --data "$MMLU" --out "$OUT/mmlu-$name"
  run skip --model "$model" --scale paper --n 60 --data "$MMLU" --out "$OUT/skip-$name"
done
# Model families (Table 6, Figures 3-4) on the two offline models: 64 samples × 32 tokens at T = 0.7.
run family --scale paper --out "$OUT/family"
print_timings paper
