"""NATS: nats-server with JetStream (file storage in the broker's private dir) on a loopback port, here or in
an image (the pinned official one, or one built here with the binary the process backend runs), or a cluster
of nodes joined by routes (JetStream clustered: a Raft meta group, and a Raft group per replicated stream).

Core NATS and JetStream are the same server: JetStream is always enabled, so a driver variant chooses
between core subjects (at-most-once) and streams. A cluster's nodes each have a ``server_name`` (``node<i>``,
JetStream's identity of the node: it must stay the same across a restart), a cluster name of their own run,
routes to every other node, and a monitoring port (``/jsz``, ``/routez``, ``/healthz``) that
``cluster_ready`` reads. Clients are given every node's URL, comma-separated. ``leader`` asks the cluster over
the NATS protocol itself (``$JS.API.STREAM.INFO.<stream>``: one socket, no client library).
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.brokers._base import ProbeError, Provisioner, command_output, host_port
from harness.brokers._ports import LOOPBACK, free_ports
from harness.brokers._spec import ClusterLaunch, Command, NodeHost, NodeLaunch, PinnedImage
from harness.brokers._wire import connect

if TYPE_CHECKING:
    from harness.drivers.base import BrokerEndpoint, ClusterShape

IMAGE = "nats:2.10.22"
MAX_PAYLOAD = 8 * 1024 * 1024  # the default 1 MiB would refuse the larger benchmark sizes
PORTS_PER_NODE = 3  # client, cluster (routes), monitoring (HTTP)
NODE_PROBE_TIMEOUT = 1.0  # seconds a node may take to greet ``leader``'s request (a paused node never does)


def server_config(listen: str, store_dir: str, name: str = "", advertise: str = "", http: str = "",
                  cluster: str = "", routes: Sequence[str] = (), cluster_name: str = "") -> str:
    """nats-server configuration shared by the local process, the container and the cluster's nodes:
    clients on ``listen`` (advertised as ``advertise``), JetStream with file storage in ``store_dir``, and
    for a cluster node its ``name``, monitoring on ``http``, routes on ``cluster`` to ``routes``."""
    lines = [f"listen: {listen}", f"max_payload: {MAX_PAYLOAD}"]
    if name:
        lines.insert(0, f'server_name: "{name}"')
    if advertise:
        lines.append(f"client_advertise: {advertise}")
    if http:
        lines.append(f"http: {http}")
    lines.append(f'jetstream {{\n  store_dir: "{store_dir}"\n}}')
    if cluster:
        routes_text = "".join(f"    nats-route://{r}\n" for r in routes)
        lines.append(f'cluster {{\n  name: "{cluster_name}"\n  listen: {cluster}\n  advertise: {cluster}\n'
                     f"  routes: [\n{routes_text}  ]\n}}")
    return "\n".join(lines) + "\n"


def node_urls(url: str) -> list[str]:
    """The URLs of a NATS endpoint: a cluster's is every node's URL, comma-separated."""
    return [u.strip() for u in url.split(",") if u.strip()]


class NatsProvisioner(Provisioner):
    system = "nats"
    depth_note = "queue depth is not sampled for NATS (core NATS keeps no queue; JetStream streams are not probed)"
    schemes = ("nats",)
    install_hint = ("run `make brokers` (it builds the pinned nats-server with Go into .brokers/bin) or install "
                    "the Debian package nats-server")
    binaries = ("nats-server",)

    url_template = "nats://{host}:{port}"
    image = PinnedImage(IMAGE, {"binary": "/nats-server"})  # a scratch image: the binary at its root
    max_nodes = 5
    cluster_note = "JetStream clustered: nodes joined by routes, Raft per replicated stream"

    def find_binary(self) -> str | None:
        """The pinned build in ``.brokers/bin`` (`make brokers`) first, then one on PATH (Debian's)."""
        from harness.brokers._jars import cache_dir

        built = cache_dir() / "bin" / self.binaries[0]
        return str(built) if built.is_file() and os.access(built, os.X_OK) else super().find_binary()

    def binary_version(self, binary: str) -> str:
        out = command_output(binary, "--version").split()  # "nats-server: v2.15.2"
        return out[-1].removeprefix("v") if out else ""

    def commands(self, binary: str, workdir: Path, ports: list[int]) -> tuple[Command, ...]:
        config = workdir / "nats.conf"
        config.write_text(server_config(f"{LOOPBACK}:{ports[0]}", str(workdir / "jetstream")))
        return (Command("nats-server", (binary, "--config", str(config))),)

    def probe(self, url: str, timeout: float) -> str:
        """The server greets every connection with ``INFO {json}``; PING must be answered with PONG. For a
        list of URLs (a cluster), the first node that answers."""
        errors: list[Exception] = []
        for one in node_urls(url):
            try:
                return str(_greet(one, timeout).get("version", ""))
            except (OSError, ProbeError) as exc:
                errors.append(exc)
        raise errors[-1] if errors else ProbeError(f"no NATS URL in {url!r}")

    # -- clusters ------------------------------------------------------------------------------------

    def prepare_cluster(self, workdir: Path, shape: ClusterShape, hosts: Sequence[NodeHost]) -> ClusterLaunch:
        binary = self.find_binary()
        if binary is None:
            raise OSError(self.process_unavailable_reason())
        ports = free_ports(PORTS_PER_NODE * shape.nodes)
        client, route, monitor = ports[0::3], ports[1::3], ports[2::3]
        addresses = [hosts[i].address for i in range(shape.nodes)]
        cluster_name = f"mqbench-{secrets.token_hex(4)}"  # a cluster of this run only
        nodes = []
        for i, address in enumerate(addresses):
            home = workdir / f"node{i}"
            home.mkdir(parents=True, exist_ok=True)
            config = home / "nats.conf"
            config.write_text(server_config(
                f"{address}:{client[i]}", str(home / "jetstream"), name=f"node{i}",
                advertise=f"{address}:{client[i]}", http=f"{address}:{monitor[i]}",
                cluster=f"{address}:{route[i]}", cluster_name=cluster_name,
                routes=[f"{a}:{route[j]}" for j, a in enumerate(addresses) if j != i],
            ))
            nodes.append(NodeLaunch(f"node{i}", (Command("nats-server", (binary, "--config", str(config))),),
                                    self.url_template.format(host=address, port=client[i]), address))
        return ClusterLaunch(
            nodes=tuple(nodes),
            url=",".join(n.url for n in nodes),
            workdir=workdir,
            ready_timeout=60.0,
            stop_grace=5.0,
            extra={"monitor": ",".join(f"http://{a}:{monitor[i]}" for i, a in enumerate(addresses)),
                   "cluster_name": cluster_name},
        )

    def cluster_ready(self, launch: ClusterLaunch, timeout: float) -> str:
        """Every node answers clients, has a route to every other node, and names the same JetStream meta
        leader (one of the nodes) in its ``/jsz``."""
        monitors = launch.extra["monitor"].split(",")
        size = len(launch.nodes)
        version = ""
        leaders = set()
        for node, monitor in zip(launch.nodes, monitors, strict=True):
            version = self.probe(node.url, timeout) or version
            routes = _http_json(f"{monitor}/routez", timeout).get("num_routes", 0)
            if routes < size - 1:
                raise ProbeError(f"{node.name} has {routes} of its {size - 1} routes")
            meta = _http_json(f"{monitor}/jsz", timeout).get("meta_cluster") or {}
            if not meta.get("leader"):
                raise ProbeError(f"{node.name} knows no JetStream meta leader yet")
            if meta.get("cluster_size") != size:
                raise ProbeError(f"{node.name}'s JetStream meta group has {meta.get('cluster_size')} of {size} nodes")
            leaders.add(meta["leader"])
        if len(leaders) != 1 or not leaders <= {n.name for n in launch.nodes}:
            raise ProbeError(f"the nodes do not agree on a JetStream meta leader: {sorted(leaders)}")
        return version

    def leader(self, endpoint: BrokerEndpoint, resource: str) -> int:
        """The node that leads stream ``resource``: ``cluster.leader`` of ``$JS.API.STREAM.INFO.<stream>``
        (asked of the first node that answers), mapped to a node by the ``server_name`` each node gives in
        its greeting. A single node leads its streams."""
        urls = list(endpoint.nodes) or node_urls(endpoint.url)
        info, _ = jetstream_request(urls, f"$JS.API.STREAM.INFO.{resource}", b"", NODE_PROBE_TIMEOUT * 3)
        if "error" in info:  # core NATS subjects have no stream, hence no leader
            raise ProbeError(f"stream {resource}: {info['error'].get('description', info['error'])} (only "
                             "JetStream streams have a leader)")
        leader = (info.get("cluster") or {}).get("leader")
        if len(urls) == 1:
            return 0
        if not leader:
            raise ProbeError(f"stream {resource} has no leader now (an election is under way)")
        for i, url in enumerate(urls):
            try:
                if _greet(url, NODE_PROBE_TIMEOUT).get("server_name") == leader:
                    return i
            except (OSError, ProbeError):
                continue
        raise ProbeError(f"stream {resource}'s leader {leader!r} is none of the nodes that answer")


def _greet(url: str, timeout: float) -> dict[str, Any]:
    """The server's INFO of the node at ``url``, after a PING it answered."""
    host, port = host_port(url, 4222)
    with connect(host, port, timeout) as sock:
        reader = _Reader(sock)
        info = reader.info()
        sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
        if not reader.line().startswith(b"PONG"):
            raise ProbeError("the server did not answer PING with PONG")
    return info


class _Reader:
    """Lines and counted payloads of the NATS protocol from a blocking socket, through one buffer."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.buf = sock, bytearray()

    def _fill(self) -> None:
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ProbeError("the server closed the connection")
        self.buf += chunk

    def line(self) -> bytes:
        while (end := self.buf.find(b"\r\n")) < 0:
            if len(self.buf) > 1 << 20:
                raise ProbeError("the server sent a line longer than 1 MiB")
            self._fill()
        out = bytes(self.buf[:end])
        del self.buf[: end + 2]
        return out

    def exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            self._fill()
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def info(self) -> dict[str, Any]:
        line = self.line()
        if not line.startswith(b"INFO "):
            raise ProbeError("the server did not greet with INFO")
        info: dict[str, Any] = json.loads(line[5:])
        return info


def jetstream_request(urls: Sequence[str], subject: str, body: bytes, timeout: float) -> tuple[dict[str, Any], str]:
    """The JSON answer to a request on ``subject`` (a JetStream API subject), asked of the first of ``urls``
    that answers within ``timeout`` seconds, and the ``server_name`` of that node. Raises ProbeError (no
    node answered, or nothing serves the subject: JetStream not ready)."""
    errors: list[Exception] = []
    for url in urls:
        try:
            return _request(url, subject, body, timeout)
        except (OSError, ProbeError) as exc:
            errors.append(exc)
    raise ProbeError(f"no NATS node answered {subject}: {errors[-1] if errors else 'no URL'}")


def _request(url: str, subject: str, body: bytes, timeout: float) -> tuple[dict[str, Any], str]:
    host, port = host_port(url, 4222)
    inbox = f"_INBOX.mqbench.{secrets.token_hex(8)}"
    with connect(host, port, timeout) as sock:
        reader = _Reader(sock)
        info = reader.info()
        sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'
                     + f"SUB {inbox} 1\r\nPUB {subject} {inbox} {len(body)}\r\n".encode() + body + b"\r\n")
        while True:
            line = reader.line()
            if line.startswith(b"PING"):
                sock.sendall(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                raise ProbeError(f"the server refused the request: {line.decode(errors='replace')}")
            elif line.startswith(b"MSG "):  # MSG <subject> <sid> <size>
                payload = reader.exact(int(line.split()[-1]) + 2)[:-2]
                return json.loads(payload), str(info.get("server_name", ""))
            elif line.startswith(b"HMSG "):  # HMSG <subject> <sid> <header size> <total size>: a status
                fields = line.split()
                data = reader.exact(int(fields[-1]) + 2)
                status = data[: int(fields[-2])].split(b"\r\n", 1)[0].decode(errors="replace")
                raise ProbeError(f"{subject}: {status} (nothing serves it: JetStream is not ready)")


def _http_json(url: str, timeout: float) -> dict[str, Any]:
    """A monitoring endpoint's JSON; ProbeError while the node does not serve it."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - our own node's http://
            data: dict[str, Any] = json.loads(response.read())
    except (urllib.error.URLError, ValueError) as exc:
        raise ProbeError(f"{url}: {exc}") from None
    return data

