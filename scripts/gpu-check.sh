#!/usr/bin/env bash
# Runs the CUDA device benchmark on a GPU machine (built elsewhere with scripts/build-cuda.sh).
# Usage: scripts/gpu-check.sh DIR   where DIR holds device-bench(.xz) and tokenizer.json.
# Finds the CUDA 13 user-space libraries (a PyTorch venv's nvidia wheels or a toolkit install).
set -uo pipefail
DIR="${1:-.device}"
BIN="$DIR/device-bench"
if [ ! -f "$BIN" ] && [ -f "$BIN.xz" ]; then
  BIN="$(mktemp -d)/device-bench"
  xz -dc "$DIR/device-bench.xz" > "$BIN" 2>/dev/null \
    || python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' "$DIR/device-bench.xz" "$BIN"
fi
chmod +x "$BIN"
dirs=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13; do
  f="$(find -L /opt /usr/local/cuda* /usr/lib/x86_64-linux-gnu -name "$lib" 2>/dev/null | grep -v stubs | head -n1)"
  [ -n "$f" ] && dirs="$dirs:$(dirname "$f")" || echo "gpu-check: $lib not found" >&2
done
export LD_LIBRARY_PATH="${dirs#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
ldd "$BIN" | grep -E "not found|cuda|cublas" | sed 's/^/ldd: /'
"$BIN" --device cuda --tokenizer "$DIR/tokenizer.json" "${@:2}"
