"""The workload fields of a scenario (harness/scenario/_workload.py): what they become, and one line naming
the field for each mistake."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.scenario import ScenarioError, load_scenarios, parse_scenario

BASE: dict[str, Any] = {"name": "w", "pattern": "queue", "message_sizes": [100], "messages": 1000}


def test_fields_become_the_scenario() -> None:
    sc = parse_scenario({**BASE, "rate": 2000, "backlog": {"size": "50KB", "drain_rate": 0.5},
                         "keys": "random", "key_count": 8, "payload": {"compressible": 0.7}})
    assert sc.backlog is not None and sc.backlog.target(100) == 500 and sc.backlog.drain_rate == 0.5
    assert (sc.keys, sc.key_count, sc.payload, sc.compressible) == ("random", 8, "compressible", 0.7)
    assert sc.workload
    profiled = parse_scenario({**BASE, "rate_profile": [[100, "1s"], [1000, "500ms"]]})
    assert profiled.rate_profile == ((100.0, 1.0), (1000.0, 0.5)) and profiled.rates == (400.0,)
    assert not parse_scenario(BASE).workload  # a scenario without the fields is as before
    assert parse_scenario(BASE).as_dict()["backlog"] is None


def test_file_payload_takes_its_size_and_a_path_beside_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "body.json").write_bytes(b"{}" * 300)
    path = tmp_path / "s.yaml"
    path.write_text("name: f\npattern: queue\nmessages: 10\npayload: {file: body.json}\n")
    (sc,) = load_scenarios(path)
    assert sc.payload == "file" and sc.message_sizes == (600,) and sc.payload_file == str(tmp_path / "body.json")


def test_topic_sweep_is_one_scenario_per_count(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: t\npattern: pubsub\nmessage_sizes: [100]\nmessages: 10\ntopics: [1, 50]\n"
                    "producers_per_topic: 2\nconsumers_per_topic: 3\n")
    one, fifty = load_scenarios(path)
    assert (fifty.name, fifty.series, fifty.topics, fifty.producers, fifty.consumers) == ("t-50t", "t", 50, 100, 150)
    assert one.series == "t" and one.producers == 2


@pytest.mark.parametrize(("extra", "field", "says"), [
    ({"backlog": {"size": "1MB"}}, "backlog", "fixed 'rate'"),
    ({"rate": 10, "backlog": {"size": "1MB", "messages": 5}}, "backlog", "not both"),
    ({"rate": 10, "backlog": {"messages": 1000}}, "backlog.messages", "below what the producers send"),
    ({"rate": 10, "backlog": {"messages": 10, "drain_rate": -1}}, "backlog.drain_rate", "between 0 and 10"),
    ({"rate": 10, "backlog": {"messages": 10, "depth": 3}}, "backlog.depth", "not a backlog field"),
    ({"rate_profile": [[100, "1s"]], "rate": 5}, "rate_profile", "not both"),
    ({"rate_profile": [[0, "1s"]]}, "rate_profile", "at least one step"),
    ({"rate_profile": [100, "1s"]}, "rate_profile[0]", "[msgs/s, duration]"),
    ({"keys": "hash"}, "keys", "none, round-robin, random"),
    ({"key_count": 4}, "key_count", "only applies"),
    ({"payload": {"file": "/no/such/file"}}, "payload.file", "no such file"),
    ({"payload": {"compressible": 2}}, "payload.compressible", "0 to 1"),
    ({"payload": "zeros"}, "payload", "'random', 'fixed'"),
    ({"producers_per_topic": 1, "producers": 2}, "producers_per_topic", "not both"),
])
def test_mistakes_are_one_line_naming_the_field(extra: dict[str, Any], field: str, says: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario({**BASE, **extra}, "s.yaml")
    text = str(err.value)
    assert f"field '{field}'" in text and says in text and "\n" not in text
