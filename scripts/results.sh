#!/usr/bin/env bash
# The runs behind docs/results.md, on the two offline models, CPU. Resumable: rerun after a kill and
# it continues where it stopped. Usage: scripts/results.sh [RUNS_DIR] (default runs/results).
# Needs data/tinystories/valid.jsonl (or TINYSTORIES=path) and data/mmlu/test.jsonl
# (or MMLU=path). Each step's wall time is appended to RUNS_DIR/timings.tsv (step, seconds, when,
# done/failed/interrupted; a resumed step adds a line, so a step's time is the sum of its lines) and
# the script ends by printing the sums. RUNS_DIR/binaries.tsv records the commit and binary of each start.
# STEPS=<extended regex> runs only the steps whose name matches (e.g. STEPS='lens-|tuned-' for the
# tuned-lens part); the others are skipped, not timed.
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
# Which build ran which steps (a resumed run may continue with a newer one).
printf '%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  "$(git describe --always --dirty 2>/dev/null || echo unknown)" "$(sha256sum "$EL" | cut -c1-16)" >>"$OUT/binaries.tsv"
"$EL" fetch-models >/dev/null
M="${ENTROPY_LENS_MODELS:-$HOME/.cache/entropy-lens/models}"
SMOL="$M/SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA="$M/gemma-3-270m-q4_k_m.gguf"
TIMES="$OUT/timings.tsv"
# Runs "$@" and appends its wall time under the name $1, also when it fails or is interrupted
# (Ctrl-C, TERM); only a SIGKILL of the script loses the time of the step it was in. Started in the
# background (`&`, nohup), the script ignores SIGINT: stop it with `kill -TERM -<its process group>`.
timed() {
  local name="$1" t0 rc=0
  shift
  if [ -n "${STEPS:-}" ] && ! [[ "$name" =~ $STEPS ]]; then
    echo "==> skipping $name (STEPS=$STEPS)"
    return 0
  fi
  t0=$(date +%s)
  log_time() { printf '%s\t%s\t%s\t%s\n' "$name" "$(($(date +%s) - t0))" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$1" >>"$TIMES"; }
  trap 'log_time interrupted; exit 130' INT TERM
  echo "==> $name: ${*:2}"
  "$@" || rc=$?
  trap - INT TERM
  if [ "$rc" -eq 0 ]; then log_time done; else log_time "failed ($rc)"; fi
  return "$rc"
}
# One experiment, named by its output folder (the last argument).
run() {
  timed "$(basename "${*: -1}")" "$EL" experiment "$@"
}
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
echo "==> wall time per step (seconds, summed over resumes; $TIMES)"
awk -F'\t' '{ s[$1] += $2; if (!($1 in o)) o[$1] = n++ } END {
  for (k in o) order[o[k]] = k
  for (i = 0; i < n; i++) { printf "%-52s %8d\n", order[i], s[order[i]]; t += s[order[i]] }
  printf "%-52s %8d (%.2f h)\n", "total", t, t / 3600 }' "$TIMES"
