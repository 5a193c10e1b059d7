#!/usr/bin/env bash
# Builds the Python wheel from python/: the `entropy_lens` module and the `entropy-lens` command
# (abi3: one wheel for CPython 3.9 and later). Prints the wheel's path on the last line.
#
#   scripts/build-wheel.sh [OUT_DIR]        # default: $CARGO_TARGET_DIR/wheels
#   pip install "$(scripts/build-wheel.sh | tail -1)"
#
# maturin comes from PyPI into a venv cached under ~/.cache/entropy-lens/pytools; the Rust build
# shares the project's cargo cache (the library's release build is reused).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/entropy-lens/target}"
MATURIN_VERSION=1.16.0
TOOLS="${ENTROPY_LENS_PYTOOLS:-$HOME/.cache/entropy-lens/pytools}"
if ! "$TOOLS/bin/maturin" --version 2>/dev/null | grep -q " $MATURIN_VERSION"; then
  [ -x "$TOOLS/bin/python" ] || python3 -m venv "$TOOLS"
  timeout 600 "$TOOLS/bin/pip" install -q "maturin==$MATURIN_VERSION"
fi
OUT="${1:-$CARGO_TARGET_DIR/wheels}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
# Only this version's wheel in the folder, so the path printed is the one just built.
rm -f "$OUT"/entropy_lens-*.whl
"$TOOLS/bin/maturin" build --release --locked --manifest-path python/Cargo.toml --out "$OUT" >&2
ls "$OUT"/entropy_lens-*.whl
