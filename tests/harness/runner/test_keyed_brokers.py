"""Keyed sends end to end on real brokers, through ``compare``: Kafka record keys over 4 partitions and
RabbitMQ routing keys (a direct exchange), each through its Python and its Java client, and NATS subjects on
core NATS and on JetStream (the topic's stream captures ``<topic>.*``). Each runs keys in turn and at random,
pub/sub with two subscribers, a few thousand messages (seconds per broker, plus the JVMs' start). The raw
records carry each message's key and, where the system acknowledges sends (all but core NATS; RabbitMQ with
confirms, also through its Java client), its acknowledgement; every subscriber got every message once, and
each key's messages in the order they were sent, which each of these systems promises here (Kafka per
partition, and a key's messages share a partition; RabbitMQ per queue; NATS per connection and per stream).

A missing broker skips with its reason, and without the JVM worker the Java variants are left out (both fail
with CI=true)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from harness.compare import compare
from harness.drivers.java import unavailable_reason
from harness.runner._keys import key_indices
from harness.scenario import parse_scenario
from tests.harness.drivers.conformance import require_backend

MESSAGES, KEYS, SUBSCRIBERS = 3000, 8, 2
VARIANTS: dict[str, Any] = {  # the Java clients run the same keys in the JVM worker
    "kafka": [{"name": "python", "partitions": 4}, {"name": "java", "client": "java", "partitions": 4}],
    "rabbitmq": [{"name": "python", "confirms": True}, {"name": "java", "client": "java", "confirms": True}],
    "nats": [{"name": "core"}, {"name": "jetstream", "jetstream": True, "storage": "memory"}],
}


def _variants(system: str) -> list[dict[str, Any]]:
    """The system's variants that can run here: the Java ones only with the JVM worker."""
    reason = unavailable_reason()
    java = [v for v in VARIANTS[system] if v.get("client") == "java"]
    if java and reason and os.environ.get("CI") == "true":
        pytest.fail(f"the JVM worker cannot run: {reason}")
    return [v for v in VARIANTS[system] if reason is None or v not in java]


def _scenario(distribution: str, system: str) -> Any:
    return parse_scenario({"name": f"keys-{distribution}", "pattern": "pubsub", "consumers": SUBSCRIBERS,
                           "message_sizes": [100], "messages": MESSAGES, "warmup": 0, "rate": 5000,
                           "keys": distribution, "key_count": KEYS, "timeout": 60,
                           "variants": {system: _variants(system)}}, "test.yaml")


@pytest.mark.parametrize("system", sorted(VARIANTS))
def test_keyed_sends_arrive_with_their_keys_all_and_in_order_per_key(tmp_path: Path, system: str) -> None:
    require_backend(system)
    out = compare([_scenario("round-robin", system), _scenario("random", system)], systems=[system],
                  out_root=tmp_path, console=Console(file=open(os.devnull, "w")),  # noqa: SIM115
                  write_report=False)
    assert out.complete, out.problems
    raw = pd.concat([pd.read_parquet(f) for f in sorted((out.run_dir / "raw").glob("*.parquet"))])
    variants = [v["name"] for v in _variants(system)]
    cases = {(str(sc), str(v)): rows for (sc, v), rows in raw.groupby(["scenario", "variant"])}
    assert sorted(cases) == sorted((f"keys-{d}", v) for d in ("random", "round-robin") for v in variants)
    for (scenario, variant), rows in cases.items():
        where = f"{system} {variant} {scenario}"
        distribution = scenario.removeprefix("keys-")
        assert rows["t_recv"].notna().all(), f"{where}: {rows['t_recv'].isna().sum()} not delivered"
        for consumer in range(SUBSCRIBERS):  # every subscriber had every message, once
            mine = rows[rows["consumer"] == consumer]
            assert sorted(mine["seq"]) == list(range(MESSAGES)), where
        expected = np.array([f"k{i}" for i in key_indices(distribution, KEYS, 0, rows["seq"].to_numpy())])
        assert (rows["key"].to_numpy() == expected).all(), where  # the key each message was sent with
        counts = rows[rows["consumer"] == 0]["key"].value_counts()
        assert len(counts) == KEYS, where  # every key was used ...
        if distribution == "round-robin":
            assert set(counts) == {MESSAGES // KEYS}, where  # ... in turn: evenly
        if variant != "core":  # publish latency: every send acknowledged (core NATS has no acknowledgement)
            assert rows["t_ack"].notna().all() and (rows["t_ack"] >= rows["t_send"]).all(), where
        for (subscriber, key), per_key in rows.groupby(["consumer", "key"]):
            seqs = per_key.sort_values("t_recv", kind="stable")["seq"].to_numpy()
            assert (np.diff(seqs) > 0).all(), f"{where}: key {key} out of order at subscriber {subscriber}"
    summary = out.summary
    assert (summary["lost"] == 0).all() and (summary["received"] == MESSAGES * SUBSCRIBERS).all()
