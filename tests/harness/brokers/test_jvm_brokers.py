"""Apache Kafka and Apache RocketMQ from Maven Central jars: their configuration (no broker needed), then
each started through the harness's provisioning, messages through it, and no `java` of ours left after a
run, after a failed start and after a Ctrl-C in the middle of `mqbench compare`.

The broker cases need `make brokers` (the jars and a Java runtime); without them they skip, except in CI
(``CI=true``), where they fail with the reason.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections import namedtuple
from pathlib import Path

import pytest

from harness.brokers import _base, _jars, kafka, provision, rocketmq
from harness.brokers._process import _descendants
from harness.brokers._registry import provisioner
from harness.brokers._spec import ImageFiles
from harness.drivers import driver_class
from harness.drivers import rocketmq as rocketmq_driver
from harness.drivers.base import DriverError, Pattern
from tests.harness.brokers.test_interrupt import _name, interrupt_mid_run, left_running
from tests.harness.drivers.conformance import check_pubsub, require_backend, run_flow

JVM_SYSTEMS = ("kafka", "rocketmq")
JVM_TEMP_FILES = ("keyutil_", "librocksdbjni")  # Netty's self-signed certificates, RocksDB's native library

# -- configuration (no broker) -------------------------------------------------------------------------


def test_kafka_node_is_one_loopback_kraft_node_with_single_replica_internal_topics(tmp_path: Path) -> None:
    props = dict(line.split("=", 1) for line in kafka.server_properties(41000, 41001, tmp_path).splitlines())
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:41001"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:41000,CONTROLLER://127.0.0.1:41001"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:41000"
    assert props["log.dirs"] == str(tmp_path)
    assert props["group.initial.rebalance.delay.ms"] == "0"
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor",
                "transaction.state.log.min.isr", "share.coordinator.state.topic.replication.factor"):
        assert props[key] == "1", key


def test_rocketmq_broker_advertises_loopback_and_names_its_nameserver(tmp_path: Path) -> None:
    conf = dict(line.split("=", 1) for line in rocketmq.broker_config("127.0.0.1", 42000, "127.0.0.1:42100",
                                                                     tmp_path).splitlines())
    assert conf["brokerIP1"] == "127.0.0.1" and conf["listenPort"] == "42000"
    assert conf["namesrvAddr"] == "127.0.0.1:42100"
    assert conf["storePathRootDir"] == str(tmp_path)
    assert conf["waitTimeMillsInSendQueue"] == "1000"  # a busy broker makes a send wait before it refuses it
    port = rocketmq.broker_listen_port()
    for neighbour in (port - 2, port, port + 1):
        with socket.socket() as s:
            s.bind(("127.0.0.1", neighbour))  # all three were free


def test_rocketmq_refuses_to_start_on_a_nearly_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(rocketmq.shutil, "disk_usage", lambda path: usage(100, 95, 5))
    reason = rocketmq.disk_full_reason(tmp_path)
    assert reason is not None and "95% full" in reason and "90%" in reason
    monkeypatch.setattr(rocketmq.shutil, "disk_usage", lambda path: usage(100, 50, 50))
    assert rocketmq.disk_full_reason(tmp_path) is None


def test_container_images_are_pinned_to_the_jars_release(tmp_path: Path) -> None:
    kafka = provisioner("kafka")
    assert kafka is not None and kafka.image is not None
    assert kafka.image.name == f"apache/kafka:{_jars.pinned_version('kafka')}"
    # in an image, the launch takes the image's java and jar folder; the settings are the process backend's
    launch = kafka.prepare_in_image(tmp_path, ImageFiles({"binary": "/usr/bin/java", "lib": "/opt/kafka/lib"}))
    script = launch.commands[-1].argv[-1]
    assert "/usr/bin/java" in script and "/opt/kafka/lib/*" in script and str(_jars.cache_dir()) not in script
    assert "group.initial.rebalance.delay.ms=0" in (tmp_path / "server.properties").read_text()
    rocketmq_prov = provisioner("rocketmq")
    assert rocketmq_prov is not None and rocketmq_prov.image is None  # Java 8 in apache/rocketmq: ours is built
    (tmp_path / "r").mkdir()
    launch = rocketmq_prov.prepare_in_image(tmp_path / "r", ImageFiles({"binary": "/usr/bin/java", "lib": "/opt/rocketmq/lib"}))
    assert launch.commands[0].argv[0] == "/usr/bin/java" and "/opt/rocketmq/lib/*" in launch.commands[0].argv
    assert "brokerIP1=127.0.0.1\n" in (tmp_path / "r" / "broker.conf").read_text()
    tansu = provisioner("tansu")
    assert tansu is not None and tansu.image is not None and tansu.image.name.startswith("ghcr.io/tansu-io/tansu:")


def test_missing_jars_or_java_say_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQBENCH_BROKERS_DIR", str(tmp_path))
    monkeypatch.setattr(_jars, "java", lambda: "/usr/bin/java")
    reason = provisioner("kafka").process_unavailable_reason()  # type: ignore[union-attr]
    assert reason is not None and "make brokers" in reason and str(tmp_path) in reason
    monkeypatch.setattr(_jars, "java", lambda: None)
    reason = provisioner("rocketmq").process_unavailable_reason()  # type: ignore[union-attr]
    assert reason is not None and "apt-get install maven openjdk-17-jre-headless" in reason
    # A download cut short (no .complete marker) is not used.
    lib = tmp_path / f"kafka-{_jars.pinned_version('kafka')}" / "lib"
    lib.mkdir(parents=True)
    assert _jars.lib_dir("kafka") is None
    (lib / ".complete").touch()
    assert _jars.lib_dir("kafka") == lib


def test_tansu_is_a_separate_system_from_apache_kafka() -> None:
    assert provisioner("tansu").system == "tansu" and provisioner("kafka").system == "kafka"  # type: ignore[union-attr]
    assert driver_class("tansu").name == "tansu" and driver_class("kafka").name == "kafka"


# -- real brokers ----------------------------------------------------------------------------------------


def _our_java() -> set[int]:
    """Java processes descended from this test process (the brokers it started)."""
    return {pid for pid in _descendants(os.getpid()) if _name(pid) == "java"}


def _java_left(pids: set[int], wait: float = 30.0) -> dict[int, str]:
    return {p: n for p, n in left_running(pids, wait).items() if n == "java"}


@pytest.mark.broker
@pytest.mark.parametrize("system", JVM_SYSTEMS)
def test_broker_starts_moves_messages_and_leaves_no_java(system: str, tmp_path: Path) -> None:
    require_backend(system, "process")
    before = _our_java()  # e.g. a broker the conformance suite keeps for its session
    temp_before = set(os.listdir(tempfile.gettempdir()))
    with provision(system, backend="process", logs_dir=tmp_path / "logs") as endpoint:
        assert endpoint.version == _jars.pinned_version(system)
        assert endpoint.extra["startup_s"] > 0
        started = _our_java() - before
        assert started, "no java process was started"
        delivery = run_flow(driver_class(system), {}, endpoint, Pattern.PUBSUB, 2, 500, 100)
        check_pubsub(delivery, ordered=True)
    assert not _java_left(started), "java processes left after the broker was stopped"
    assert list((tmp_path / "logs" / system).rglob("*.out")), "the broker's console log is not in logs_dir"
    # RocketMQ's servers write a self-signed certificate and RocksDB's library to java.io.tmpdir at each start;
    # only such names count (another program may use /tmp meanwhile). The Python client's log folder is the
    # driver's, kept on purpose (docs/brokers.md): on a machine where no run made it yet, this test does.
    ours = (*JVM_TEMP_FILES, f"mqbench-{system}-")
    new = set(os.listdir(tempfile.gettempdir())) - temp_before - {rocketmq_driver.CLIENT_HOME}
    left = {n for n in new if n.startswith(ours)}
    assert not left, f"the broker left files in {tempfile.gettempdir()}: {sorted(left)[:5]}"


@pytest.mark.broker
def test_failed_start_leaves_no_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kafka's client port is taken by someone else: the start fails with one sentence and no JVM stays."""
    require_backend("kafka", "process")
    before = _our_java()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        real = _base.free_ports
        monkeypatch.setattr(_base, "free_ports", lambda n: [taken.getsockname()[1], *real(n - 1)])
        with pytest.raises(DriverError, match="kafka broker failed to start") as failure:
            with provision("kafka", backend="process", logs_dir=tmp_path / "logs"):
                pass
    assert "\n" not in str(failure.value)
    assert not _our_java() - before


@pytest.mark.broker
@pytest.mark.parametrize("system", JVM_SYSTEMS)
def test_ctrl_c_during_a_run_leaves_no_java(system: str, tmp_path: Path) -> None:
    require_backend(system, "process")
    scenario = (f"name: long\npattern: queue\nmessage_sizes: [100]\nduration: 120s\nrate: 200\n"
                f"systems: [{system}]\n")
    _, seen = interrupt_mid_run(tmp_path, scenario, "java", wait=300)
    left = _java_left(seen)
    assert not left, f"java processes left after Ctrl-C: {sorted(left)}"
