#!/usr/bin/env bash
# Times a notebook's first cell from cold: a fresh evcxr kernel with an empty evcxr cache and build
# folder runs `:cache 4000`, `:dep entropy-lens = { path = CRATE, DEP_OPTIONS }` and one `use`, the
# way notebooks/01_quickstart.ipynb starts; prints the seconds. Needs scripts/setup-notebooks.sh.
#
#   scripts/notebook-compile-time.sh                      # this checkout, default-features = false
#   scripts/notebook-compile-time.sh /path/to/old/checkout ""   # another checkout, its default :dep
#
# Same cargo settings as scripts/reports.sh (no debug assertions or overflow checks in the kernel).
set -euo pipefail
cd "$(dirname "$0")/.."
CRATE="$(cd "${1:-.}" && pwd)"
OPTIONS="${2-, default-features = false}"
NB="${ENTROPY_LENS_NB:-$HOME/.cache/entropy-lens}"
export PATH="$NB/jupyter/bin:$NB/evcxr/bin:$PATH" JUPYTER_PATH="$NB/jupyter/share/jupyter"
SCRATCH="$(mktemp -d)"
trap 'pkill -KILL -f "$SCRATCH" 2>/dev/null || true; rm -rf "$SCRATCH"' EXIT
export JUPYTER_RUNTIME_DIR="$SCRATCH/runtime" EVCXR_TMPDIR="$SCRATCH/evcxr" XDG_CACHE_HOME="$SCRATCH/cache"
export CARGO_PROFILE_DEV_DEBUG_ASSERTIONS=false CARGO_PROFILE_DEV_OVERFLOW_CHECKS=false
python3 - "$SCRATCH/first-cell.ipynb" "$CRATE" "$OPTIONS" <<'PY'
import json, sys
path, crate, options = sys.argv[1:]
cells = [f':cache 4000\n:dep entropy-lens = {{ path = "{crate}"{options} }}',
         'use entropy_lens::prelude::*;\nprintln!("{}", entropy_lens::profile::provenance::CRATE_VERSION);']
nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {},
                 "outputs": [], "source": s} for i, s in enumerate(cells)],
      "metadata": {"kernelspec": {"display_name": "Rust", "language": "rust", "name": "rust"}},
      "nbformat": 4, "nbformat_minor": 5}
json.dump(nb, open(path, "w"))
PY
start=$(date +%s)
jupyter nbconvert --to notebook --execute --ExecutePreprocessor.kernel_name=rust \
  --ExecutePreprocessor.timeout=3600 --output-dir "$SCRATCH" --output done.ipynb \
  "$SCRATCH/first-cell.ipynb" >/dev/null 2>"$SCRATCH/nbconvert.log" \
  || { cat "$SCRATCH/nbconvert.log" >&2; exit 1; }
echo "$(( $(date +%s) - start )) s: first cell from cold, $CRATE${OPTIONS:+ ($OPTIONS)}"
