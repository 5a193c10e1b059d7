#!/usr/bin/env bash
# Executes notebooks headless with the evcxr kernel and writes executed notebooks and standalone
# HTML into reports/.  Usage: scripts/reports.sh [smoke|paper] [notebooks/NAME.ipynb ...]
# At smoke scale the executed notebook also replaces notebooks/NAME.ipynb (so GitHub shows outputs);
# REPORTS_DIR overrides the output folder (CI executes into a scratch folder).
# Needs scripts/setup-notebooks.sh first. A cell error fails the run (nbconvert exits nonzero).
set -euo pipefail
cd "$(dirname "$0")/.."
SCALE="${1:-smoke}"
shift || true
NB="${ENTROPY_LENS_NB:-$HOME/.cache/entropy-lens}"
export PATH="$NB/jupyter/bin:$NB/evcxr/bin:$PATH" JUPYTER_PATH="$NB/jupyter/share/jupyter"
export ENTROPY_LENS_SCALE="$SCALE"
OUT="${REPORTS_DIR:-reports}"
mkdir -p "$OUT"
if [ $# -gt 0 ]; then notebooks=("$@"); else notebooks=(notebooks/*.ipynb); fi
for nb in "${notebooks[@]}"; do
  name="$(basename "$nb" .ipynb)"
  echo "==> $nb ($SCALE scale)"
  start=$(date +%s)
  jupyter nbconvert --to notebook --execute --ExecutePreprocessor.kernel_name=rust \
    --ExecutePreprocessor.timeout=5400 --output-dir "$OUT" --output "$name.ipynb" "$nb"
  jupyter nbconvert --to html --output-dir "$OUT" --output "$name.html" "$OUT/$name.ipynb"
  echo "    executed in $(( $(date +%s) - start )) s -> $OUT/$name.ipynb, $OUT/$name.html"
  if [ "$SCALE" = smoke ] && [ "$OUT" = reports ]; then cp "$OUT/$name.ipynb" "$nb"; fi
done
