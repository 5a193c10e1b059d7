#!/usr/bin/env bash
# The runs behind docs/results.md, on the two offline models, CPU. Resumable: rerun after a kill and
# it continues where it stopped. Usage: scripts/results.sh [RUNS_DIR] (default runs/results).
# Needs data/tinystories/valid.jsonl (or TINYSTORIES=path) and data/mmlu/test.jsonl
# (or MMLU=path). About 5.5 h on a 2-core CPU, plus about 3.7 h for the tuned-lens runs at the end (see docs/results.md).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/results}"
STORIES="${TINYSTORIES:-data/tinystories/valid.jsonl}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/entropy-lens/target}"
cargo build --release --quiet
# A copy, so that rebuilding during the hours this takes does not change the binary mid-way.
EL="$OUT/.entropy-lens"
mkdir -p "$OUT"
cp "$CARGO_TARGET_DIR/release/entropy-lens" "$EL"
"$EL" fetch-models >/dev/null
M="${ENTROPY_LENS_MODELS:-$HOME/.cache/entropy-lens/models}"
SMOL="$M/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA="$M/gemma-3-270m-q4_k_m.gguf"
run() { echo "==> entropy-lens experiment $*"; "$EL" experiment "$@"; }
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
# 64 tokens instead of the paper's 256, to fit a 2-core CPU: the three Rényi orders cost three passes
# over the vocabulary per block and token (Gemma's vocabulary is 262k tokens). 8 windows of 8 tokens.
run formats --model "$SMOL" --scale paper --n 100 --tokens 64 --out "$OUT/formats-$(basename "$SMOL" .gguf)"
run formats --model "$GEMMA" --scale paper --n 100 --tokens 64 --out "$OUT/formats-$(basename "$GEMMA" .gguf)"
# MMLU (Table 4, Figure 6): 150 questions of the test split (seeded, subject-stratified) in the three
# styles; skipping on 60 questions (Base style). Needs data/mmlu/test.jsonl (or MMLU=path).
MMLU="${MMLU:-data/mmlu/test.jsonl}"
for model in "$SMOL" "$GEMMA"; do
  name="$(basename "$model" .gguf)"
  run mmlu --model "$model" --scale paper --n 150 --data "$MMLU" --out "$OUT/mmlu-$name"
  run skip --model "$model" --scale paper --n 60 --data "$MMLU" --out "$OUT/skip-$name"
done
# Model families (Table 6, Figures 3-4) on the two offline models: 64 samples × 32 tokens at T = 0.7.
run family --scale paper --out "$OUT/family"
# The paper under a tuned lens (docs/results.md "The paper under a tuned lens"): a lens per model trained on
# TinyStories stories 301-1000 (the task prompts use the first 100), then Tables 1-3 read through it.
# Gemma's budget is a quarter of SmolLM2's: its 262k-token vocabulary makes each token ~4x dearer.
LENSES="$OUT/lenses"
"$EL" train-lens --model "$SMOL" --data "$STORIES" --skip-records 300 --out "$LENSES/$(basename "$SMOL" .gguf)"
"$EL" train-lens --model "$GEMMA" --data "$STORIES" --skip-records 300 --tokens 16384 --step-tokens 512 \
  --out "$LENSES/$(basename "$GEMMA" .gguf)"
for model in "$SMOL" "$GEMMA"; do
  name="$(basename "$model" .gguf)"
  lens="tuned:$LENSES/$name"
  run validate --model "$model" --scale paper --n 50 --lens "$lens" --out "$OUT/validate-tuned-$name"
  run tasks --model "$model" --scale paper --n 100 --data "$STORIES" --lens "$lens" --out "$OUT/tasks-tuned-$name"
  run formats --model "$model" --scale paper --n 100 --tokens 64 --lens "$lens" --out "$OUT/formats-tuned-$name"
done
