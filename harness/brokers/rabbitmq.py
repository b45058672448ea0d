"""RabbitMQ: a private node (own node name, ports, mnesia dir and epmd), here or in an image, or a private cluster
of such nodes.

A cluster (``prepare_cluster``): node i is ``mqbench-<tag>-<i>@<address>`` (long names: the address is an IP),
each with its own epmd, ports, mnesia and log directories and a private HOME holding the cluster's shared
Erlang cookie. The nodes find each other's distribution port through ``erlang/mqbench_epmd.erl`` (compiled
here with erlc), because nodes sharing one address cannot share one epmd port and still each own their epmd.
Node 0 forms the cluster alone and the others join it by classic-config peer discovery on their first boot; a
restarted node finds its membership in its own mnesia directory and rejoins with its data. Every node runs the
management plugin, which answers ``cluster_ready`` (which nodes are running members) and ``leader`` (the node
of a quorum queue's or stream's leader) over HTTP, without an Erlang VM per call as rabbitmqctl would need.
"""

from __future__ import annotations

import base64
import json
import os
import pwd
import secrets
import shutil
import subprocess
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from harness.brokers._base import ProbeError, Provisioner, which
from harness.brokers._ports import LOOPBACK, free_ports
from harness.brokers._spec import ClusterLaunch, Command, NodeHost, NodeLaunch, PinnedImage

if TYPE_CHECKING:
    from harness.drivers.base import BrokerEndpoint, ClusterShape

IMAGE = "rabbitmq:3.13.7"
DEBIAN_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # the real script; /usr/sbin's wrapper redirects logs
SERVICE_USER = "rabbitmq"
EPMD_MODULE = Path(__file__).parent / "erlang" / "mqbench_epmd.erl"
# Per cluster node: AMQP, Erlang distribution, the node's own epmd, the management plugin's HTTP API.
CLUSTER_PORTS = 4
# Three nodes share two cores with the clients: one scheduler (and one dirty CPU scheduler) per node, and no
# scheduler spins while it waits for work (RabbitMQ's advice for shared hosts; the default spins ~ms).
CLUSTER_ERL_ARGS = "+S 1:1 +SDcpu 1:1 +SDio 4 +sbwt none +sbwtdcpu none +sbwtdio none"
ADMIN_TIMEOUT = 10.0  # seconds an HTTP request to one node's management API may take


