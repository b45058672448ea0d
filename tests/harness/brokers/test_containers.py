"""The containers backend for real: brokers in their images (built here by `make images` when no registry serves
the official ones), removed on every way out (a SIGKILLed process's by its watchdog), swept after a run killed
with its watchdog, killed and restarted with their data, placed on a host, recorded in the run's manifest;
and the choice of an image when no registry answers.

Needs a Docker engine and the images (`make test` starts one and builds them); without them the tests skip
with the reason, or fail in CI (``CI=true``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.brokers import ClusterControl, _containers, _images, broker_control, choose_backend, provision
from harness.brokers._base import ProbeError
from harness.brokers._spec import ImageFiles, NodeHost
from harness.brokers.nats import NatsProvisioner
from harness.drivers.base import ClusterShape, DriverError
from harness.drivers.redis_streams import turn_aof_on
from harness.pipeline import run_folders
from tests.harness.drivers import node_faults
from tests.harness.drivers.conformance import require_backend
from tests.harness.drivers.node_faults import check_no_acknowledged_loss, run_node_fault
from tests.harness.network.support import assert_nothing_left, require_toxiproxy, snapshot

ROOT = Path(__file__).resolve().parents[3]
MQBENCH = Path(sys.executable).parent / "mqbench"


def _ours() -> list[str]:
    """Names of every container an mqbench process started that is still there (any owner)."""
    return [c.name for c in _images.client().containers.list(all=True, filters={"label": _containers.OWNER})]


def _gone(names: list[str]) -> bool:
    return not set(names) & set(_ours())


def test_containers_go_at_the_end_and_on_ctrl_c(tmp_path: Path) -> None:
    require_backend("nats", "containers")
    with provision("nats", "containers", logs_dir=tmp_path) as endpoint:
        names = list(endpoint.extra["containers"])
        assert endpoint.backend == "containers" and endpoint.url.startswith("nats://127.0.0.1:")
        assert set(names) <= set(_ours()) and endpoint.extra["image_id"].startswith("sha256:")
    assert _gone(names)
    assert (tmp_path / "nats" / "logs" / "nats-server.out").read_text()  # the broker's output, where a process's goes
    with pytest.raises(KeyboardInterrupt), provision("nats", "containers") as endpoint:
        names = list(endpoint.extra["containers"])
        raise KeyboardInterrupt
    assert _gone(names) and not _containers.live_names()


HOLD = """
import sys, time
from harness import _watchdog
from harness.brokers import provision
with provision("nats", "containers") as endpoint:
    print(",".join(endpoint.extra["containers"]), _watchdog.watchdog_pid(), flush=True)
    time.sleep(600)
"""


def _killed_holding(kill_watchdog: bool) -> list[str]:
    """The containers of a process that held a NATS broker in containers and was SIGKILLed (no teardown, no
    atexit), with its watchdog (harness/_watchdog.py) killed first when ``kill_watchdog``."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        listed, watchdog = proc.stdout.readline().split()
        names = listed.split(",")
        assert names and set(names) <= set(_ours())
        if kill_watchdog:
            os.kill(int(watchdog), signal.SIGKILL)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    return names


def test_the_containers_of_a_killed_run_are_removed_by_its_watchdog() -> None:
    require_backend("nats", "containers")
    names = _killed_holding(kill_watchdog=False)
    deadline = time.monotonic() + 60  # a bound on waiting: SIGTERM's grace, then docker rm -f
    while time.monotonic() < deadline and not _gone(names):
        time.sleep(0.5)
    assert _gone(names), "the containers outlived the process that started them"


def test_the_containers_of_a_run_killed_with_its_watchdog_are_swept() -> None:
    require_backend("nats", "containers")
    names = _killed_holding(kill_watchdog=True)  # nothing of the run is left to remove them
    assert set(names) <= set(_ours())
    folders = {Path(_images.client().containers.get(n).labels[_containers.FOLDER]) for n in names}
    assert folders and all(f.is_dir() for f in folders)  # the broker's folder, bind-mounted
    assert set(names) <= set(_containers.sweep())  # their owner is gone
    assert _gone(names)
    assert not any(f.exists() for f in folders), "the swept containers' folders were left"


def test_a_broker_in_containers_is_killed_and_started_again_with_its_data() -> None:
    require_backend("redis", "containers")
    import redis

    with provision("redis", "containers") as endpoint:
        control = broker_control(endpoint)
        assert control is not None and control.running()
        before = set(control.pids())
        assert before, "the container's processes are this machine's pids (CPU and memory are sampled from them)"
        client = redis.Redis.from_url(endpoint.url, socket_timeout=5)
        turn_aof_on(client)
        for i in range(100):
            client.xadd("kept", {"i": i})
        control.kill()
        assert not control.running()
        with pytest.raises(redis.ConnectionError):
            redis.Redis.from_url(endpoint.url, socket_timeout=1, socket_connect_timeout=1).ping()
        assert control.start()  # the same port and data directory, in a new container
        assert control.running() and not set(control.pids()) & before
        assert redis.Redis.from_url(endpoint.url, socket_timeout=5).xlen("kept") == 100
        names = list(endpoint.extra["containers"])
    assert _gone(names) and not _containers.live_names()


