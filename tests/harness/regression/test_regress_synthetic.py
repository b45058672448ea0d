"""Synthetic summaries and run folders for the regression-check tests (fixed seeds, known answers).

``summary_frame`` builds the rows ``summary.parquet`` would hold for the regression scenario: a queue
scenario at three sizes and a reqrep scenario, ``mqcore`` and ``zmq`` in every repetition. Each
repetition multiplies both systems by one shared "machine" factor (a busy shared runner: +-20 %), then
each system's value gets its own noise. ``slowdown`` makes mqcore that many times slower (throughput
divided, latency multiplied), only for ``slow_metrics`` if given. ``write_run`` puts a frame and a
manifest into a run folder. The module's own tests check the builder.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

QUEUE = "regress-queue"
REQREP = "regress-reqrep"
QUEUE_SIZES = (100, 1000, 65536)

# Medians of zmq's figures and mqcore's multiple of them (mqcore is pure Python: slower).
ZMQ: dict[str, Any] = {
    "receiver_msgs_per_s": {100: 400_000.0, 1000: 300_000.0, 65536: 20_000.0},
    "sender_msgs_per_s": {100: 450_000.0, 1000: 320_000.0, 65536: 21_000.0},
    "lat_p50_us": 60.0,
    "lat_p99_us": 150.0,
}
MQCORE_FACTOR = {"receiver_msgs_per_s": 0.4, "sender_msgs_per_s": 0.45, "lat_p50_us": 2.5, "lat_p99_us": 3.0}

HIGHER = ("receiver_msgs_per_s", "sender_msgs_per_s")


def scenario_dicts(repetitions: int, sizes: tuple[int, ...] = QUEUE_SIZES) -> list[dict[str, Any]]:
    """The scenarios as a manifest records them (``Scenario.as_dict`` shape)."""
    common = {"rates": [None], "producers": 1, "consumers": 1, "duration": 2.0, "repetitions": repetitions}
    return [
        {"name": QUEUE, "pattern": "queue", "message_sizes": list(sizes), "warmup": 1000, **common},
        {"name": REQREP, "pattern": "reqrep", "message_sizes": [100], "warmup": 500, **common},
    ]


def summary_frame(
    seed: int = 0,
    *,
    repetitions: int = 6,
    slowdown: float = 1.0,
    slow_metrics: Collection[str] | None = None,
    noise: float = 0.04,
    machine_noise: float = 0.2,
    systems: tuple[str, ...] = ("mqcore", "zmq"),
    sizes: tuple[int, ...] = QUEUE_SIZES,
    scenario_names: Mapping[str, str] | None = None,
    run_id: str = "run-synth",
) -> pd.DataFrame:
    """Summary rows (one per case and repetition) with the columns the check reads."""
    rng = np.random.default_rng(seed)
    names = {QUEUE: QUEUE, REQREP: REQREP, **(scenario_names or {})}
    rows: list[dict[str, Any]] = []
    cases = [(QUEUE, "queue", size) for size in sizes] + [(REQREP, "reqrep", 100)]
    for rep in range(repetitions):
        machine = rng.lognormal(0.0, machine_noise)
        for scenario, pattern, size in cases:
            for system in systems:
                row: dict[str, Any] = {
                    "run_id": run_id,
                    "scenario": names[scenario],
                    "pattern": pattern,
                    "system": system,
                    "variant": "default",
                    "size": size,
                    "rate": math.nan,
                    "label": "pyzmq" if system == "zmq" else system,
                    "repetition": rep,
                    "complete": True,
                }
                for metric, base in ZMQ.items():
                    zmq_value = base[size] if isinstance(base, dict) else base
                    factor = 1.0 if system == "zmq" else MQCORE_FACTOR[metric]
                    slow = system == "mqcore" and (slow_metrics is None or metric in slow_metrics)
                    higher = metric in HIGHER
                    if slow:
                        factor = factor / slowdown if higher else factor * slowdown
                    shared = 1.0 / machine if higher else machine
                    row[metric] = zmq_value * factor * shared * rng.lognormal(0.0, noise)
                if pattern == "reqrep":
                    row["latency_kind"] = "round-trip"
                rows.append(row)
    return pd.DataFrame(rows)


def manifest(
    run_id: str = "run-synth",
    *,
    repetitions: int = 6,
    complete: bool = True,
    hostname: str = "ci-runner",
    scenarios: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "complete": complete,
        "scenarios": scenarios if scenarios is not None else scenario_dicts(repetitions),
        "systems": {
            "mqcore": {"label": "mqcore", "versions": {"mqcore": "0.1.0"}},
            "zmq": {"label": "pyzmq", "versions": {"pyzmq": "26.2.0", "libzmq": "4.3.5"}},
        },
        "host": {"hostname": hostname, "cpus": 2, "kernel": "6.1.0-test", "python": "3.11.2"},
        "git_revision": "0123456789abcdef0123456789abcdef01234567",
    }


def write_run(root: Path, frame: pd.DataFrame, manifest_data: Mapping[str, Any] | None = None) -> Path:
    """``root/<run_id>/summary.parquet`` + ``manifest.json``; returns the run folder."""
    data = dict(manifest_data) if manifest_data is not None else manifest(str(frame["run_id"].iloc[0]))
    run = root / str(data["run_id"])
    run.mkdir(parents=True)
    frame.to_parquet(run / "summary.parquet", index=False)
    (run / "manifest.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    return run


def test_machine_factor_cancels_in_the_ratio() -> None:
    frame = summary_frame(3, noise=0.0)
    queue = frame[(frame["scenario"] == QUEUE) & (frame["size"] == 1000)]
    by_system = queue.pivot(index="repetition", columns="system", values="receiver_msgs_per_s")
    assert by_system["zmq"].std() > 0.05 * by_system["zmq"].mean()  # the machine moves a lot...
    assert np.allclose(by_system["mqcore"] / by_system["zmq"], 0.4)  # ...and the ratio not at all


def test_slowdown_applies_to_mqcore_only() -> None:
    fast = summary_frame(3, noise=0.0)
    slow = summary_frame(3, noise=0.0, slowdown=2.0, slow_metrics={"lat_p99_us"})
    diff = slow["lat_p99_us"] / fast["lat_p99_us"]
    assert np.allclose(diff[slow["system"] == "mqcore"], 2.0)
    assert np.allclose(diff[slow["system"] == "zmq"], 1.0)
    assert np.allclose(slow["lat_p50_us"], fast["lat_p50_us"])
