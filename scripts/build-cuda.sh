#!/usr/bin/env bash
# Build entropy-lens with CUDA on a machine without a GPU (CUDA 13.0 toolchain from PyPI wheels),
# for sm_90 (H100/H200). Usage: scripts/build-cuda.sh [cargo args...]
#   default args: build --release --features cuda
# The first build compiles candle's CUDA kernels (23 min on 2 cores on 2026-12-05, beside other work;
# 30-45 min measured earlier); the toolchain and the
# target dir live under ~/.cache/entropy-lens so later builds take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK="${ENTROPY_LENS_CUDA_WORK:-$HOME/.cache/entropy-lens/cuda}"
mkdir -p "$WORK"
PY="${PYTHON:-python3}"
[ -x "$WORK/venv/bin/pip" ] || "$PY" -m venv "$WORK/venv"
if [ ! -f "$WORK/.toolchain-ok" ]; then
  # nvcc's own dependencies (crt, nvvm) pinned to 13.0 as well, or pip mixes in newer ones.
  "$WORK/venv/bin/pip" install -q \
    nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 \
    nvidia-cuda-runtime==13.0.96 nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-cccl==13.0.85 \
    nvidia-cublas==13.1.0.3 nvidia-curand==10.4.0.35
  touch "$WORK/.toolchain-ok"
fi
CUDA_ROOT="$("$WORK/venv/bin/python" -c 'import os,nvidia; print(os.path.join(list(nvidia.__path__)[0],"cu13"))')"
( cd "$CUDA_ROOT/lib"
  for l in cudart cublas cublasLt nvrtc; do ln -sf "lib$l.so.13" "lib$l.so"; done
  ln -sf libcurand.so.10 libcurand.so )
# No driver here: link against a stub libcuda.so (soname libcuda.so.1) exporting the driver API names.
mkdir -p "$CUDA_ROOT/lib/stubs"
if [ ! -f "$CUDA_ROOT/lib/stubs/libcuda.so" ]; then
  cargo fetch -q
  CUDARC="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/cudarc-0.19.* | sort | tail -n1)"
  grep -ohE 'pub unsafe fn cu[A-Za-z0-9_]+' "$CUDARC"/src/driver/sys/*.rs | awk '{print $4}' | sort -u \
    | awk '{print "int "$1"(void){return 999;}"}' > "$WORK/libcuda_stub.c"
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$CUDA_ROOT/lib/stubs/libcuda.so" "$WORK/libcuda_stub.c"
fi
export CUDA_ROOT CUDA_HOME="$CUDA_ROOT" CUDA_PATH="$CUDA_ROOT"
export PATH="$CUDA_ROOT/bin:$PATH"
export LIBRARY_PATH="$CUDA_ROOT/lib:$CUDA_ROOT/lib/stubs${LIBRARY_PATH:+:$LIBRARY_PATH}"
export LD_LIBRARY_PATH="$CUDA_ROOT/lib:$CUDA_ROOT/lib/stubs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUDA_COMPUTE_CAP=90 CUDARC_CUDA_VERSION=13000 CUDAFORGE_THREADS="$(nproc)"
export CARGO_TARGET_DIR="$WORK/target"
[ $# -eq 0 ] && set -- build --release --features cuda
cargo "$@"
