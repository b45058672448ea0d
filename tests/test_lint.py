"""The code's own checks are part of the suite: ruff's rules and mypy's types over both packages.

mypy fails on an import of a module of ours that does not exist (a module moved without its callers), which
no unit test of the moved module would notice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    result = _run("ruff", "check", "harness", "mqcore", "tests", "tools")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing() -> None:
    result = _run("mypy", "harness", "mqcore")
    assert result.returncode == 0, result.stdout + result.stderr
