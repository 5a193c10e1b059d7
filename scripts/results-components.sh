#!/usr/bin/env bash
# The block's components through the lens on docs/results-tuned-lens.md (issue 44, item 5): what each
# block's attention and MLP write to the residual stream, decoded by the logit lens beside the residual
# after the block (`profile --read-point components`), with KL to the model's final distribution, at the
# last position of 20 prompts (the first sentence of TinyStories validation stories 281-300, which neither
# the task prompts, 1-100, nor the lenses' text, 301-1000, use). A tuned or shortcut lens has translators
# for the residual only and is refused at these read points. Seconds per model; writes
# docs/results/components/<model>.jsonl (one profile per prompt, no top-k lists) and the prompts file.
# Usage: scripts/results-components.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=docs/results/components
mkdir -p "$OUT"
EL="${ENTROPY_LENS_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/entropy-lens/target}/release/entropy-lens}"
[ -n "${ENTROPY_LENS_BIN:-}" ] || cargo build --release --quiet
python3 - data/tinystories/valid.jsonl "$OUT/prompts.jsonl" <<'PY'
import json, sys
stories = [json.loads(line)["text"] for line in open(sys.argv[1])]
with open(sys.argv[2], "w") as f:
    for text in stories[280:300]:
        f.write(json.dumps({"prompt": text.strip().split("\n")[0][:240]}) + "\n")
PY
for model in smollm2 gemma3-270m; do
  name="$("$EL" profile --model "$model" --prompt x --json | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["model"])')"
  "$EL" profile --model "$model" --prompts "$OUT/prompts.jsonl" --read-point components --kl --top-k 0 --json \
    >"$OUT/$name.jsonl"
  echo "wrote $OUT/$name.jsonl"
done