class RabbitMQProvisioner(Provisioner):
    system = "rabbitmq"
    depth_note = ("RabbitMQ's management plugin is off on a single node (a cluster has it, to find leaders) and "
                  "each rabbitmqctl call starts an Erlang VM (~1 s of CPU on a 2-core host), which would distort "
                  "the measurement; sent - received stands in")
    schemes = ("amqp", "amqps")
    install_hint = "install the Debian package rabbitmq-server (`make brokers`)"
    binaries = (DEBIAN_SERVER, "rabbitmq-server")
    url_template = "amqp://guest:guest@{host}:{port}/%2F"
    ports = 3  # node, Erlang distribution, our own epmd
    image = PinnedImage(IMAGE, {"binary": "rabbitmq-server", "epmd": "epmd"})  # both on the image's PATH
    ready_timeout = 90.0
    stop_grace = 15.0
    max_nodes = 5
    cluster_note = "classic-config peer discovery, quorum queues"

    def process_unavailable_reason(self) -> str | None:
        reason = super().process_unavailable_reason()
        if reason is None and which("epmd", "/usr/lib/erlang/bin/epmd") is None:
            return f"Erlang's epmd was not found; {self.install_hint}"
        return reason

    def commands(self, server: str, workdir: Path, ports: list[int]) -> tuple[Command, ...]:
        node_port, dist_port, epmd_port = ports
        env = _node_files(workdir, "[].")
        env.update({
            "ERL_EPMD_PORT": str(epmd_port),
            "RABBITMQ_NODENAME": f"mqbench-{uuid.uuid4().hex[:8]}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": LOOPBACK,
            "RABBITMQ_NODE_PORT": str(node_port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_CONFIG_FILE": str(workdir / "rabbitmq"),  # no such file: built-in defaults
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        })
        user = _own(workdir) if self.files is None else None  # in a container: the container's user
        epmd = self.path("epmd", _epmd) or _epmd()
        # Our own epmd on a private port: the node registers with it instead of spawning a shared daemon,
        # so it is ours to stop.
        return (
            Command("epmd", (epmd, "-port", str(epmd_port), "-address", LOOPBACK), env=env),
            Command("rabbitmq-server", (server,), env=env, user=user),
        )

    def probe(self, url: str, timeout: float) -> str:
        """An AMQP handshake with the first node of ``url`` (one URL, or a cluster's comma-separated list)
        that answers; its version."""
        import pika

        params = []
        for one in url.split(","):
            p = pika.URLParameters(one)
            p.connection_attempts = 1
            p.socket_timeout = timeout
            p.blocked_connection_timeout = timeout
            p.stack_timeout = timeout
            params.append(p)
        conn = pika.BlockingConnection(params)
        try:
            version = conn._impl.server_properties.get("version", b"")
        finally:
            conn.close()
        return version.decode() if isinstance(version, bytes) else str(version)

    # -- clusters ------------------------------------------------------------------------------------

    def prepare_cluster(self, workdir: Path, shape: ClusterShape, hosts: Sequence[NodeHost]) -> ClusterLaunch:
        server, erlc = self.find_binary(), which("erlc", "/usr/lib/erlang/bin/erlc")
        if server is None or erlc is None:
            raise OSError(self.process_unavailable_reason() or f"Erlang's compiler erlc was not found; {self.install_hint}")
        hosts = list(hosts)[: shape.nodes]
        ports = free_ports(CLUSTER_PORTS * len(hosts))
        tag = uuid.uuid4().hex[:8]
        names = [f"mqbench-{tag}-{i}" for i in range(len(hosts))]
        nodes = [f"{name}@{host.address}" for name, host in zip(names, hosts, strict=True)]
        code = workdir / "erlang"
        code.mkdir()
        _compile(erlc, code)
        cookie = secrets.token_hex(20).upper()
        dist_ports = " ".join(f"{name}={ports[CLUSTER_PORTS * i + 1]}" for i, name in enumerate(names))
        launches, management = [], []
        for i, host in enumerate(hosts):
            node_port, dist_port, epmd_port, http_port = ports[CLUSTER_PORTS * i : CLUSTER_PORTS * (i + 1)]
            home = workdir / f"node{i}"
            home.mkdir()
            env = _node_files(home, "[rabbitmq_management].")
            cookie_file = home / ".erlang.cookie"
            cookie_file.write_text(cookie)
            cookie_file.chmod(0o400)
            (home / "rabbitmq.conf").write_text(cluster_config(nodes, i, host.address, http_port))
            env.update({
                "ERL_EPMD_PORT": str(epmd_port),
                "MQBENCH_DIST_PORTS": dist_ports,
                "RABBITMQ_USE_LONGNAME": "true",
                "RABBITMQ_NODENAME": nodes[i],
                "RABBITMQ_NODE_IP_ADDRESS": host.address,
                "RABBITMQ_NODE_PORT": str(node_port),
                "RABBITMQ_DIST_PORT": str(dist_port),
                "RABBITMQ_CONFIG_FILE": str(home / "rabbitmq.conf"),
                "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": (
                    f"{CLUSTER_ERL_ARGS} -pa {code} -epmd_module mqbench_epmd "
                    f"-kernel inet_dist_use_interface {{{host.address.replace('.', ',')}}}"),
            })
            if i == 0:
                argv: tuple[str, ...] = (server,)
            else:
                argv = after_seed(server, hosts[0].address, ports[0])
            commands = (
                Command("epmd", (_epmd(), "-port", str(epmd_port), "-address", host.address), env=env),
                Command("rabbitmq-server", argv, env=env, user=_service_user()),
            )
            url = self.url_template.format(host=host.address, port=node_port)
            launches.append(NodeLaunch(f"node{i}", commands, url, host.address))
            management.append(f"http://{host.address}:{http_port}")
        _own(workdir)
        return ClusterLaunch(
            nodes=tuple(launches),
            url=",".join(n.url for n in launches),
            workdir=workdir,
            ready_timeout=180.0,
            stop_grace=self.stop_grace,
            extra={"management": ",".join(management), "node_names": ",".join(nodes)},
        )

    def cluster_ready(self, launch: ClusterLaunch, timeout: float) -> str:
        """Every node's management API lists every node as a running member, and every node answers AMQP."""
        names = launch.extra["node_names"].split(",")
        credentials = _credentials(launch.url)
        for api in launch.extra["management"].split(","):
            members = _admin_get(api, "/api/nodes?columns=name,running", credentials, timeout)
            running = {m.get("name") for m in members if m.get("running")}
            missing = [n for n in names if n not in running]
            if missing:
                raise ProbeError(f"{api} does not list {', '.join(missing)} as running members yet")
        versions = [self.probe(node.url, timeout) for node in launch.nodes]
        return next((v for v in versions if v), "")

    def leader(self, endpoint: BrokerEndpoint, resource: str) -> int:
        """The node of queue ``resource``'s leader (quorum queue, stream) or home (classic queue), asked of each
        node's management API in turn until one answers."""
        apis, names = endpoint.extra.get("management"), endpoint.extra.get("node_names")
        if not apis or not names:
            raise ProbeError("the RabbitMQ cluster's management API is not known (only clusters started here have one)")
        first = endpoint.url.split(",")[0]
        vhost = unquote(urlsplit(first).path[1:]) or "/"
        path = f"/api/queues/{quote(vhost, safe='')}/{quote(resource, safe='')}?disable_stats=true"
        failures, credentials = [], _credentials(first)
        for api in str(apis).split(","):
            try:
                queue = _admin_get(api, path, credentials, ADMIN_TIMEOUT)
                # A quorum queue's leader is "" while none is alive. A stream or a classic queue names the node
                # of its process (a stream's writer: its leader), alive or not: that node must be running.
                node = queue["leader"] if "leader" in queue else queue.get("node", "")
                if node and "leader" not in queue:
                    members = _admin_get(api, "/api/nodes?columns=name,running", credentials, ADMIN_TIMEOUT)
                    node = node if any(m.get("name") == node and m.get("running") for m in members) else ""
            except (OSError, ValueError) as exc:
                failures.append(f"{api}: {exc}")
                continue
            if not node:
                raise ProbeError(f"queue {resource!r} has no leader now (an election is under way)")
            nodes = str(names).split(",")
            if node not in nodes:
                raise ProbeError(f"queue {resource!r} is led by {node}, which is not a node of this cluster")
            return nodes.index(node)
        raise ProbeError(f"no node's management API answered for queue {resource!r}: {'; '.join(failures)}")


def cluster_config(nodes: Sequence[str], index: int, address: str, http_port: int) -> str:
    """rabbitmq.conf of node ``index`` of a cluster of ``nodes`` (their full names, in node order)."""
    # Node 0 lists no peer and so forms the cluster at once. The others list every node: each takes the
    # startup lock on the listed nodes (so they join one at a time) and retries until node 0 is up. A node that
    # listed node 0 would lock it while it waits, and node 0 would wait for that lock. Peer discovery runs only
    # on a node's first boot: a restarted node rejoins from its mnesia directory.
    peers = [] if index == 0 else list(nodes)
    lines = [
        "# guest from any address: clients reach nodes on other hosts (network namespaces) by their address",
        "loopback_users = none",
        "cluster_formation.peer_discovery_backend = classic_config",
        *(f"cluster_formation.classic_config.nodes.{k} = {node}" for k, node in enumerate(peers, 1)),
        "cluster_formation.discovery_retry_limit = 300",
        "cluster_formation.discovery_retry_interval = 500",
        "# the side of a partition without a majority of the nodes pauses (RabbitMQ's advice for 3+ nodes)",
        "cluster_partition_handling = pause_minority",
        f"management.tcp.ip = {address}",
        f"management.tcp.port = {http_port}",
        "# the management API answers cluster_ready and leader: no message rates, statistics every 30 s",
        "management.rates_mode = none",
        "collect_statistics_interval = 30000",
    ]
    return "\n".join(lines) + "\n"


def after_seed(server: str, address: str, port: int) -> tuple[str, ...]:
    """The argv that starts a joining node: on its first boot (an empty mnesia directory) only once node 0
    takes AMQP connections at ``address:port``, i.e. has finished booting. A node that joins while node 0
    still enables its feature flags makes both fail (seen here: ``schema_integrity_check_failed`` on the
    joiner, ``incompatible_feature_flags`` on node 0). A restarted node has its data and starts at once."""
    script = ('if [ -z "$(ls -A "$RABBITMQ_MNESIA_BASE")" ]; then '
              f'until (exec 3<>/dev/tcp/{address}/{port}) 2>/dev/null; do sleep 0.5; done; fi; exec "$0"')
    return ("bash", "-c", script, server)


def _node_files(home: Path, plugins: str) -> dict[str, str]:
    """The directories and files of one node under ``home``, and the environment naming them."""
    (home / "mnesia").mkdir()
    (home / "logs" / "rabbit").mkdir(parents=True)
    (home / "enabled_plugins").write_text(plugins + "\n")
    (home / "rabbitmq-env.conf").write_text("")  # keeps /etc/rabbitmq/rabbitmq-env.conf out
    return {
        "HOME": str(home),  # private Erlang cookie
        "RABBITMQ_MNESIA_BASE": str(home / "mnesia"),
        "RABBITMQ_LOG_BASE": str(home / "logs" / "rabbit"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"),
        "RABBITMQ_PID_FILE": str(home / "rabbitmq.pid"),
        "RABBITMQ_CONF_ENV_FILE": str(home / "rabbitmq-env.conf"),
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(home / "advanced.config"),
    }


def _compile(erlc: str, out: Path) -> None:
    """Compile ``mqbench_epmd.erl`` into ``out``; OSError with erlc's words when that fails."""
    done = subprocess.run([erlc, "-o", str(out), str(EPMD_MODULE)], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise OSError(f"erlc could not compile {EPMD_MODULE.name}: {(done.stdout + done.stderr).strip()}")


def _epmd() -> str:
    epmd = which("epmd", "/usr/lib/erlang/bin/epmd")
    if epmd is None:
        raise OSError(RabbitMQProvisioner().process_unavailable_reason())
    return epmd


def _own(workdir: Path) -> str | None:
    """Give ``workdir`` and everything under it to the service user the nodes run as (BROKERS.md: its
    directories must be its own); that user, or None when the nodes run as the current user."""
    user = _service_user()
    if user is not None:
        for path in [workdir, *workdir.rglob("*")]:
            shutil.chown(path, user, user)
    return user


def _service_user() -> str | None:
    """Run the node as ``rabbitmq`` when we are root and that user exists (the server refuses root)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        return None
    return SERVICE_USER


def _credentials(url: str) -> str:
    """The Basic authorization of the first AMQP URL in ``url`` (guest:guest when it names no user)."""
    parts = urlsplit(url.split(",")[0])
    user, password = unquote(parts.username or "guest"), unquote(parts.password or "guest")
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _admin_get(api: str, path: str, credentials: str, timeout: float) -> Any:
    """The JSON answer of the management API at ``api`` to GET ``path``."""
    request = urllib.request.Request(api + path, headers={"Authorization": credentials})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http to our own node
        return json.loads(response.read())
