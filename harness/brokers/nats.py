"""NATS: nats-server (core NATS, no JetStream) on a loopback port, here or in an image."""

from __future__ import annotations

import json
from pathlib import Path

from harness.brokers._base import ProbeError, Provisioner, host_port
from harness.brokers._ports import LOOPBACK
from harness.brokers._spec import Command, PinnedImage
from harness.brokers._wire import connect, recv_until

IMAGE = "nats:2.10.22"
MAX_PAYLOAD = 8 * 1024 * 1024  # the default 1 MiB would refuse the larger benchmark sizes


def server_config(listen: str) -> str:
    """nats-server configuration."""
    return f"listen: {listen}\nmax_payload: {MAX_PAYLOAD}\n"


class NatsProvisioner(Provisioner):
    system = "nats"
    depth_note = "core NATS keeps no queue (messages in flight only)"
    schemes = ("nats",)
    install_hint = "install the Debian package nats-server (`make brokers`)"
    binaries = ("nats-server",)
    url_template = "nats://{host}:{port}"
    image = PinnedImage(IMAGE, {"binary": "/nats-server"})  # a scratch image: the binary at its root

    def commands(self, binary: str, workdir: Path, ports: list[int]) -> tuple[Command, ...]:
        config = workdir / "nats.conf"
        config.write_text(server_config(f"{LOOPBACK}:{ports[0]}"))
        return (Command("nats-server", (binary, "--config", str(config))),)

    def probe(self, url: str, timeout: float) -> str:
        """The server greets every connection with ``INFO {json}``; PING must be answered with PONG."""
        host, port = host_port(url, 4222)
        with connect(host, port, timeout) as sock:
            line = recv_until(sock, b"\r\n")
            if not line.startswith(b"INFO "):
                raise ProbeError("the server did not greet with INFO")
            info = json.loads(line[5:])
            sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
            if not recv_until(sock, b"\r\n").startswith(b"PONG"):
                raise ProbeError("the server did not answer PING with PONG")
        return str(info.get("version", ""))
