"""The whole chain catches a real slowdown: runner -> summary -> baseline -> regress.

A baseline of mqcore vs zmq is recorded from a real run; the run it came from passes against it; a run where
mqcore's send path does 25 us of extra work per message (a test-only driver, about a 5x slowdown) fails,
naming the system and the metric, with the default thresholds and with the wider ones our CI uses.

Whether a *second* real run of unchanged code passes is not asserted here: on a shared 2-core machine two
runs of 5 x 0.1 s can differ by a third (seen in CI: mqcore/zmq 0.80 in one run, 0.51 in the next), and a
timing is a measurement, not a test outcome. The false-alarm rate under noise is checked on synthetic data
with known answers (test_regress_stats.py), and `make regress` measures it on every CI run.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from rich.console import Console

from harness.cli import main
from harness.compare import compare
from harness.drivers import SYSTEMS, register
from harness.scenario import parse_scenario

pytestmark = pytest.mark.slow


def scenario(system: str):  # type: ignore[no-untyped-def]
    spec = {
        "name": "chain", "pattern": "queue", "systems": [system, "zmq"], "message_sizes": [100],
        "messages": 20000, "warmup": 1000, "repetitions": 5,
    }
    return parse_scenario(spec, "chain.yaml")


def run(tmp_path: Path, system: str) -> Path:
    console = Console(file=open(os.devnull, "w"))  # noqa: SIM115
    out = compare([scenario(system)], out_root=tmp_path / "runs", console=console, write_report=False)
    assert out.complete, out.problems
    return out.run_dir


def ci_thresholds() -> list[str]:
    """The wider thresholds our own CI passes to `mqbench regress` (the Makefile's REGRESS_THRESHOLDS)."""
    makefile = (Path(__file__).resolve().parents[3] / "Makefile").read_text(encoding="utf-8")
    makefile = re.sub(r"\\\n\s*", " ", makefile)  # make's continuation lines, joined as make joins them
    found = re.search(r"^REGRESS_THRESHOLDS \?= (.+)$", makefile, re.MULTILINE)
    assert found, "REGRESS_THRESHOLDS not found in the Makefile"
    return shlex.split(found.group(1))


def test_regress_catches_a_slowdown_of_mqcore(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    register("mqcore-delayed", "tests.harness.runner.fake_drivers:DelayedMqcoreDriver")
    try:
        base = run(tmp_path, "mqcore")
        assert main(["baseline", str(base), "--out", str(tmp_path / "baseline")]) == 0
        slow = run(tmp_path, "mqcore-delayed")
        capsys.readouterr()
        same_code = main(["regress", str(base), "--baseline", str(tmp_path / "baseline")])
        captured = capsys.readouterr()
        same_text = captured.out + captured.err
        code = main(["regress", str(slow), "--baseline", str(tmp_path / "baseline"),
                     "--baseline-system", "mqcore-delayed=mqcore"])
        captured = capsys.readouterr()
        text = captured.out + captured.err
        # ... and also with the wider margins `make regress` uses in our CI.
        ci_code = main(["regress", str(slow), "--baseline", str(tmp_path / "baseline"),
                        "--baseline-system", "mqcore-delayed=mqcore", *ci_thresholds()])
        captured = capsys.readouterr()
        ci_text = captured.out + captured.err
    finally:
        SYSTEMS.pop("mqcore-delayed", None)
    assert same_code == 0, same_text
    assert "No regression: 2 metric(s) of mqcore checked." in same_text and "+0.0%" in same_text
    assert code == 1, text
    assert "mqcore-delayed" in text and "REGRESSION" in text
    assert ci_code == 1, ci_text
    assert "mqcore-delayed" in ci_text and "threshold 25%" in ci_text
