"""Runs across hosts end to end: zmq across two hosts, a delay fault measured against the injected delay,
partitions that the at-least-once variants survive without loss, and no namespace, link or Toxiproxy of
ours left after a run, a failing run or Ctrl-C. Root and toxiproxy-server are needed (CI has both)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from rich.console import Console

import harness.compare
from harness.compare import compare
from harness.scenario import parse_scenario
from tests.harness.brokers.test_interrupt import interrupt_mid_run, left_running
from tests.harness.drivers.conformance import require_backend
from tests.harness.network.support import assert_nothing_left, require_jvm, require_toxiproxy, snapshot

HOSTS = {"broker": "server", "producers": "prod", "consumers": "cons"}


def _scenario(name: str, systems: list[str], fault: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": name, "pattern": "queue", "message_sizes": [100], "duration": "3s", "rate": 300,
            "warmup": 0, "timeout": 30, "systems": systems, "hosts": HOSTS, "faults": [fault], **more}


def _run(tmp_path: Path, specs: list[dict[str, Any]]) -> Any:
    scenarios = [parse_scenario(s, "test.yaml") for s in specs]
    console = Console(file=open(os.devnull, "w"), width=160)  # noqa: SIM115 - closed with the process
    return compare(scenarios, out_root=tmp_path, console=console, backend="process", write_report=False)


def _recovery(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / "recovery.csv")


def test_zmq_across_two_hosts_with_a_delay_close_to_the_injected_one(tmp_path: Path) -> None:
    require_toxiproxy()
    before = snapshot()
    delay = 0.02
    out = _run(tmp_path, [_scenario("delay", ["zmq"], {"at": "1s", "action": "delay", "delay": "20ms",
                                                         "duration": "1s"})])
    assert out.complete, out.problems
    rec = _recovery(out.run_dir).iloc[0]
    assert rec["lost"] == 0 and bool(out.summary["received"].iloc[0] > 0)
    assert rec["injected_delay_s"] == pytest.approx(delay)
    # a message sent while the delay was on is held at least the injected delay; the shift from before is
    # the delay give or take the base latency's noise (0.37 ms before against 0.35 ms under the delay, seen)
    assert rec["latency_during_s"] >= delay
    assert rec["latency_during_s"] - rec["latency_before_s"] > delay / 2
    manifest = (out.run_dir / "manifest.json").read_text()
    assert "CLOCK_MONOTONIC is shared" in manifest
    assert_nothing_left(before)


@pytest.mark.parametrize(("system", "variant"), [("zmq", "default"), ("redis", "aof"), ("jeromq", "default")])
def test_a_partition_of_the_consumer_host_loses_nothing(tmp_path: Path, system: str, variant: str) -> None:
    require_toxiproxy()
    if system == "jeromq":
        require_jvm()
    elif system != "zmq":
        require_backend(system, "process")
    before = snapshot()
    more = {"variants": {"redis": [{"name": "aof", "aof": True}]}} if system == "redis" else {}
    out = _run(tmp_path, [_scenario("partition", [system], {"at": "1s", "action": "partition",
                                                             "duration": "1s"}, **more)])
    assert out.complete, out.problems
    rec = _recovery(out.run_dir).iloc[0]
    assert rec["carried_out_as"] == "partition" and rec["variant"] == variant
    assert rec["accepted"] > 0 and rec["lost"] == 0
    assert rec["back_first_s"] >= 0  # deliveries came again after the heal
    assert_nothing_left(before)


@pytest.mark.parametrize("system", ["kafka", "rocketmq", "tansu"])
def test_a_broker_that_advertises_its_address_is_reached_through_each_client_hosts_route(
    tmp_path: Path, system: str
) -> None:
    require_toxiproxy()
    require_backend(system, "process")
    before = snapshot()
    out = _run(tmp_path, [_scenario("advertised", [system], {"at": "1s", "action": "delay", "delay": "20ms",
                                                              "duration": "1s"})])
    assert out.complete, out.problems
    assert out.summary["received"].iloc[0] == out.summary["sent"].iloc[0] > 0
    # the delay acted on the consumer host's own route to the broker (Kafka: its listener; RocketMQ: the
    # NameServer and the broker's two mirrored ports; Tansu: its one port, bootstrap and mirror alike)
    detail = pd.read_parquet(out.run_dir / "faults.parquet")["detail"].iloc[0]
    assert f"on {3 if system == 'rocketmq' else 1} connection(s) of host cons" in detail
    assert_nothing_left(before)


def test_a_failing_run_leaves_no_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_toxiproxy()
    before = snapshot()

    def fail(*args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("a case that blows up")

    monkeypatch.setattr(harness.compare, "run_cases", fail)
    with pytest.raises(RuntimeError):
        _run(tmp_path, [_scenario("boom", ["zmq"], {"at": "1s", "action": "reset", "duration": "1s"})])
    assert_nothing_left(before)


@pytest.mark.parametrize(("system", "sig"), [("zmq", signal.SIGINT), ("tansu", signal.SIGINT),
                                            ("tansu", signal.SIGKILL)])
def test_ctrl_c_during_compare_leaves_no_hosts(tmp_path: Path, system: str, sig: int) -> None:
    """Ctrl-C, or a SIGKILL where nothing of the harness runs after it: its watchdog (harness/_watchdog.py)
    then stops the broker and the proxies and removes the namespaces, the bridge and its firewall rule, and the
    runner's forkserver ends and its workers with it (``_watchdog.die_with_parent``). The signal comes once the
    case has started (the producer's send record is there), when a worker waits for a stop that only a living
    harness sends: killed earlier, still connecting, the workers ended by themselves on the stopped broker,
    which hid that the forkserver waited for them (they held its alive pipe open)."""
    require_toxiproxy()
    if system != "zmq":  # a broker on a host of its own, its advertised port mirrored on the client hosts
        require_backend(system, "process")
    hosts = "{producers: prod, consumers: cons}" if system == "zmq" else "{broker: server, producers: prod, consumers: cons}"
    before = snapshot()
    # the signal once the cons host's Toxiproxy (comm is cut to 15 characters) and the workers run and the case
    # has started, mid-partition
    _, seen = interrupt_mid_run(tmp_path, (
        "name: ctrl-c\npattern: queue\nmessage_sizes: [100]\nduration: 20s\nrate: 200\nwarmup: 0\n"
        f"systems: [{system}]\nhosts: {hosts}\n"
        "faults: [{at: 0.5s, action: partition, duration: 10s}]\n"
    ), "toxiproxy-serve", wait=60, sig=sig, started="*/.work/case-0/producer-0.tsend")
    assert not left_running(seen, wait=30), "a process of the run (broker, worker, Toxiproxy) was left running"
    assert_nothing_left(before)
