"""RabbitMQ: a private node (own node name, ports, mnesia dir and epmd), here or in an image."""

from __future__ import annotations

import os
import pwd
import shutil
import uuid
from pathlib import Path

from harness.brokers._base import Provisioner, which
from harness.brokers._ports import LOOPBACK
from harness.brokers._spec import Command, PinnedImage

IMAGE = "rabbitmq:3.13.7"
DEBIAN_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # the real script; /usr/sbin's wrapper redirects logs
SERVICE_USER = "rabbitmq"


class RabbitMQProvisioner(Provisioner):
    system = "rabbitmq"
    depth_note = ("RabbitMQ's management plugin is off and each rabbitmqctl call starts an Erlang VM (~1 s of "
                  "CPU on a 2-core host), which would distort the measurement; sent - received stands in")
    schemes = ("amqp", "amqps")
    install_hint = "install the Debian package rabbitmq-server (`make brokers`)"
    binaries = (DEBIAN_SERVER, "rabbitmq-server")
    url_template = "amqp://guest:guest@{host}:{port}/%2F"
    ports = 3  # node, Erlang distribution, our own epmd
    image = PinnedImage(IMAGE, {"binary": "rabbitmq-server", "epmd": "epmd"})  # both on the image's PATH
    ready_timeout = 90.0
    stop_grace = 15.0

    def process_unavailable_reason(self) -> str | None:
        reason = super().process_unavailable_reason()
        if reason is None and which("epmd", "/usr/lib/erlang/bin/epmd") is None:
            return f"Erlang's epmd was not found; {self.install_hint}"
        return reason

    def commands(self, server: str, workdir: Path, ports: list[int]) -> tuple[Command, ...]:
        epmd = self.path("epmd", lambda: which("epmd", "/usr/lib/erlang/bin/epmd"))
        if epmd is None:
            raise OSError(self.process_unavailable_reason())
        node_port, dist_port, epmd_port = ports
        (workdir / "mnesia").mkdir()
        (workdir / "logs" / "rabbit").mkdir(parents=True)
        (workdir / "enabled_plugins").write_text("[].\n")
        (workdir / "rabbitmq-env.conf").write_text("")  # keeps /etc/rabbitmq/rabbitmq-env.conf out
        user = _service_user() if self.files is None else None  # in a container: the container's user
        if user is not None:
            # The node runs as the service user; its directories must be its own (BROKERS.md).
            for path in [workdir, *workdir.rglob("*")]:
                shutil.chown(path, user, user)
        env = {
            "HOME": str(workdir),  # private Erlang cookie
            "ERL_EPMD_PORT": str(epmd_port),
            "RABBITMQ_NODENAME": f"mqbench-{uuid.uuid4().hex[:8]}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": LOOPBACK,
            "RABBITMQ_NODE_PORT": str(node_port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_MNESIA_BASE": str(workdir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(workdir / "logs" / "rabbit"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(workdir / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(workdir / "rabbitmq.pid"),
            "RABBITMQ_CONF_ENV_FILE": str(workdir / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(workdir / "rabbitmq"),  # no such file: built-in defaults
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(workdir / "advanced.config"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        }
        # Our own epmd on a private port: the node registers with it instead of spawning a shared daemon,
        # so it is ours to stop.
        return (
            Command("epmd", (epmd, "-port", str(epmd_port), "-address", LOOPBACK), env=env),
            Command("rabbitmq-server", (server,), env=env, user=user),
        )

    def probe(self, url: str, timeout: float) -> str:
        import pika

        params = pika.URLParameters(url)
        params.connection_attempts = 1
        params.socket_timeout = timeout
        params.blocked_connection_timeout = timeout
        params.stack_timeout = timeout
        conn = pika.BlockingConnection(params)
        try:
            version = conn._impl.server_properties.get("version", b"")
        finally:
            conn.close()
        return version.decode() if isinstance(version, bytes) else str(version)


def _service_user() -> str | None:
    """Run the node as ``rabbitmq`` when we are root and that user exists (the server refuses root)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        return None
    return SERVICE_USER
