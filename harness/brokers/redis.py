"""Redis: redis-server without snapshots on a loopback port, here or in an image.

Append-only persistence is off at start; the redis driver's ``aof`` option turns it on with CONFIG SET.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from harness.brokers._base import Provisioner
from harness.brokers._ports import LOOPBACK
from harness.brokers._spec import Command, PinnedImage

IMAGE = "redis:7.2.5"
COMMON_ARGS = ("--save", "", "--appendonly", "no", "--protected-mode", "no")


class RedisProvisioner(Provisioner):
    cluster_note = "Redis replication (a primary, replicas and WAIT) is not run by mqbench yet"
    system = "redis"
    schemes = ("redis", "rediss")
    install_hint = "install the Debian package redis-server (`make brokers`)"
    binaries = ("redis-server",)
    url_template = "redis://{host}:{port}/0"
    image = PinnedImage(IMAGE, {"binary": "redis-server"})
    depth_note = ""  # sampled for queues (consumer groups); pub/sub streams have no group to ask

    def queue_depth(self, url: str, queues: Sequence[str]) -> Callable[[], float] | None:
        """Messages the consumer groups of the queues' streams still have to deliver or have acknowledged
        (lag + pending)."""
        import redis

        client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)

        def depth() -> float:
            total = 0.0
            for key in queues:
                for group in client.xinfo_groups(key):
                    lag = group.get("lag")
                    total += float(lag if lag is not None else 0) + float(group.get("pending", 0))
            return total

        return depth

    def commands(self, binary: str, workdir: Path, ports: list[int]) -> tuple[Command, ...]:
        data = workdir / "data"
        data.mkdir()
        local = ("--port", str(ports[0]), "--bind", LOOPBACK, "--dir", str(data), "--daemonize", "no")
        return (Command("redis-server", (binary, *local, "--logfile", "", *COMMON_ARGS)),)

    def restart_state(self, url: str) -> object:
        """The append-only settings in force (the driver's ``aof`` option turns them on at run time)."""
        import redis

        client = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0, decode_responses=True)
        try:
            return client.config_get("append*")
        finally:
            client.close()

    def restart_command(self, command: Command, state: object) -> Command:
        """Restart with the AOF on when it was on, so the data written to it is loaded again."""
        if isinstance(state, dict) and state.get("appendonly") == "yes":
            fsync = str(state.get("appendfsync") or "always")
            return Command(command.name, (*command.argv, "--appendonly", "yes", "--appendfsync", fsync),
                           command.env, command.user)
        return command

    def probe(self, url: str, timeout: float) -> str:
        import redis

        client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        try:
            info = client.info("server")
        finally:
            client.close()
        return str(info.get("redis_version", ""))
