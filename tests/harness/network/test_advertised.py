"""Brokers that tell clients an address to use next (Kafka, RocketMQ, Tansu) make it lead each client host through
its own route; the JVM worker runs network faults and refuses only kill/restart faults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.brokers import Placement, advertises_address
from harness.brokers._spec import Command, Launch
from harness.brokers.kafka import KafkaProvisioner, server_properties
from harness.brokers.rocketmq import RocketMQProvisioner, broker_config
from harness.brokers.tansu import TansuProvisioner
from harness.drivers.base import DriverError


def _placement(calls: list[tuple[Any, ...]]) -> Placement:
    def advertise(client: str | None, shown: int, own: int) -> str:
        calls.append((client, shown, own))
        return f"10.9.9.2:{40000 + own % 1000}"

    def mirror(client: str | None, shown: int, port: int) -> None:
        calls.append((client, shown, port))

    return Placement("server", (), lambda url: url, clients=(None, "prod", "cons"), advertise=advertise,
                     mirror=mirror)


def _settings(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_kafka_gets_one_listener_per_client_host_advertising_that_hosts_route(tmp_path: Path) -> None:
    (tmp_path / "server.properties").write_text(server_properties(9092, 9093, tmp_path / "data"))
    launch = Launch(commands=(Command("kafka", ("true",)),), url="kafka://127.0.0.1:9092", workdir=tmp_path)
    calls: list[tuple[Any, ...]] = []
    placed = KafkaProvisioner().place(launch, _placement(calls))
    props = _settings(tmp_path / "server.properties")
    assert [c[:2] for c in calls] == [(None, 9092), ("prod", 9092), ("cons", 9092)]
    own = {client: port for client, _, port in calls}
    assert len(set(own.values())) == 3 and 9092 not in own.values()
    listeners = props["listeners"].split(",")
    assert listeners[:2] == ["PLAINTEXT://127.0.0.1:9092", "CONTROLLER://127.0.0.1:9093"]
    assert listeners[2:] == [f"CLIENT{i}://127.0.0.1:{own[c]}" for i, c in enumerate((None, "prod", "cons"))]
    assert props["advertised.listeners"].split(",") == [
        "PLAINTEXT://127.0.0.1:9092", *(f"CLIENT{i}://10.9.9.2:{40000 + own[c] % 1000}"
                                       for i, c in enumerate((None, "prod", "cons")))]
    assert props["listener.security.protocol.map"].endswith("CLIENT0:PLAINTEXT,CLIENT1:PLAINTEXT,CLIENT2:PLAINTEXT")
    # the broker's own listeners are as they were
    assert props["inter.broker.listener.name"] == "PLAINTEXT" and props["controller.listener.names"] == "CONTROLLER"
    assert placed.extra["routed"] and placed.url == launch.url
    assert not advertises_address("kafka")


def test_rocketmq_mirrors_the_brokers_advertised_ports_on_every_client_host(tmp_path: Path) -> None:
    (tmp_path / "broker.conf").write_text(broker_config("127.0.0.1", 10911, "127.0.0.1:9876", tmp_path))
    launch = Launch(commands=(Command("b", ("true",)),), url="rocketmq://127.0.0.1:9876", workdir=tmp_path)
    calls: list[tuple[Any, ...]] = []
    placed = RocketMQProvisioner().place(launch, _placement(calls))
    assert calls == [(c, 9876, p) for c in (None, "prod", "cons") for p in (10911, 10909)]
    assert placed.extra["routed"] and not advertises_address("rocketmq")


def test_tansu_mirrors_its_one_advertised_port_on_every_client_host(tmp_path: Path) -> None:
    prov = TansuProvisioner()
    launch = Launch(commands=prov.commands("tansu", tmp_path, [9092]), url="kafka://127.0.0.1:9092", workdir=tmp_path)
    calls: list[tuple[Any, ...]] = []
    placed = prov.place(launch, _placement(calls))
    assert calls == [(c, 9092, 9092) for c in (None, "prod", "cons")]
    # the broker still listens on, and advertises, that loopback port: each client host's copy of it is a route
    argv = placed.commands[0].argv
    assert argv[argv.index("--advertised-listener-url") + 1] == "tcp://127.0.0.1:9092"
    assert placed.commands == launch.commands and placed.url == launch.url
    assert placed.extra["routed"] and not advertises_address("tansu")


def test_the_jvm_worker_refuses_kill_faults_only() -> None:
    from harness.runner.jvm import relay

    class Spec:
        kills, consumer_rate, resilient = True, None, True

    class Driver:
        def label(self) -> str:
            return "jeromq"

    with pytest.raises(DriverError, match="kill/restart faults"):
        relay(Spec(), None, Driver())  # type: ignore[arg-type]
