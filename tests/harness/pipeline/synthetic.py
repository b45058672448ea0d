"""Synthetic run folders with known answers, following RAW_SCHEMA and the runner's manifest shape.

``build_run`` writes a small run (fixed seed) with three scenarios and two systems:

* ``queue-2to1``  (queue, 2 producers -> 1 consumer, sizes 64 and 1024, rate max, 2 repetitions);
* ``pubsub-rates`` (pubsub, 1 producer -> 2 consumers, size 128, open loop at 1000 and 2000 msgs/s);
* ``reqrep``      (reqrep, 1 requester, size 64, rate max; ``t_recv`` is when the reply came back).

Every case has ``WARMUP`` warmup messages per producer. Latencies and send gaps are bounded so that no
stream reorders by itself; the faults are injected in ``FAULT_CASE`` only (queue, mqcore, size 64, rep 0):
one lost message (seq 20 of producer 0), one duplicate delivery (seq 30 of producer 1), one
out-of-order delivery (seq 50 of producer 0 arrives after seq 51), one send the producer was told failed
and that never arrived (seq 60 of producer 1) and one that failed at the producer but arrived (seq 70 of
producer 0) — plus, in pubsub (zmq, rate 1000,
rep 1), seq 40 lost at consumer 1 only.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness.runfolder.schema import HOST_COLUMNS, RAW_SCHEMA

WARMUP = 10
MESSAGES = 120  # measured messages per producer
SYSTEMS = ("mqcore", "zmq")
FAULT_CASE = {"scenario": "queue-2to1", "system": "mqcore", "size": 64, "repetition": 0}
PUBSUB_FAULT = {"scenario": "pubsub-rates", "system": "zmq", "rate": 1000.0, "repetition": 1}

SCENARIOS: dict[str, dict[str, Any]] = {
    "queue-2to1": {
        "name": "queue-2to1",
        "pattern": "queue",
        "producers": 2,
        "consumers": 1,
        "sizes": [64, 1024],
        "rates": ["max"],
        "repetitions": 2,
    },
    "pubsub-rates": {
        "name": "pubsub-rates",
        "pattern": "pubsub",
        "producers": 1,
        "consumers": 2,
        "sizes": [128],
        "rates": [1000, 2000],
        "repetitions": 2,
    },
    # long enough (130 messages at 20 msgs/s: 6.5 s) for the report's receipts-over-time figure
    "stream-long": {
        "name": "stream-long",
        "pattern": "queue",
        "producers": 1,
        "consumers": 1,
        "sizes": [256],
        "rates": [20],
        "repetitions": 1,
    },
    "reqrep": {
        "name": "reqrep",
        "pattern": "reqrep",
        "producers": 1,
        "consumers": 1,
        "sizes": [64],
        "rates": ["max"],
        "repetitions": 2,
    },
}

SYSTEM_INFO = {
    "mqcore": {
        "label": "mqcore",
        "versions": {"mqcore": "0.1.0"},
        "backend": "embedded",
        "guarantee": "at-most-once",
    },
    "zmq": {
        "label": "pyzmq",
        "versions": {"pyzmq": "26.2.0", "libzmq": "4.3.5"},
        "backend": "embedded",
        "guarantee": "at-most-once",
    },
    "rabbitmq": {
        "label": "rabbitmq (pika)",
        "versions": {"pika": "1.3.2", "rabbitmq": "3.10.8"},
        "backend": "process",
        "guarantee": "at-most-once",
    },
    "kafka": {
        "label": "kafka (tansu)",
        "versions": {"kafka-python": "2.0.2", "tansu": "0.5.1"},
        "backend": "process",
        "guarantee": "at-least-once",
    },
}


#: A system's variants as the runner records them (``manifest["variants"]``): name, label, client, guarantee.
#: RabbitMQ through pika and through its Java client, as scenarios/smoke.yaml runs it.
VARIANTS: dict[str, tuple[dict[str, str], ...]] = {
    "rabbitmq": (
        {"variant": "pika", "label": "rabbitmq (pika)", "client": "pika", "guarantee": "at-most-once"},
        {"variant": "java", "label": "rabbitmq (java)", "client": "java", "guarantee": "at-most-once"},
        {"variant": "durable-java", "label": "rabbitmq (java)", "client": "java", "guarantee": "durable"},
    ),
}


def variants_of(system: str) -> tuple[dict[str, str], ...]:
    """The variants a synthetic run writes for ``system``: those of ``VARIANTS``, else one ``default``."""
    info = SYSTEM_INFO[system]
    return VARIANTS.get(system, ({"variant": "default", "label": info["label"], "client": system,
                                  "guarantee": info["guarantee"]},))


def manifest(run_id: str, scenarios: list[str], systems: tuple[str, ...], complete: bool) -> dict[str, Any]:
    variants = {f"{s}/{v['variant']}": {"system": s, **v, "backend": SYSTEM_INFO[s]["backend"]}
                for s in systems if s in VARIANTS for v in VARIANTS[s]}
    return {
        **({"variants": variants} if variants else {}),
        "run_id": run_id,
        "complete": complete,
        "started": "2025-01-01T10:00:00+00:00",
        "finished": "2025-01-01T10:01:00+00:00" if complete else None,
        "scenarios": [SCENARIOS[s] for s in scenarios],
        "systems": {s: SYSTEM_INFO[s] for s in systems},
        "host": {
            "hostname": "testhost",
            "cpu_model": "Synthetic CPU @ 3.0GHz",
            "cpus": 2,
            "kernel": "6.1.0-test",
            "python": "3.11.2",
            "clock": "CLOCK_MONOTONIC (time.monotonic_ns)",
            "clock_resolution_ns": 1,
        },
        "git_revision": "0123456789abcdef0123456789abcdef01234567",
    }


def _case_rows(
    rng: np.random.Generator,
    run_id: str,
    scenario: dict[str, Any],
    system: str,
    size: int,
    rate: float,
    rep: int,
    start: int,
    variant: str = "default",
) -> list[dict[str, Any]]:
    pattern, producers, consumers = scenario["pattern"], scenario["producers"], scenario["consumers"]
    total = WARMUP + MESSAGES
    rows: list[dict[str, Any]] = []
    for producer in range(producers):
        if math.isnan(rate):
            gaps = rng.integers(1_000_000, 1_500_000, size=total)  # closed loop: >= 1 ms between sends
            t_send = start + producer * 300_000 + np.cumsum(gaps)
            t_intended: list[int | None] = [None] * total
        else:
            interval = int(1e9 / rate) * producers
            intended = start + producer * 1000 + interval * np.arange(total, dtype=np.int64)
            t_send = intended + rng.integers(0, 100_000, size=total)  # send delay < 100 us
            t_intended = [int(x) for x in intended]
        latency = np.clip(rng.lognormal(math.log(50_000), 0.8, size=(total, consumers)), 5_000, 400_000)
        # queue producers are told of acknowledgements (publish latency), except of every 7th message
        acks = np.clip(rng.lognormal(math.log(20_000), 0.5, size=total), 2_000, 200_000).astype(np.int64)
        for seq in range(total):
            for c in range(consumers):
                consumer = producer if pattern == "reqrep" else c
                rows.append(
                    {
                        "run_id": run_id,
                        "scenario": scenario["name"],
                        "pattern": pattern,
                        "system": system,
                        "variant": variant,
                        "repetition": rep,
                        "size": size,
                        "rate": rate,
                        "producer": producer,
                        "consumer": consumer,
                        "seq": seq,
                        "warmup": seq < WARMUP,
                        "t_intended": t_intended[seq],
                        "t_send": int(t_send[seq]),
                        "t_ack": int(t_send[seq] + acks[seq]) if pattern == "queue" and seq % 7 else None,
                        "t_recv": int(t_send[seq] + int(latency[seq, c])),
                        "send_failed": False,
                        "unconfirmed": False,
                        "drained": False,
                    }
                )
    return rows


def _inject(rows: list[dict[str, Any]], case: dict[str, Any]) -> None:
    def find(producer: int, seq: int, consumer: int = 0) -> dict[str, Any]:
        return next(r for r in rows if (r["producer"], r["seq"], r["consumer"]) == (producer, seq, consumer))

    if all(case.get(k) == v for k, v in FAULT_CASE.items()):
        lost = find(0, 20)
        lost.update(consumer=-1, t_recv=None)
        rows.append({**find(1, 30), "t_recv": find(1, 30)["t_recv"] + 700_000})
        find(0, 50)["t_recv"] = find(0, 51)["t_recv"] + 1_000
        find(1, 60).update(consumer=-1, t_recv=None, send_failed=True)
        find(0, 70)["send_failed"] = True
        find(0, 80).update(consumer=-1, t_recv=None, unconfirmed=True)  # in flight when its connection died
        find(1, 90).update(consumer=-1, t_recv=None, drained=True)  # found by the final read: held
        find(0, 95)["drained"] = True  # arrived as well: received, not held
    if all(case.get(k) == v for k, v in PUBSUB_FAULT.items()):
        find(0, 40, consumer=1)["t_recv"] = None


def build_run(
    root: Path,
    run_id: str = "run-synth",
    *,
    seed: int = 7,
    complete: bool = True,
    scenarios: tuple[str, ...] = ("queue-2to1", "pubsub-rates", "reqrep"),
    systems: tuple[str, ...] = SYSTEMS,
) -> Path:
    """Write ``root/run_id`` (manifest + one raw file per case and repetition); return the run folder."""
    rng = np.random.default_rng(seed)
    run = root / run_id
    (run / "raw").mkdir(parents=True)
    start = 10_000_000_000_000
    for name in scenarios:
        scenario = SCENARIOS[name]
        for system in systems:
            for size in scenario["sizes"]:
                for rate_spec in scenario["rates"]:
                    rate = math.nan if rate_spec == "max" else float(rate_spec)
                    for rep in range(scenario["repetitions"]):
                        for variant in (v["variant"] for v in variants_of(system)):
                            case = {
                                "scenario": name,
                                "system": system,
                                "size": size,
                                "rate": rate,
                                "repetition": rep,
                            }
                            rows = _case_rows(rng, run_id, scenario, system, size, rate, rep, start, variant)
                            _inject(rows, case)
                            start += 1_000_000_000_000
                            table = pa.Table.from_pylist(rows, schema=RAW_SCHEMA)
                            tag = "max" if math.isnan(rate) else f"{rate:g}"
                            pq.write_table(
                                table, run / "raw" / f"{name}-{system}-{variant}-{size}-{tag}-r{rep}.parquet"
                            )
    text = json.dumps(manifest(run_id, list(scenarios), systems, complete), indent=2)
    (run / "manifest.json").write_text(text, encoding="utf-8")
    return run


def build_bulk_run(
    root: Path, rows_total: int, *, cases: int = 8, seed: int = 1, run_id: str = "run-bulk"
) -> Path:
    """A large queue run (1 producer -> 1 consumer, rate max) with ``rows_total`` rows over ``cases``
    files (2 systems x sizes x 2 repetitions), vectorized so that 10 million rows take seconds to write."""
    rng = np.random.default_rng(seed)
    run = root / run_id
    (run / "raw").mkdir(parents=True)
    per_case = rows_total // cases
    systems = ("mqcore", "zmq")
    sizes = [64 * 4**i for i in range(max(1, cases // 4))]
    index = 0
    for system in systems:
        for size in sizes:
            for rep in range(2):
                seq = np.arange(per_case, dtype=np.int64)
                t_send = 10**13 + np.cumsum(rng.integers(5_000, 15_000, size=per_case))
                latency = rng.lognormal(math.log(40_000), 0.7, size=per_case).astype(np.int64)
                n = per_case
                table = pa.table(
                    {
                        "run_id": pa.array([run_id] * n),
                        "scenario": pa.array(["bulk"] * n),
                        "pattern": pa.array(["queue"] * n),
                        "system": pa.array([system] * n),
                        "variant": pa.array(["default"] * n),
                        "repetition": pa.array(np.full(n, rep, np.int32)),
                        "size": pa.array(np.full(n, size, np.int32)),
                        "rate": pa.array(np.full(n, np.nan)),
                        "producer": pa.array(np.zeros(n, np.int32)),
                        "consumer": pa.array(np.zeros(n, np.int32)),
                        "seq": pa.array(seq),
                        "warmup": pa.array(seq < 1000),
                        "t_intended": pa.nulls(n, pa.int64()),
                        "t_send": pa.array(t_send),
                        "t_ack": pa.nulls(n, pa.int64()),
                        "t_recv": pa.array(t_send + latency),
                        "send_failed": pa.array(np.zeros(n, bool)),
                        "unconfirmed": pa.array(np.zeros(n, bool)),
                        "drained": pa.array(np.zeros(n, bool)),
                        **{column: pa.nulls(n, pa.string()) for column in HOST_COLUMNS},
                    },
                    schema=RAW_SCHEMA,
                )
                pq.write_table(table, run / "raw" / f"bulk-{index}.parquet")
                index += 1
    scenario = {"name": "bulk", "pattern": "queue", "producers": 1, "consumers": 1, "sizes": sizes}
    info = manifest(run_id, [], systems, True)
    info["scenarios"] = [scenario]
    (run / "manifest.json").write_text(json.dumps(info, indent=2), encoding="utf-8")
    return run
