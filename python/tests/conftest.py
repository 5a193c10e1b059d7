"""Shared fixtures: the offline SmolLM2 (fetched through the package), the repository's tiny
tuned-lens fixture, and the wheel's own `entropy-lens` command beside this interpreter."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import entropy_lens as el

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def smollm2() -> str:
    paths = el.fetch_models()
    return next(p for p in paths if "SmolLM2" in p)


@pytest.fixture(scope="session")
def lens(smollm2):
    with el.Profiler.load(smollm2) as p:
        yield p


@pytest.fixture(scope="session")
def tiny_llama() -> Path:
    """A random 2-block Llama that transformers made, with a tuned lens trained for it."""
    return FIXTURES / "tuned_lens" / "llama"


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """The wheel's `entropy-lens` (the console script installed with this interpreter)."""
    exe = BIN / ("entropy-lens.exe" if os.name == "nt" else "entropy-lens")
    return subprocess.run(
        [str(exe), *args], capture_output=True, text=True, check=check, timeout=600
    )
