#!/usr/bin/env bash
# Sets up the notebook tool chain: Jupyter (Lab + Notebook + nbconvert) and the evcxr Rust kernel
# at a pinned version, registered for that Jupyter and for the user (so an existing JupyterLab or
# VS Code finds the "Rust" kernel too).
#
#   scripts/setup-notebooks.sh            # conda env from environment.yml if conda is there, else a venv
#
# One environment either way: environment.yml asks conda for Python and pip, and both paths install
# the same pinned packages from scripts/requirements-notebooks.txt.
# Everything is cached under ~/.cache/entropy-lens (ENTROPY_LENS_NB overrides): the Python env in
# jupyter/, evcxr_jupyter in evcxr/bin, the kernel spec inside the env and in the user's Jupyter
# data folder (ENTROPY_LENS_USER_KERNEL=0 skips the latter). Prints the line to source.
set -euo pipefail
cd "$(dirname "$0")/.."
EVCXR_VERSION=0.22.0
NB="${ENTROPY_LENS_NB:-$HOME/.cache/entropy-lens}"
ENV_DIR="$NB/jupyter"
EVCXR_ROOT="$NB/evcxr"

if command -v conda >/dev/null 2>&1 && [ "${ENTROPY_LENS_USE_VENV:-0}" != 1 ]; then
  [ -x "$ENV_DIR/bin/jupyter" ] || timeout 3600 conda env create -p "$ENV_DIR" -f environment.yml
else
  # The same pins as the conda env (environment.yml installs this file with pip too).
  [ -x "$ENV_DIR/bin/python" ] || python3 -m venv "$ENV_DIR"
  timeout 1800 "$ENV_DIR/bin/pip" install -q -r scripts/requirements-notebooks.txt
fi

# cargo records what it installed under --root; evcxr_jupyter itself has no --version.
if ! grep -q "evcxr_jupyter $EVCXR_VERSION " "$EVCXR_ROOT/.crates.toml" 2>/dev/null || [ ! -x "$EVCXR_ROOT/bin/evcxr_jupyter" ]; then
  echo "installing evcxr_jupyter $EVCXR_VERSION (about 12 minutes on 2 cores, once)"
  timeout 3600 cargo install evcxr_jupyter --version "$EVCXR_VERSION" --locked --root "$EVCXR_ROOT"
fi
# Register the kernel inside the env (JUPYTER_PATH is honoured by evcxr_jupyter --install).
JUPYTER_PATH="$ENV_DIR/share/jupyter" PATH="$EVCXR_ROOT/bin:$PATH" "$EVCXR_ROOT/bin/evcxr_jupyter" --install >/dev/null
# The kernel spec must find evcxr_jupyter without PATH tricks.
SPEC="$ENV_DIR/share/jupyter/kernels/rust/kernel.json"
if [ -f "$SPEC" ]; then
  "$ENV_DIR/bin/python" - "$SPEC" "$EVCXR_ROOT/bin/evcxr_jupyter" <<'PY'
import json, sys
spec = json.load(open(sys.argv[1]))
spec["argv"][0] = sys.argv[2]
json.dump(spec, open(sys.argv[1], "w"), indent=1)
PY
fi
# The user-level kernel spec (~/.local/share/jupyter/kernels/rust on Linux): any Jupyter the user
# runs, and VS Code's Jupyter extension, list it.
if [ "${ENTROPY_LENS_USER_KERNEL:-1}" != 0 ] && [ -f "$SPEC" ]; then
  USER_SPEC="$("$ENV_DIR/bin/jupyter" --data-dir)/kernels/rust/kernel.json"
  # A "rust" kernel of the user's own (another evcxr_jupyter) is left alone, saying so.
  if [ -f "$USER_SPEC" ] && ! grep -q "$EVCXR_ROOT/bin/evcxr_jupyter" "$USER_SPEC"; then
    echo "note: $USER_SPEC is another Rust kernel; left as it is (ENTROPY_LENS_USER_KERNEL=0 silences this)"
  else
    "$ENV_DIR/bin/jupyter" kernelspec install --user --name rust "$(dirname "$SPEC")" >/dev/null 2>&1
    echo "kernel \"Rust\" registered for this user: $(dirname "$USER_SPEC")"
  fi
fi
echo "ready: export PATH=\"$ENV_DIR/bin:$EVCXR_ROOT/bin:\$PATH\" JUPYTER_PATH=\"$ENV_DIR/share/jupyter\""