SCENARIO = """
name: in-containers
pattern: queue
systems: [nats]
message_sizes: [100]
messages: 2000
warmup: 100
rate: max
repetitions: 1
"""


def test_compare_in_containers_records_the_image_and_leaves_nothing(tmp_path: Path) -> None:
    require_backend("nats", "containers")
    (tmp_path / "s.yaml").write_text(SCENARIO)
    before = set(_ours())
    done = subprocess.run([str(MQBENCH), "compare", str(tmp_path / "s.yaml"), "--backend", "containers",
                           "--no-report", "--out", str(tmp_path / "res")], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (run,) = run_folders(tmp_path / "res")
    manifest = json.loads((run / "manifest.json").read_text())
    nats = manifest["systems"]["nats"]
    assert nats["backend"] == "containers" and nats["broker_image"] == _images.choose("nats").image.name  # type: ignore[union-attr]
    assert nats["broker_image_id"].startswith("sha256:") and nats["broker_image_origin"] in ("official", "built here")
    assert manifest["variants"]["nats/default"]["backend"] == "containers"
    summary = pd.read_csv(run / "summary.csv")
    assert summary["lost"].tolist() == [0] and summary["received"].tolist() == [2000]
    cpu = pd.read_csv(run / "cpu.csv")
    broker = cpu.loc[cpu["role"] == "broker"]
    # the containers' processes are measured (a short case may take less than a clock tick of the broker's CPU)
    assert len(broker) and broker["cpu_s"].notna().all() and broker["note"].isna().all()
    assert set(_ours()) <= before


def test_a_broker_in_containers_on_a_host_of_its_own(tmp_path: Path) -> None:
    """hosts: {broker: ...} puts the broker's processes in that host's namespace from inside their
    container (ip netns exec), as for a local process; clients reach it through the host's route."""
    require_toxiproxy()
    require_backend("redis", "containers")
    from rich.console import Console

    from harness.compare import compare
    from harness.scenario import parse_scenario

    before = snapshot()
    scenario = parse_scenario({"name": "placed", "pattern": "queue", "systems": ["redis"], "message_sizes": [100],
                               "messages": 2000, "warmup": 0, "rate": 2000, "timeout": 30,
                               "hosts": {"broker": "server", "producers": "prod", "consumers": "cons"}}, "t.yaml")
    console = Console(file=open(os.devnull, "w"), width=160)  # noqa: SIM115 - closed with the process
    out = compare([scenario], out_root=tmp_path, console=console, backend="containers", write_report=False)
    assert out.complete, out.problems
    assert out.summary["lost"].tolist() == [0] and out.summary["received"].tolist() == [2000]
    manifest = json.loads((out.run_dir / "manifest.json").read_text())
    assert manifest["systems"]["redis"]["backend"] == "containers"
    assert "server" in manifest["network"]["hosts"]
    assert_nothing_left(before)
    assert not _containers.live_names()


def test_no_registry_and_no_image_means_the_process_backend_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a user without a registry and before `make images` gets: containers are passed over (never a
    failed run), and the line says which image could not be had and what builds it."""
    monkeypatch.setattr(_containers, "docker_available", lambda: True)
    monkeypatch.setattr(_images, "_local", lambda name: None)
    monkeypatch.setattr(_images, "_pull_problem", lambda name: "no registry answers: lookup registry-1.docker.io: no such host")
    monkeypatch.setattr(_images, "_built", lambda recipe, current: [])
    _images.choose.cache_clear()
    try:
        picked = _images.choose("rabbitmq")
        assert picked.image is None
        assert picked.reason == ("no rabbitmq image: rabbitmq:3.13.7 cannot be pulled (no registry answers: lookup "
                                 "registry-1.docker.io: no such host) and `make images` has not built "
                                 "mqbench/rabbitmq; `make images` builds it")
        choice = choose_backend("rabbitmq")
        if choice.backend is not None:  # a local rabbitmq-server is installed here
            assert choice.backend == "process" and choice.note.endswith(picked.reason)
        with pytest.raises(DriverError, match="cannot be pulled"), provision("rabbitmq", "containers"):
            pass
    finally:
        _images.choose.cache_clear()


R3 = ClusterShape(3, 3, 2)


def test_a_three_node_cluster_in_containers_keeps_every_acknowledged_message_through_a_node_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process backend's cluster plan, each node a container: node faults act on the node's containers
    (pause freezes them, kill leaves the node dead, start runs it again in a new container with its data),
    a JetStream R3 stream keeps every acknowledged message through a kill and restart of its leader, and no
    container is left."""
    require_backend("nats", "containers")
    monkeypatch.setattr(node_faults, "STALL", 20.0)  # a consumer's leader elected again: as test_nats_cluster
    before = set(_ours())
    seen: dict[str, Any] = {}

    def kill_then_start(control: ClusterControl, node: int) -> None:
        seen["killed"] = control.started[node].names()  # type: ignore[attr-defined]
        control.kill(node)
        seen["dead"] = not control.node_running(node) and not control.node_pids(node)
        time.sleep(2.0)
        control.start(node)
        seen["again"] = control.started[node].names()  # type: ignore[attr-defined]

    with provision("nats", "containers", shape=R3, logs_dir=tmp_path / "logs") as endpoint:
        control = broker_control(endpoint)
        assert isinstance(control, ClusterControl) and endpoint.backend == "containers"
        names = list(endpoint.extra["containers"])
        assert len(names) == 3 and set(names) <= set(_ours())
        assert endpoint.extra["image"] == _images.choose("nats").image.name  # type: ignore[union-attr]
        assert all(control.node_pids(n) for n in range(3)), "each node's processes are this machine's pids"
        prov = NatsProvisioner()
        control.pause(2)
        with pytest.raises((OSError, ProbeError)):  # frozen: it holds its socket and answers nothing
            prov.probe(endpoint.nodes[2], 1.0)
        control.resume(2)
        assert prov.probe(endpoint.nodes[2], 5.0)
        history = run_node_fault("nats", {"jetstream": True}, R3, kill_then_start, tmp_path, cluster=endpoint)
        assert control.running()
        now = [name for n in range(3) for name in control.started[n].names()]  # type: ignore[attr-defined]
    assert seen["dead"] and seen["killed"] and not set(seen["again"]) & set(seen["killed"])
    assert history.leader in range(3)
    told = len(history.accepted | history.refused)
    assert told == 4000, f"{4000 - told} sends got no outcome ({history.notes})"
    check_no_acknowledged_loss(history, "nats JetStream R3 in containers, kill and restart of the stream leader")
    assert _gone(names + now) and set(_ours()) <= before and not _containers.live_names()
    for node in range(3):  # each node's output, where a local node's goes
        assert (tmp_path / "logs" / "nats-cluster" / f"node{node}" / "logs" / "nats-server.out").read_text()


def test_a_cluster_in_containers_interrupted_while_it_forms_leaves_no_container(monkeypatch: pytest.MonkeyPatch) -> None:
    require_backend("nats", "containers")
    before = set(_ours())

    def interrupted(self: NatsProvisioner, launch: Any, timeout: float) -> str:
        seen.extend(_ours())
        raise KeyboardInterrupt

    seen: list[str] = []
    monkeypatch.setattr(NatsProvisioner, "cluster_ready", interrupted)
    with pytest.raises(KeyboardInterrupt), provision("nats", "containers", shape=R3):
        pass
    assert len(set(seen) - before) == 3  # every node's container had started
    assert set(_ours()) <= before and not _containers.live_names()


def test_the_cluster_plan_is_the_same_on_both_backends_but_for_the_brokers_files(tmp_path: Path) -> None:
    """One plan: ``prepare_cluster_in_image`` gives the nodes the process backend would run, with the image's
    binary (no Docker needed)."""
    require_backend("nats", "process")  # the process plan needs nats-server here (in CI: a failure)
    prov = NatsProvisioner()
    here = prov.prepare_cluster(tmp_path / "here", R3, [NodeHost()] * 3)
    inside = prov.prepare_cluster_in_image(tmp_path / "inside", R3, [NodeHost()] * 3,
                                           ImageFiles({"binary": "/usr/local/bin/nats-server"}))
    for a, b in zip(here.nodes, inside.nodes, strict=True):
        ((cmd_here,), (cmd_inside,)) = a.commands, b.commands
        assert cmd_here.argv == (prov.find_binary(), "--config", str(tmp_path / "here" / a.name / "nats.conf"))
        assert cmd_inside.argv == ("/usr/local/bin/nats-server", "--config", str(tmp_path / "inside" / b.name / "nats.conf"))
        conf_here = (tmp_path / "here" / a.name / "nats.conf").read_text()
        conf_inside = (tmp_path / "inside" / b.name / "nats.conf").read_text()
        # the same settings; ports and the cluster's name are drawn for each cluster
        assert _shape_of(conf_here.replace("/here/", "/")) == _shape_of(conf_inside.replace("/inside/", "/"))


def _shape_of(config: str) -> str:
    import re

    return re.sub(r"mqbench-\w+", "NAME", re.sub(r":\d+", ":PORT", config))
