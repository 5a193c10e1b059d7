#!/usr/bin/env bash
# The Python environment of the tuned-lens fixtures (tests/fixtures/tuned_lens/make_fixtures.py):
# the tuned-lens package 0.2.0 (PyPI, 2023) with the versions it was checked to work with here.
# tuned-lens pins old transformers/torch ranges in its metadata, so it is installed without its
# dependencies, which are listed here instead. Not needed by the tests (their fixtures are
# committed); about 2 GB (PyPI's torch wheel), in ~/.cache/entropy-lens/tunedlens.
set -euo pipefail
VENV="${ENTROPY_LENS_CACHE:-$HOME/.cache/entropy-lens}/tunedlens"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
timeout 3600 "$VENV/bin/pip" install -q torch==2.15.0 transformers==5.24.0 numpy safetensors \
  gguf accelerate huggingface_hub simple-parsing flatten-dict docstring-parser
timeout 600 "$VENV/bin/pip" install -q --no-deps tuned-lens==0.2.0
"$VENV/bin/python" -c "import tuned_lens, transformers, torch; print('tuned-lens ready:', transformers.__version__, torch.__version__)"
echo "python: $VENV/bin/python"
