#!/usr/bin/env bash
# The Python door, as a user meets it: builds the wheel, installs it into a fresh venv, and runs it
# on a PATH without cargo or rustc (the command, `import entropy_lens`, the explorer answering
# HTTP), then the pytest suite (python/tests) with numpy, pandas, plotly and pytest from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/entropy-lens/target}"
WHEEL="$(./scripts/build-wheel.sh | tail -1)"
echo "    wheel: $WHEEL ($(du -h "$WHEEL" | cut -f1))"
VENV="$(mktemp -d)/venv"
python3 -m venv "$VENV"
timeout 900 "$VENV/bin/pip" install -q "$WHEEL" -r scripts/requirements-python.txt
# No Rust toolchain on this PATH: the wheel must carry everything.
CLEAN_PATH="$VENV/bin:/usr/local/bin:/usr/bin:/bin"
run() { env -i HOME="$HOME" PATH="$CLEAN_PATH" LANG=C.UTF-8 "$@"; }
run sh -c '! command -v cargo && ! command -v rustc' >/dev/null
run entropy-lens --help >/dev/null
run entropy-lens profile --model smollm2 --prompt "The sea is" --generate 2 --json \
  | run python -c "import json,sys; p=json.loads(sys.stdin.readline()); assert len(p['positions'])==2"
run python -c "import entropy_lens as el; p = el.Profiler.load('smollm2').profile('Hi'); assert p.shannon.shape == (1, 30)"
# The explorer from the wheel: HTTP 200 on its page, then it stops on SIGINT.
PORT=$(( 20000 + RANDOM % 20000 ))
LOG="$(mktemp)"
# env itself, not a function's subshell, so that $! is the explorer's own process.
env -i HOME="$HOME" PATH="$CLEAN_PATH" LANG=C.UTF-8 entropy-lens explore --model smollm2 --port "$PORT" >"$LOG" 2>&1 &
EXPLORER=$!
ok=0
for _ in $(seq 1 120); do
  if run python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$PORT/', timeout=2).status == 200 else 1)" 2>/dev/null; then
    ok=1; break
  fi
  sleep 0.5
done
kill -INT "$EXPLORER" 2>/dev/null || true
timeout 30 tail --pid="$EXPLORER" -f /dev/null || { kill -9 "$EXPLORER" 2>/dev/null; echo "explorer did not stop on SIGINT"; exit 1; }
[ "$ok" = 1 ] || { cat "$LOG"; echo "explorer from the wheel never answered HTTP 200"; exit 1; }
echo "    ok: entropy-lens --help, profile, import entropy_lens, explore (HTTP 200) without cargo"
( cd python && run "$VENV/bin/pytest" -q tests )
rm -rf "$(dirname "$VENV")" "$LOG"
