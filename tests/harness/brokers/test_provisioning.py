"""Unit tests of broker provisioning: container configurations, backend choice, ports, teardown, logs."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from harness.brokers import _containers, _images, _process, _provision, choose_backend, free_ports, provision
from harness.brokers._base import Provisioner, redact
from harness.brokers._choice import BackendChoice
from harness.brokers._registry import PROVISIONERS, provisioner
from harness.brokers._spec import Command, ImageFiles
from harness.brokers.activemq import broker_xml
from harness.brokers.mqtt import broker_config, connect_packet
from harness.brokers.nats import NatsProvisioner
from harness.drivers.base import ClusterShape, DriverError
from tests.harness.drivers.conformance import require_backend

# -- images: the official ones pinned, ours built from the Dockerfiles, the launch inside them ----------------


def dockerfile_paths(name: str) -> dict[str, str]:
    """The ``org.mqbench.path.<role>`` labels of ``images/<name>/Dockerfile``."""
    text = (_images.IMAGES_DIR / name / "Dockerfile").read_text()
    return dict(re.findall(r"org\.mqbench\.path\.(\w+)=(\S+)", text))


@pytest.mark.parametrize("system", sorted(PROVISIONERS))
def test_official_images_are_pinned_and_say_where_the_broker_is(system: str) -> None:
    prov = provisioner(system)
    assert prov is not None
    if prov.image is None:
        assert system == "rocketmq"  # apache/rocketmq runs Java 8, which refuses our settings: ours is built
        return
    name, _, tag = prov.image.name.rpartition(":")
    assert name and tag and tag != "latest" and tag[0].isdigit(), prov.image.name
    assert prov.image.tag == tag and prov.image.paths["binary"]


@pytest.mark.parametrize("system", sorted(_images.RECIPES))
def test_every_broker_has_a_recipe_whose_paths_are_debians(system: str) -> None:
    """Our images install the process backend's Debian packages, so the paths their labels give are the ones
    those packages have on this machine (checked where the package is installed here)."""
    recipe = _images.RECIPES[system]
    paths = dockerfile_paths(recipe.name)
    assert "binary" in paths
    assert "ARG BASE\nFROM ${BASE}\n" in recipe.dockerfile.read_text()
    installed = recipe.package is not None and subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", recipe.package], capture_output=True, text=True).stdout.endswith(" installed")
    if installed:
        for role, path in paths.items():
            assert Path(path).exists(), f"{recipe.name}: {role} {path} is not where Debian's {recipe.package} puts it"


def test_debian_versions_make_honest_tags() -> None:
    assert _images.upstream("3.10.8-1.1+deb12u1") == "3.10.8"
    assert _images.upstream("5:7.0.15-1~deb12u10") == "7.0.15"
    assert _images.upstream("5.17.2+dfsg-2+deb12u1") == "5.17.2"
    assert _images.upstream("4.3.1") == "4.3.1"


@pytest.mark.parametrize("system", ["nats", "redis", "mqtt", "rabbitmq", "activemq", "tansu"])
def test_the_launch_in_an_image_is_the_process_launch_with_the_images_paths(system: str, tmp_path: Path) -> None:
    prov = provisioner(system)
    assert prov is not None
    recipe = _images.RECIPES[system]
    paths = dockerfile_paths(recipe.name)

    def copy_out(path: str, dest: Path) -> None:  # activemq's instance template, as the image holds it
        dest.mkdir(parents=True)
        (dest / "activemq.xml").write_text("<broker><transportConnectors></transportConnectors></broker>")
        assert path == paths["conf"]

    launch = prov.prepare_in_image(tmp_path, ImageFiles(paths, copy_out))
    parts = urlsplit(launch.url)
    assert parts.scheme == prov.schemes[0] and parts.hostname == "127.0.0.1" and parts.port
    broker = launch.commands[-1]
    assert broker.argv[0] == paths.get("java", paths["binary"]) and broker.user is None  # the container's user
    if system == "activemq":
        assert paths["binary"] in broker.argv and f"-Dactivemq.home={paths['home']}" in broker.argv
        assert f"stomp://127.0.0.1:{parts.port}" in (tmp_path / "conf" / "activemq.xml").read_text()
    if system == "rabbitmq":
        assert launch.commands[0].argv[0] == paths["epmd"]
    assert launch.ready_timeout == prov.ready_timeout and launch.stop_grace == prov.stop_grace


def test_activemq_instance_config_gets_only_a_loopback_stomp_connector() -> None:
    xml = "<broker><transportConnectors>\n<transportConnector name='openwire' uri='tcp://0.0.0.0:61616'/>\n</transportConnectors></broker>"
    out = broker_xml(xml, 42000)
    assert "stomp://127.0.0.1:42000" in out and "61616" not in out
    with pytest.raises(ValueError):
        broker_xml("<broker/>", 1)


def test_mosquitto_local_config_and_connect_packet() -> None:
    assert broker_config("1884 127.0.0.1").startswith("listener 1884 127.0.0.1\n")
    packet = connect_packet("id", "u", "p")
    assert packet[0] == 0x10 and packet[1] == len(packet) - 2
    assert packet[2:8] == b"\x00\x04MQTT" and packet[8] == 4 and packet[9] == 0x02 | 0x80 | 0x40


@pytest.mark.parametrize("system", sorted(PROVISIONERS))
def test_local_launch_is_built_from_the_declarations(system: str, tmp_path: Path) -> None:
    prov = provisioner(system)
    assert prov is not None
    if prov.process_unavailable_reason() is not None:
        pytest.skip(prov.process_unavailable_reason() or "")
    launch = prov.prepare_process(tmp_path)  # nothing is started
    parts = urlsplit(launch.url)
    assert parts.scheme == prov.schemes[0] and parts.hostname == "127.0.0.1" and parts.port
    # the broker proper is its binary, or java (-jar, or a shell that formats storage / waits first, then execs)
    argv = launch.commands[-1].argv
    assert argv[0] == prov.find_binary() or system == "activemq" or (
        system in ("kafka", "rocketmq") and argv[0] in ("/bin/sh", "bash") and "exec " in argv[-1]
    )
    assert launch.ready_timeout == prov.ready_timeout and launch.stop_grace == prov.stop_grace
    assert launch.workdir == tmp_path


def test_a_missing_binary_is_named_when_a_launch_is_prepared(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _binary(monkeypatch, False)
    with pytest.raises(OSError, match="nats-server"):
        provisioner("nats").prepare_process(tmp_path)  # type: ignore[union-attr]


def test_redact_hides_passwords() -> None:
    assert redact("amqp://guest:secret@host:5672/%2F") == "amqp://guest:***@host:5672/%2F"
    assert redact("nats://host:4222") == "nats://host:4222"


# -- backend choice ------------------------------------------------------------------------------


@pytest.fixture
def no_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_containers, "docker_available", lambda: False)


NATS_IMAGE = _images.Image("nats", "mqbench/nats:2.9.10-debian", "sha256:" + "ab" * 32, "built here",
                           {"binary": "/usr/sbin/nats-server"})


@pytest.fixture
def docker(monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine answers and the image is here."""
    monkeypatch.setattr(_containers, "docker_available", lambda: True)
    monkeypatch.setattr(_images, "choose", lambda system: _images.ImageChoice(NATS_IMAGE, "built here"))


