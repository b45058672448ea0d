"""Scenario fields of the evaluation: consumer_rate and faults, with errors that name the field."""

from __future__ import annotations

import pytest

from harness.scenario import Fault, ScenarioError, parse_scenario

BASE = {"name": "e", "pattern": "queue", "message_sizes": [100], "duration": "3s", "rate": 500, "consumers": 2}


def test_consumer_rate_and_faults_are_parsed_sorted_and_described() -> None:
    sc = parse_scenario({**BASE, "consumer_rate": 200, "faults": [
        {"at": "2s", "action": "restart-consumer", "target": 1, "down": "500ms"},
        {"at": 1, "action": "kill-broker"},
    ]}, "e.yaml")
    assert sc.consumer_rate == 200.0
    assert sc.faults == (Fault(at=1.0, action="kill-broker"), Fault(at=2.0, action="restart-consumer", target=1, down=0.5))
    described = sc.as_dict()
    assert described["consumer_rate"] == 200.0
    assert described["faults"][1] == {"at": 2.0, "action": "restart-consumer", "target": 1, "down": 0.5}


def test_defaults_leave_plain_scenarios_unchanged() -> None:
    sc = parse_scenario(BASE, "e.yaml")
    assert sc.consumer_rate is None and sc.faults == ()


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ({"consumer_rate": 0}, "consumer_rate", "messages per second"),
        ({"consumer_rate": "max"}, "consumer_rate", "leave it out"),
        ({"faults": {"at": 1}}, "faults", "must be a list"),
        ({"faults": [{"action": "kill-broker"}]}, "faults[0].at", "required"),
        ({"faults": [{"at": 1, "action": "explode"}]}, "faults[0].action", "kill-broker"),
        ({"faults": [{"at": 1, "action": "kill-consumer", "target": 2}]}, "faults[0].target", "only 2"),
        ({"faults": [{"at": 1, "action": "kill-broker", "down": 1}]}, "faults[0].down", "restart-*"),
        ({"faults": [{"at": 1, "action": "kill-broker", "when": 1}]}, "faults[0].when", "not a fault field"),
    ],
)
def test_bad_fields_are_named(extra: dict, field: str, words: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario({**BASE, **extra}, "e.yaml")
    message = str(info.value)
    assert message.startswith("e.yaml: field ") and f"'{field}'" in message and words in message


def test_worker_faults_are_refused_for_reqrep() -> None:
    with pytest.raises(ScenarioError, match="pubsub and queue"):
        parse_scenario({**BASE, "pattern": "reqrep", "faults": [{"at": 1, "action": "restart-consumer"}]}, "e.yaml")
