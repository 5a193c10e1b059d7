#!/usr/bin/env python3
"""Rewrites the ```text blocks of docs/cli.md with the binary's `--help` of each command
(tests/cli_docs.rs checks they agree). Usage: scripts/cli-docs.py [path/to/entropy-lens]."""
import re
import subprocess
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
binary = sys.argv[1] if len(sys.argv) > 1 else "entropy-lens"
page = root / "docs" / "cli.md"
text = page.read_text()


def help_of(command: str) -> str:
    args = [binary, *command.split(), "--help"]
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def replace(match: re.Match) -> str:
    heading, command = match.group(1), match.group(2).strip()
    return f"{heading}\n\n```text\n{help_of(command)}```"


text = re.sub(r"(## `entropy-lens ?([a-z-]*)`)\n\n```text\n.*?```", replace, text, flags=re.S)
page.write_text(text)
