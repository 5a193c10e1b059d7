#!/usr/bin/env bash
# Makes the notebook environment (scripts/setup-notebooks.sh) run the Python notebooks
# (notebooks/python/, the ordinary "python3" kernel): builds the wheel and installs it there with
# numpy, pandas and plotly, as a user would with `pip install entropy-lens jupyterlab`.
set -euo pipefail
cd "$(dirname "$0")/.."
NB="${ENTROPY_LENS_NB:-$HOME/.cache/entropy-lens}"
ENV_DIR="$NB/jupyter"
[ -x "$ENV_DIR/bin/jupyter" ] || { echo "error: no notebook environment in $ENV_DIR: run scripts/setup-notebooks.sh first" >&2; exit 1; }
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/entropy-lens/target}"
WHEEL="$(./scripts/build-wheel.sh | tail -1)"
timeout 900 "$ENV_DIR/bin/pip" install -q -r scripts/requirements-python.txt
timeout 300 "$ENV_DIR/bin/pip" install -q --force-reinstall --no-deps "$WHEEL"
"$ENV_DIR/bin/python" -c "import entropy_lens, plotly, pandas; print('    entropy_lens', entropy_lens.__version__, 'in', '$ENV_DIR')"
