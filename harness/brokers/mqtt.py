"""MQTT: Mosquitto 2 with anonymous access on one loopback listener, here or in an image."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from urllib.parse import unquote, urlsplit

from harness.brokers._base import ProbeError, Provisioner, command_output, host_port
from harness.brokers._ports import LOOPBACK
from harness.brokers._spec import Command, PinnedImage
from harness.brokers._wire import connect, recv_exact

IMAGE = "eclipse-mosquitto:2.0.20"


def broker_config(listener: str) -> str:
    """mosquitto.conf of a private broker.

    Beyond anonymous access: QoS 1/2 queues and in-flight windows are raised from 1000/20 so the broker's
    defaults do not drop or throttle a benchmark's bursts, and TCP_NODELAY is on as in the other brokers.
    """
    return (
        f"listener {listener}\n"
        "allow_anonymous true\n"
        "persistence false\n"
        "max_queued_messages 1000000\n"
        "max_inflight_messages 1000\n"
        "set_tcp_nodelay true\n"
        "log_dest stderr\n"
        "log_type error\nlog_type warning\nlog_type notice\n"
    )


class MosquittoProvisioner(Provisioner):
    cluster_note = "Mosquitto has no clustering"
    system = "mqtt"
    depth_note = "Mosquitto's $SYS topics report totals, not per-queue depth; sent - received stands in"
    schemes = ("mqtt", "tcp")
    install_hint = "install the Debian package mosquitto (`make brokers`)"
    binaries = ("mosquitto", "/usr/sbin/mosquitto")
    url_template = "mqtt://{host}:{port}"
    image = PinnedImage(IMAGE, {"binary": "/usr/sbin/mosquitto"})

    def commands(self, binary: str, workdir: Path, ports: list[int]) -> tuple[Command, ...]:
        config = workdir / "mosquitto.conf"
        config.write_text(broker_config(f"{ports[0]} {LOOPBACK}"))
        return (Command("mosquitto", (binary, "-c", str(config))),)

    def binary_version(self, binary: str) -> str:
        match = re.search(r"mosquitto version (\S+)", command_output(binary, "-h"))
        return match.group(1) if match else ""

    def probe(self, url: str, timeout: float) -> str:
        """MQTT 3.1.1 CONNECT (clean session); ready when CONNACK accepts it."""
        host, port = host_port(url, 1883)
        parts = urlsplit(url)
        with connect(host, port, timeout) as sock:
            sock.sendall(
                connect_packet(f"mqbench-probe-{uuid.uuid4().hex[:8]}", parts.username, parts.password)
            )
            header = recv_exact(sock, 4)
            if header[0] != 0x20 or header[3] != 0:
                raise ProbeError(f"CONNACK refused the connection (return code {header[3]})")
            sock.sendall(b"\xe0\x00")  # DISCONNECT
        return ""  # MQTT does not tell the broker's version in its handshake


def connect_packet(client_id: str, username: str | None = None, password: str | None = None) -> bytes:
    """An MQTT 3.1.1 CONNECT packet with the clean-session flag and a 30 s keep-alive."""

    def field(text: str) -> bytes:
        raw = unquote(text).encode()
        return len(raw).to_bytes(2, "big") + raw

    flags = 0x02
    payload = field(client_id)
    if username is not None:
        flags |= 0x80
        payload += field(username)
        if password is not None:
            flags |= 0x40
            payload += field(password)
    variable = field("MQTT") + bytes([4, flags]) + (30).to_bytes(2, "big")
    body = variable + payload
    return b"\x10" + _remaining_length(len(body)) + body


def _remaining_length(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)

