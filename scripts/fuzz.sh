#!/usr/bin/env bash
# Runs the mutation fuzzer (tests/fuzz.rs) for a while instead of its bounded `cargo test` share.
#   Usage: scripts/fuzz.sh [MINUTES=10] [SEED]
# Prints the table of inputs, cases, loads and errors (also written to target/fuzz-report.txt);
# exits nonzero on a panic, an abort, an allocation over the cap or a hang, naming the case to
# replay with ENTROPY_LENS_FUZZ_CASE=<n> (and the same seed).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/entropy-lens/target}"
MINUTES="${1:-10}"
SEED="${2:-$(date +%s)}"
export ENTROPY_LENS_FUZZ_SECONDS=$(( MINUTES * 60 ))
export ENTROPY_LENS_FUZZ_SEED="$SEED"
export ENTROPY_LENS_FUZZ_REPORT="$CARGO_TARGET_DIR/fuzz-report.txt"
echo "fuzzing for $MINUTES min, seed $SEED"
cargo test --release --test fuzz -- --nocapture
echo "report: $ENTROPY_LENS_FUZZ_REPORT"
