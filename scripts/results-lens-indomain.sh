#!/usr/bin/env bash
# The in-domain lens of docs/results-tuned-lens.md: a linear-shortcut lens fitted on the model's own
# topic-format prompts and generations (the records of scripts/results-lens-reread.sh's formats run,
# as the model read them: no chat template, as in that run) for topics 51-100 (records 151-300),
# which validate never prompts with (it reads topics 1-50), then validate (Table 1, Figure 1) read
# through it with --kl, so that its fit and the calibration gap are measured on validate's own
# tokens. Windows of 512 tokens, 8,192 held out (the end of the records), 30,720 fitted (60
# windows: the 150 records give 61 after the held-out ones; and a quarter of it, 7,680, for the 1/N
# check of how far the fit has converged).
# Run scripts/results-lens-reread.sh first (its formats-256-shortcut runs). Resumable and timed as
# results.sh. Usage: scripts/results-lens-indomain.sh [RUNS_DIR] (default runs/results).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-runs/results}"
# shellcheck source=scripts/results-common.sh
. scripts/results-common.sh
for model in "$SMOL" "$GEMMA"; do
  m="$(basename "$model" .gguf)"
  records="$OUT/reread/formats-256-shortcut-$m"
  if [ ! -f "$records/records.jsonl" ]; then
    echo "no formats records in $records: run scripts/results-lens-reread.sh first" >&2
    exit 1
  fi
  # Two budgets on the same held-out windows, for the 1/N check of the study's other lenses.
  for tokens in 7680 30720; do
    lens="$OUT/lens-convergence/shortcut-formats-$tokens-$m"
    [ -f "$lens/train_report.json" ] ||
      timed "shortcut-formats-$tokens-$m" "$EL" train-lens --model "$model" --method shortcut \
        --data "$records" --skip-records 150 --seq-len 512 --holdout-tokens 8192 --tokens "$tokens" \
        --out "$lens"
  done
  run validate --model "$model" --scale paper --n 50 --kl \
    --lens "tuned:$OUT/lens-convergence/shortcut-formats-30720-$m" \
    --out "$OUT/reread/validate-indomain-$m"
done
echo "==> wall time per step (seconds; $TIMES)"
grep -E -- '-formats-|-indomain-' "$TIMES" || true