@pytest.fixture
def docker_without_images(monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine answers, but no registry does and `make images` has not run."""
    monkeypatch.setattr(_containers, "docker_available", lambda: True)
    why = "no nats image: nats:2.10.22 cannot be pulled (no registry answers) and `make images` has not built it"
    monkeypatch.setattr(_images, "choose", lambda system: _images.ImageChoice(None, why))


def _binary(monkeypatch: pytest.MonkeyPatch, present: bool) -> None:
    cls = type(provisioner("nats"))
    monkeypatch.setattr(cls, "find_binary", lambda self: "/usr/sbin/nats-server" if present else None)


def test_auto_prefers_an_external_url(docker: None) -> None:
    choice = choose_backend("nats", url="nats://broker.example:4222")
    assert choice == BackendChoice("nats", "external", choice.reason) and "broker.example" in choice.reason


def test_auto_prefers_containers_when_docker_answers(docker: None, monkeypatch: pytest.MonkeyPatch) -> None:
    _binary(monkeypatch, True)
    choice = choose_backend("nats")
    assert choice.backend == "containers" and "mqbench/nats:2.9.10-debian (built here, id abababababab)" in choice.reason
    assert choose_backend("nats", "process").backend == "process"


def test_auto_runs_a_cluster_as_local_processes_even_when_containers_could_run_one_node(
    docker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _binary(monkeypatch, True)
    asked: list[int] = []

    @contextlib.contextmanager
    def cluster(prov: Provisioner, shape: ClusterShape, *args: object) -> Iterator[str]:
        asked.append(shape.nodes)
        yield "the process cluster"

    monkeypatch.setattr(_provision, "process_cluster", cluster)
    three = ClusterShape(nodes=3, replicas=3, min_insync=2)
    with provision("nats", "auto", shape=three) as endpoint:
        assert endpoint == "the process cluster" and asked == [3]  # type: ignore[comparison-overlap]
    with pytest.raises(DriverError, match="process backend only"), provision("nats", "containers", shape=three):
        pass  # asked for: checked, never substituted


def test_auto_uses_a_process_when_no_image_is_here_and_says_why_in_one_line(
    docker_without_images: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _binary(monkeypatch, True)
    choice = choose_backend("nats")
    assert choice.backend == "process" and "cannot be pulled" in choice.reason
    assert choice.note.startswith("nats: the process backend, not containers: no nats image") and "\n" not in choice.note
    explicit = choose_backend("nats", "containers")  # asked for: checked, never substituted
    assert explicit.backend is None and "make images" in explicit.reason
    _binary(monkeypatch, False)
    assert choose_backend("nats").backend is None


def test_auto_falls_back_to_a_local_process(no_docker: None, monkeypatch: pytest.MonkeyPatch) -> None:
    _binary(monkeypatch, True)
    assert choose_backend("nats").backend == "process"


def test_no_backend_names_what_to_install(no_docker: None, monkeypatch: pytest.MonkeyPatch) -> None:
    _binary(monkeypatch, False)
    choice = choose_backend("nats")
    assert choice.backend is None
    assert "nats-server" in choice.reason and "Docker" in choice.reason and "--broker nats=" in choice.reason
    assert choose_backend("nats", "process").backend is None
    assert "Docker" in choose_backend("nats", "containers").reason


def test_explicit_backends_are_checked_not_substituted(no_docker: None) -> None:
    assert choose_backend("nats", "external").backend is None  # no URL
    assert choose_backend("nats", "containers").backend is None
    assert choose_backend("nats", "process", url="nats://h:1").backend is None
    wrong = choose_backend("rabbitmq", url="nats://h:1")
    assert wrong.backend is None and "amqp://" in wrong.reason


def test_brokerless_and_unknown_systems() -> None:
    assert choose_backend("zmq").backend is None
    with pytest.raises(DriverError, match="unknown system"):
        choose_backend("nope")
    with pytest.raises(DriverError, match="backend"):
        choose_backend("nats", "kubernetes")


def test_provision_raises_the_reason_when_nothing_can_run(
    no_docker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    _binary(monkeypatch, False)
    with pytest.raises(DriverError, match="nats-server"), provision("nats"):
        pass


# -- ports ---------------------------------------------------------------------------------------


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports(5)
    assert len(set(ports)) == 5
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
    with pytest.raises(ValueError):
        free_ports(0)


# -- processes, teardown, logs -------------------------------------------------------------------


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:  # a zombie awaiting its reaper counts as gone
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


def test_stop_kills_the_whole_group_even_when_the_leader_ignores_sigterm(tmp_path: Path) -> None:
    script = "trap '' TERM; sleep 300 & echo $! > child.pid; wait"
    proc = _process.BrokerProcess(Command("stubborn", ("sh", "-c", script)), cwd=tmp_path, log_dir=tmp_path)
    # the shell creates child.pid before it writes the pid and its newline: wait for the whole line
    pid_file, deadline = tmp_path / "child.pid", time.monotonic() + 10
    while not (pid_file.exists() and pid_file.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.02)
    child = int(pid_file.read_text())
    proc.stop(grace=0.5)
    assert _gone(proc.pid) and _gone(child)
    assert proc.pid not in _process.live_pids()


def test_atexit_fallback_stops_what_is_still_running(tmp_path: Path) -> None:
    proc = _process.BrokerProcess(Command("sleeper", ("sleep", "300")), cwd=tmp_path, log_dir=tmp_path)
    assert proc.pid in _process.live_pids()
    _process.stop_all(grace=1.0)
    assert _gone(proc.pid) and not _process.live_pids()


def test_keyboard_interrupt_tears_a_real_broker_down(tmp_path: Path) -> None:
    require_backend("nats", "process")
    with pytest.raises(KeyboardInterrupt), provision("nats", backend="process") as endpoint:
        pids, workdir = list(endpoint.extra["pids"]), Path(endpoint.extra["workdir"])
        assert endpoint.version and endpoint.backend == "process"
        raise KeyboardInterrupt
    assert all(_gone(pid) for pid in pids)
    assert not workdir.exists()


def test_sigterm_to_our_group_never_reaches_the_broker_group() -> None:
    require_backend("nats", "process")
    with provision("nats", backend="process") as endpoint:
        (pid,) = endpoint.extra["pids"]
        assert os.getpgid(pid) == pid != os.getpgid(0)  # its own process group, stopped by us alone
    assert _gone(pid)


def _fake(script: str, answer_within: float = 5.0) -> Provisioner:
    """nats, except that its local "broker" is ``sh -c script`` and its probe never succeeds."""

    class Fake(NatsProvisioner):
        binaries = ("sh",)
        ready_timeout = answer_within
        stop_grace = 0.5

        def commands(self, binary: str, workdir: Path, ports: list[int]) -> tuple[Command, ...]:
            return (Command("fake", (binary, "-c", script)),)

        def probe(self, url: str, timeout: float) -> str:
            raise ConnectionRefusedError("nothing listens")

    return Fake()


def _use_fake(monkeypatch: pytest.MonkeyPatch, fake: Provisioner) -> None:
    monkeypatch.setattr(_provision, "provisioner", lambda system: fake)
    monkeypatch.setattr(
        _provision, "choose_backend", lambda *a, **k: BackendChoice("nats", "process", "test")
    )


def test_failed_start_copies_logs_and_says_where(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _use_fake(monkeypatch, _fake("echo boom-marker; exit 3"))
    with pytest.raises(DriverError) as err, provision("nats", logs_dir=tmp_path):
        pass
    message = str(err.value)
    assert "exited with status 3" in message and str(tmp_path / "nats") in message
    assert "boom-marker" in (tmp_path / "nats" / "logs" / "fake.out").read_text()


def test_a_broker_that_never_answers_is_stopped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _use_fake(monkeypatch, _fake("exec sleep 300", answer_within=1.0))
    before = set(_process.live_pids())
    with pytest.raises(DriverError, match="did not answer within 1 s"), provision("nats", logs_dir=tmp_path):
        pass
    assert set(_process.live_pids()) == before


def test_external_broker_that_does_not_answer(no_docker: None) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        with pytest.raises(DriverError, match=f"127.0.0.1:{port} does not answer"):
            with provision("nats", url=f"nats://127.0.0.1:{port}"):
                pass


def test_external_broker_is_used_as_is(tmp_path: Path) -> None:
    require_backend("nats", "process")
    with provision("nats", backend="process") as local:
        with provision("nats", url=local.url) as external:
            assert external.backend == "external" and external.url == local.url
            assert external.version == local.version
        (pid,) = local.extra["pids"]
        assert not _gone(pid)  # the external path never stops anything


def test_kafka_cluster_ids_never_start_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-storage takes an id starting with '-' for an option; the generator skips such ids."""
    import uuid

    from harness.brokers import kafka

    # the first UUID encodes to '-' + ..., the second to an ordinary id
    dashed, plain = uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(bytes=b"\x10" * 16)
    made = iter([dashed, plain])
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: next(made))
    cluster_id = kafka.new_cluster_id()
    assert not cluster_id.startswith("-")
    assert cluster_id == kafka.base64.urlsafe_b64encode(plain.bytes).rstrip(b"=").decode()
