#!/usr/bin/env bash
# Executes notebooks headless (notebooks/*.ipynb with the evcxr kernel, notebooks/python/*.ipynb with
# the ordinary python3 kernel and the wheel); writes their standalone HTML reports (plotly.js
# embedded once each) to reports/ and, at smoke scale, the executed notebooks without plotly.js to
# notebooks/ (GitHub shows their outputs and SVG sketches; a re-run is interactive).
#   Usage: scripts/reports.sh [smoke|paper] [notebooks/NAME.ipynb ...]
# REPORTS_DIR overrides the output folder (CI executes into a scratch folder; the stripped notebooks
# then go there too). Experiment notebooks write their runs under runs/notebooks/, which is cleared
# first so every execution starts from scratch. Needs scripts/setup-notebooks.sh first. A cell error
# fails the run (nbconvert exits nonzero). The Python notebooks need scripts/setup-python-notebooks.sh;
# their outputs keep the subfolder (reports/python/NAME.html).
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE="${1:-smoke}"
shift || true
NB="${ENTROPY_LENS_NB:-$HOME/.cache/entropy-lens}"
export PATH="$NB/jupyter/bin:$NB/evcxr/bin:$PATH" JUPYTER_PATH="$NB/jupyter/share/jupyter"
export ENTROPY_LENS_SCALE="$SCALE"
OUT="${REPORTS_DIR:-reports}"
mkdir -p "$OUT"
SCRATCH="$(mktemp -d)"
# Kernels started here keep their connection files in this folder, so one that outlives a killed
# nbconvert (kernels run in a session of their own) can be found and stopped.
export JUPYTER_RUNTIME_DIR="$SCRATCH/runtime"
stop_kernels() { pkill -KILL -f "$JUPYTER_RUNTIME_DIR" 2>/dev/null || true; }
trap 'stop_kernels; rm -rf "$SCRATCH"' EXIT
# One evcxr build folder for all the notebooks of this run: entropy-lens is a path dependency, which
# evcxr's `:cache` does not keep, so with a folder per kernel every notebook compiled it again
# (about 2 minutes each on 2 cores).
export EVCXR_TMPDIR="$SCRATCH/evcxr"
# evcxr builds with debug assertions and overflow checks on (its own [profile.dev]); cargo's
# config, here in the environment, takes precedence over the manifest. Without them the notebooks'
# model runs go much faster with the same results (notebook 09's smoke lens training: 351 s -> 107 s,
# same final KL to every printed digit; measured 2026-12-03, docs/notebooks.md).
export CARGO_PROFILE_DEV_DEBUG_ASSERTIONS=false CARGO_PROFILE_DEV_OVERFLOW_CHECKS=false
# A whole notebook's time limit: 30 min at smoke scale (the slowest takes about 5), a day at paper scale.
if [ "$SCALE" = smoke ]; then NB_TIMEOUT="${NB_TIMEOUT:-1800}"; else NB_TIMEOUT="${NB_TIMEOUT:-86400}"; fi
if [ $# -gt 0 ]; then notebooks=("$@"); else notebooks=(notebooks/*.ipynb notebooks/python/*.ipynb); fi
for nb in "${notebooks[@]}"; do
  name="$(basename "$nb" .ipynb)"
  # notebooks/python/NAME.ipynb -> python/NAME: its report, scratch copy and runs keep the folder.
  sub="$(dirname "${nb#notebooks/}")"; [ "$sub" = . ] && sub="" || sub="$sub/"
  if [ "$sub" = python/ ]; then
    kernel=python3
    "$NB/jupyter/bin/python" -c "import entropy_lens" 2>/dev/null \
      || { echo "error: entropy_lens is not installed in $NB/jupyter: run scripts/setup-python-notebooks.sh" >&2; exit 1; }
  else
    kernel=rust
  fi
  mkdir -p "$SCRATCH/$sub" "$OUT/$sub"
  echo "==> $nb ($SCALE scale, $kernel kernel)"
  rm -rf "runs/notebooks/$sub$name"
  start=$(date +%s)
  # A cell past 90 min fails (nbclient stops its kernel); a notebook past NB_TIMEOUT is killed with
  # its kernel.
  timeout --kill-after=60 "$NB_TIMEOUT" \
    jupyter nbconvert --to notebook --execute --ExecutePreprocessor.kernel_name="$kernel" \
    --ExecutePreprocessor.timeout=5400 \
    --output-dir "$SCRATCH/$sub" --output "$name.ipynb" "$nb" \
    || { code=$?; stop_kernels; echo "error: $nb failed (exit $code; 124: ran past $NB_TIMEOUT s)" >&2; exit 1; }
  # Each cell's stream output folded as Jupyter shows it live: a progress line rewritten with
  # carriage returns keeps its last state (the report and the committed notebook show that).
  timeout --kill-after=30 600 \
    jupyter nbconvert --to notebook --inplace --CoalesceStreamsPreprocessor.enabled=True \
    "$SCRATCH/$sub$name.ipynb"
  timeout --kill-after=30 600 \
    jupyter nbconvert --to html --output-dir "$OUT/$sub" --output "$name.html" "$SCRATCH/$sub$name.ipynb"
  if [ "$SCALE" = smoke ] && [ "$OUT" = reports ]; then dest="$nb"; else dest="$OUT/$sub$name.ipynb"; fi
  python3 scripts/strip-plotly.py "$SCRATCH/$sub$name.ipynb" "$dest"
  echo "    executed in $(( $(date +%s) - start )) s -> $OUT/$sub$name.html, $dest"
done
