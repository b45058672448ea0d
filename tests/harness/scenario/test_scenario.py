"""Scenario loading: good files load into frozen dataclasses; bad ones fail with one line naming the field."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from harness.drivers.base import Pattern
from harness.scenario import ScenarioError, load_scenarios, parse_scenario

SCENARIO_DIR = Path(__file__).resolve().parents[3] / "scenarios"

GOOD = """
name: t1
pattern: queue
message_sizes: [10, 1KB, 1KiB, 1MB]
messages: 100
rate: [1000, max]
variants:
  zmq: {sndhwm: 10}
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


def test_good_scenario_loads(tmp_path: Path) -> None:
    (sc,) = load_scenarios(write(tmp_path, GOOD))
    assert sc.name == "t1"
    assert sc.pattern is Pattern.QUEUE
    assert sc.message_sizes == (10, 1000, 1024, 1_000_000)
    assert sc.rates == (1000.0, None)
    assert sc.warmup == 1000 and sc.repetitions == 1 and sc.payload == "random"
    assert sc.variants_for("zmq")[0].options == {"sndhwm": 10}
    assert sc.variants_for("mqcore")[0].name == "default"
    with pytest.raises(dataclasses.FrozenInstanceError):
        sc.name = "other"  # type: ignore[misc]


def test_several_documents(tmp_path: Path) -> None:
    text = GOOD + "---\nname: t2\npattern: reqrep\nmessage_sizes: [100]\nduration: 2s\n"
    a, b = load_scenarios(write(tmp_path, text))
    assert (a.name, b.name) == ("t1", "t2")
    assert b.duration == 2.0 and b.messages is None


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("name: x\npattern: queue\nmesage_sizes: [1]\nmessages: 1\n", "mesage_sizes", "did you mean 'message_sizes'"),
        ("name: x\npattern: fanout\nmessage_sizes: [100]\nmessages: 1\n", "pattern", "pubsub, queue, reqrep"),
        ("name: x\npattern: queue\nmessage_sizes: [100]\nmessages: lots\n", "messages", "whole number"),
        ("name: x\npattern: queue\nmessage_sizes: [100]\nmessages: 0\n", "messages", ">= 1"),
        ("name: x\npattern: queue\nmessage_sizes: [2]\nmessages: 5\n", "message_sizes", "between 6 B"),
        ("name: x\npattern: queue\nmessage_sizes: [1 GB]\nmessages: 5\n", "message_sizes", "unknown unit"),
        ("name: x\npattern: queue\nmessage_sizes: [100]\nmessages: 5\nrate: -3\n", "rate", "'max'"),
        ("name: x\npattern: queue\nmessage_sizes: [100]\nmessages: 5\nduration: 3\n", "messages", "not both"),
        ("name: x\npattern: queue\nmessage_sizes: [100]\n", "messages", "required"),
        ("name: x\npattern: queue\nmessage_sizes: [100]\nmessages: 5\nsystems: [zmqq]\n", "systems", "unknown system"),
        ("name: x\npattern: queue\nmessage_sizes: [100]\nmessages: 5\ntopics: 2\n", "topics", "per topic"),
        ("name: x\npattern: queue\nmessage_sizes: [100]\nmessages: 5\npayload: zeros\n", "payload", "random"),
        ("name: x\npattern: queue\nmessage_sizes: [100]\nmessages: 5\nvariants: {zmq: {sndhwn: 3}}\n",
         "variants.zmq.sndhwn", "did you mean 'sndhwm'"),
        ("name: bad name\npattern: queue\nmessage_sizes: [100]\nmessages: 5\n", "name", "letters"),
    ],
)
def test_bad_field_is_named(tmp_path: Path, text: str, field: str, words: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as info:
        load_scenarios(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    assert f"'{field}'" in message
    assert words in message


def test_invalid_yaml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="not valid YAML at line"):
        load_scenarios(write(tmp_path, "name: [unclosed\n"))
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load_scenarios(tmp_path / "absent.yaml")
    with pytest.raises(ScenarioError, match="must be a mapping"):
        parse_scenario(["a"], "x.yaml")


@pytest.mark.parametrize("path", sorted(SCENARIO_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_scenarios_are_valid(path: Path) -> None:
    assert load_scenarios(path)


def test_required_shipped_scenarios() -> None:
    names = {p.name for p in SCENARIO_DIR.glob("*.yaml")}
    assert {"smoke.yaml", "latency.yaml", "throughput.yaml", "seed-1m-1k.yaml"} <= names
    (seed,) = load_scenarios(SCENARIO_DIR / "seed-1m-1k.yaml")
    assert (seed.messages, seed.message_sizes, seed.producers, seed.consumers) == (1_000_000, (1024,), 1, 1)
    sizes = {s for sc in load_scenarios(SCENARIO_DIR / "throughput.yaml") for s in sc.message_sizes}
    assert min(sizes) == 10 and max(sizes) >= 1_000_000


def test_cli_validate_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\npattern: queue\nmesage_sizes: [1]\nmessages: 1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "validate", str(path)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    out = (proc.stdout + proc.stderr).strip()
    assert "Traceback" not in out
    assert len(out.splitlines()) == 1, out
    assert "'mesage_sizes'" in out
