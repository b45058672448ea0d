"""Apache RocketMQ 5.x: a private NameServer and Broker from the Maven Central jars that `make brokers`
fetches, here or in an image built with the same jars (`make images`). The official apache/rocketmq image
runs Java 8, which refuses the Java 17 flags these settings need, so none is pinned.

Clients are given the NameServer's address and learn the broker's from it, so the broker advertises
127.0.0.1 (``brokerIP1``; the default is the first non-loopback address); across hosts each client host's
loopback port leads to it through that host's route (``place``). The broker also opens
``listenPort - 2`` (its "fast" channel) and ``listenPort + 1`` (replication), so its port is chosen with
both neighbours free. The broker registers with the NameServer when it starts and then only every 30 s, so
its command waits until the NameServer listens before it starts the JVM. Readiness: the NameServer lists
the broker and the broker answers a runtime-info request, which carries its release.

Replicated (``prepare_cluster``, controller mode, RocketMQ 5's automatic master switching): each node runs a
NameServer with an embedded controller (the controllers form one DLedger Raft group) and one broker of the
broker group ``broker-a``; the controllers elect the group's master from its SyncStateSet and elect another
when it dies. Clients are given every NameServer. ``leader`` is the node of the master the NameServers name.
"""

from __future__ import annotations

import shlex
import shutil
import socket
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from harness.brokers import _jars
from harness.brokers._base import ProbeError, Provisioner, host_port
from harness.brokers._ports import LOOPBACK, free_port, free_ports
from harness.brokers._spec import ClusterLaunch, Command, Launch, NodeHost, NodeLaunch

if TYPE_CHECKING:
    from collections.abc import Sequence

    from harness.brokers._provision import Placement
    from harness.drivers.base import BrokerEndpoint, ClusterShape

# The broker refuses writes once the disk holding its store is this full (diskSpaceWarningLevelRatio).
DISK_FULL_RATIO = 0.90
# Small heaps for a 2-core machine; RocketMQ's own scripts ask for 4-8 GiB and pre-touch them.
NAMESRV_HEAP = ("-Xms256m", "-Xmx256m", "-Xmn128m")
BROKER_HEAP = ("-Xms768m", "-Xmx768m", "-Xmn256m", "-XX:MaxDirectMemorySize=512m")
JVM_COMMON = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true", *_jars.JAVA17_OPENS)
# A replicated group runs six JVMs on two shared cores: a NameServer with its embedded controller (a Raft log
# and a few remoting threads) and a broker per node, each broker under BROKERS.md's 384-512 MiB.
CLUSTER_NAMESRV_HEAP = ("-Xms192m", "-Xmx192m", "-Xmn96m")
CLUSTER_BROKER_HEAP = ("-Xms512m", "-Xmx512m", "-Xmn192m", "-XX:MaxDirectMemorySize=384m")
CLUSTER_READY_TIMEOUT = 240.0  # six JVMs on two cores, then a controller election and the slaves' catch-up
CONTROLLER_LOG_FILE = 64 * 1024 * 1024  # the controller's DLedger log file (default 1 GiB; it logs elections only)
REGISTER_PERIOD_MS = 10_000  # a broker re-registers with every NameServer this often (default 30 s, least 10 s)
GROUP = "broker-a"  # the one broker group every topic lives on
FLUSH_DISK_TYPE = "ASYNC_FLUSH"  # RocketMQ's default: a send is stored in the page cache, flushed in the background
SEND_QUEUE_WAIT_MS = 1000  # waitTimeMillsInSendQueue: see broker_config


class RocketMQProvisioner(_jars.JarsBroker, Provisioner):
    system = "rocketmq"
    advertises_address = True  # the name server names the broker to connect to
    schemes = ("rocketmq",)
    jars, display = "rocketmq", "Apache RocketMQ"
    ready_timeout = 150.0  # two JVMs on two cores: the broker registers 30-55 s after launch
    stop_grace = 20.0  # its SIGTERM shutdown takes 10 s or more
    depth_note = "the consumer group's lag is not sampled (one admin request per sample); sent - received stands in"

    def _java(self, workdir: Path) -> str:
        """The ``java`` to run the servers with here; OSError saying what to install, or that the disk is too
        full."""
        java = self.path("binary", self.find_binary)
        if java is None:
            raise OSError(self.process_unavailable_reason())
        full = disk_full_reason(workdir)
        if full:
            raise OSError(full)
        return java

    def launch(self, java: str, workdir: Path) -> Launch:
        full = disk_full_reason(workdir)
        if full:
            raise OSError(full)
        home, store = workdir / "home", workdir / "store"
        home.mkdir()
        namesrv_port = free_port()
        broker_port = broker_listen_port()
        namesrv = f"{LOOPBACK}:{namesrv_port}"
        (workdir / "namesrv.conf").write_text(f"listenPort={namesrv_port}\nbindAddress={LOOPBACK}\n")
        (workdir / "broker.conf").write_text(broker_config(LOOPBACK, broker_port, namesrv, store, bind=LOOPBACK))
        env = {"ROCKETMQ_HOME": str(home)}
        namesrv_argv, broker_argv = jvm_commands(java, home, workdir / "namesrv.conf", workdir / "broker.conf",
                                                 NAMESRV_HEAP, BROKER_HEAP, self.jar_path())
        return Launch(
            commands=(
                Command("rocketmq-namesrv", namesrv_argv, env=env),
                Command("rocketmq-broker", wait_then(LOOPBACK, namesrv_port, broker_argv), env=env),
            ),
            url=f"rocketmq://{namesrv}",
            workdir=workdir,
            ready_timeout=self.ready_timeout,
            stop_grace=self.stop_grace,
            version=_jars.pinned_version("rocketmq"),
        )

    def place(self, launch: Launch, placement: Placement) -> Launch:
        """The broker has one advertised address (``brokerIP1:listenPort``, loopback), which the NameServer
        hands to every client: on each client host that loopback port (and the fast channel's, listenPort - 2)
        is made to lead to the broker through the host's own route, so faults stay per client host."""
        if placement.mirror is None:
            return launch
        conf = dict(line.split("=", 1) for line in (launch.workdir / "broker.conf").read_text().splitlines()
                    if "=" in line)
        port, shown = int(conf["listenPort"]), host_port(launch.url, 9876)[1]
        for client in placement.clients:
            for mirrored in (port, port - 2):
                placement.mirror(client, shown, mirrored)
        return replace(launch, extra={**launch.extra, "routed": "the broker's loopback address mirrored on each client host"})

    # -- a replicated broker group (controller mode) --------------------------------------------------

    max_nodes = 3
    cluster_note = "one broker group of a master and its slaves, the master elected by controllers in the NameServers"

    def prepare_cluster(self, workdir: Path, shape: ClusterShape, hosts: Sequence[NodeHost]) -> ClusterLaunch:
        """``shape.nodes`` nodes, each a NameServer with an embedded controller (one DLedger Raft group over the
        nodes) and a broker of the one broker group ``broker-a``; the controllers elect its master and every
        broker keeps a copy (``replicas`` = ``nodes``); a send is stored once every broker of the group's
        SyncStateSet has it, and refused while that set is smaller than ``min_insync``."""
        java = self._java(workdir)
        check_cluster_shape(shape)
        n = shape.nodes
        namesrv_ports, controller_ports = free_ports(n), free_ports(n)
        broker_ports = broker_listen_ports(n, avoid=(*namesrv_ports, *controller_ports))
        namesrvs = [f"{h.address}:{p}" for h, p in zip(hosts, namesrv_ports, strict=True)]
        controllers = [f"{h.address}:{p}" for h, p in zip(hosts, controller_ports, strict=True)]
        brokers = [f"{h.address}:{p}" for h, p in zip(hosts, broker_ports, strict=True)]
        peers = ";".join(f"n{i}-{c}" for i, c in enumerate(controllers))
        nodes = []
        for i, host in enumerate(hosts[:n]):
            node = workdir / f"node{i}"
            home, store = node / "home", node / "store"
            home.mkdir(parents=True)
            (node / "namesrv.conf").write_text(settings_text({
                "listenPort": str(namesrv_ports[i]),
                "bindAddress": host.address,
                **controller_settings(i, peers, node / "controller"),
            }))
            (node / "broker.conf").write_text(broker_config(
                host.address, broker_ports[i], ";".join(namesrvs), store, bind=host.address,
                more=replica_settings(host.address, ";".join(controllers), shape.min_insync)))
            namesrv_argv, broker_argv = jvm_commands(java, home, node / "namesrv.conf", node / "broker.conf",
                                                     CLUSTER_NAMESRV_HEAP, CLUSTER_BROKER_HEAP, self.jar_path())
            env = {"ROCKETMQ_HOME": str(home)}
            nodes.append(NodeLaunch(
                name=f"node{i}",
                commands=(
                    Command("rocketmq-namesrv", namesrv_argv, env=env),
                    Command("rocketmq-broker", wait_then(host.address, namesrv_ports[i], broker_argv), env=env),
                ),
                url=f"rocketmq://{namesrvs[i]}",
                address=host.address,
            ))
        return ClusterLaunch(
            nodes=tuple(nodes),
            url="rocketmq://" + ";".join(namesrvs),
            workdir=workdir,
            ready_timeout=CLUSTER_READY_TIMEOUT,
            stop_grace=self.stop_grace,
            version=_jars.pinned_version("rocketmq"),
            extra={"brokers": ";".join(brokers), "controllers": ";".join(controllers)},
        )

    def cluster_ready(self, launch: ClusterLaunch, timeout: float) -> str:
        """Every NameServer lists every broker of the group, one of them as its master (the controllers
        elected it), and the master replicates to all the others (its HA status: every slave in sync)."""
        from harness.drivers.rocketmq_admin import broker_groups, broker_version, replication_status

        expected = set(launch.extra["brokers"].split(";"))
        masters = set()
        for node in launch.nodes:
            namesrv = node.url.split("://", 1)[1]
            group = broker_groups(namesrv, timeout).get(GROUP, {})
            if set(group.values()) != expected:
                raise ProbeError(f"the NameServer at {namesrv} lists {sorted(group.values())} of {sorted(expected)}")
            if 0 not in group:
                raise ProbeError(f"the NameServer at {namesrv} lists no master of {GROUP} yet")
            masters.add(group[0])
        if len(masters) != 1:
            raise ProbeError(f"the NameServers disagree on {GROUP}'s master: {sorted(masters)}")
        master = masters.pop()
        in_sync = replication_status(master, timeout)
        if in_sync < len(expected) - 1:
            raise ProbeError(f"the master {master} has {in_sync} of {len(expected) - 1} slaves in sync")
        return broker_version(master, timeout)

    def leader(self, endpoint: BrokerEndpoint, resource: str) -> int:
        """The node whose broker is the group's master now, as the NameServers say (every topic lives on the
        one broker group, so ``resource`` does not change the answer). ProbeError when no NameServer that
        answers names a master (mid-election)."""
        from harness.drivers.rocketmq_admin import group_masters

        brokers = str(endpoint.extra.get("brokers", "")).split(";")
        master = group_masters(endpoint.url.split("://", 1)[1], timeout=2.0).get(GROUP)
        if master is None:
            raise ProbeError(f"no NameServer names a master of {GROUP} (an election may be under way)")
        if master not in brokers:
            raise ProbeError(f"the master {master} of {GROUP} is not a broker of this cluster ({brokers})")
        return brokers.index(master)

    def probe(self, url: str, timeout: float) -> str:
        """Ready when the NameServer lists a broker and that broker answers; returns the broker's release."""
        from harness.drivers.rocketmq_admin import broker_addresses, broker_version

        host, port = host_port(url, 9876)
        brokers = broker_addresses(f"{host}:{port}", timeout)
        if not brokers:
            raise ProbeError("no broker has registered with the NameServer yet")
        return broker_version(brokers[0], timeout)


def broker_config(advertised: str, port: int, namesrv: str, store: Path, bind: str = "",
                  more: dict[str, str] | None = None) -> str:
    """The broker's settings; ``bind`` restricts its client listener to one address (a local process);
    ``more`` adds to them (a replica's)."""
    settings = {
        "brokerClusterName": "mqbench",
        "brokerName": GROUP,
        "brokerId": "0",
        "brokerIP1": advertised,
        "listenPort": str(port),
        "namesrvAddr": namesrv,
        "storePathRootDir": str(store),
        "storePathCommitLog": str(store / "commitlog"),
        "flushDiskType": FLUSH_DISK_TYPE,
        "autoCreateTopicEnable": "true",
        # A send request that waits longer than this in the broker's queue is answered "[TIMEOUT_CLEAN_QUEUE]
        # broker busy" (RocketMQ's default 200 ms). At 1,000 topics on two cores requests waited longer at the
        # start of a case (the client JVMs' JIT compilers took most of both cores there), and after the client's
        # three tries up to 220 producers of a run failed. A longer wait changes nothing while the broker keeps up; when it
        # does not, a send waits (and its latency shows it) instead of being refused.
        "waitTimeMillsInSendQueue": str(SEND_QUEUE_WAIT_MS),
    }
    if bind:
        settings["bindAddress"] = bind
    return settings_text({**settings, **(more or {})})


def settings_text(settings: dict[str, str]) -> str:
    """A RocketMQ properties file: one ``key=value`` a line."""
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def check_cluster_shape(shape: ClusterShape) -> None:
    """One sentence when ``shape`` is not a broker group this provisioner runs."""
    from harness.drivers.base import DriverError

    if shape.nodes != RocketMQProvisioner.max_nodes:
        # Two controllers lose their Raft majority with either node, and then no master is elected and the
        # SyncStateSet cannot shrink: the group would take no writes while a node is down.
        raise DriverError(f"a replicated rocketmq broker group runs on {RocketMQProvisioner.max_nodes} nodes (its "
                          f"controllers need a majority after losing one), not {shape.nodes}")
    if shape.replicas != shape.nodes:
        raise DriverError(f"rocketmq keeps one replica on each node of its broker group: replicas must be "
                          f"{shape.nodes} (the nodes), not {shape.replicas}")
    if not 1 <= shape.min_insync <= shape.replicas:
        raise DriverError(f"rocketmq's min in-sync replicas must be between 1 and {shape.replicas}, "
                          f"not {shape.min_insync}")


def controller_settings(index: int, peers: str, store: Path) -> dict[str, str]:
    """A NameServer's embedded controller: node ``index`` of the DLedger Raft group over ``peers``."""
    return {
        "enableControllerInNamesrv": "true",
        "controllerDLegerGroup": "mqbench",
        "controllerDLegerPeers": peers,
        "controllerDLegerSelfId": f"n{index}",
        "controllerStorePath": str(store),
        "enableElectUncleanMaster": "false",  # a new master only from the SyncStateSet: no acknowledged loss
        "notifyBrokerRoleChanged": "true",
        "mappedFileSize": str(CONTROLLER_LOG_FILE),
    }


def replica_settings(address: str, controllers: str, min_insync: int) -> dict[str, str]:
    """A broker at ``address`` of a group whose master the controllers at ``controllers`` elect."""
    return {
        "brokerIP2": address,  # where the slaves replicate from when this broker is the master (its HA port)
        "enableControllerMode": "true",
        "controllerAddr": controllers,
        "brokerId": "-1",  # the controller assigns it
        "brokerRole": "SLAVE",  # every broker starts as a slave until the controller elects the master
        "allAckInSyncStateSet": "true",
        "minInSyncReplicas": str(min_insync),
        "registerNameServerPeriod": str(REGISTER_PERIOD_MS),
    }


def jvm_commands(java: str, home: Path, namesrv_conf: Path, broker_conf: Path, namesrv_heap: tuple[str, ...],
                 broker_heap: tuple[str, ...], jars: str | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The argv of a NameServer and of a broker whose ``ROCKETMQ_HOME``, ``user.home`` and ``java.io.tmpdir``
    are ``home`` (RocketMQ logs under ${user.home}/logs/rocketmqlogs, copied into the run folder; each start
    also writes a self-signed certificate and RocksDB's native library to the temporary folder, which go with
    the node's folder instead of piling up in /tmp); ``jars``: the ``-cp`` (default: the jars here; an image's
    own folder when the launch is for an image)."""
    common = (*JVM_COMMON, f"-Duser.home={home}", f"-Drocketmq.home.dir={home}", f"-Djava.io.tmpdir={home}", "-cp",
              jars or _jars.classpath("rocketmq"))
    return ((java, *namesrv_heap, *common, "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(namesrv_conf)),
            (java, *broker_heap, *common, "org.apache.rocketmq.broker.BrokerStartup", "-c", str(broker_conf)))


def wait_then(host: str, port: int, argv: tuple[str, ...]) -> tuple[str, ...]:
    """``argv`` started once something listens on ``host:port`` (at most 120 s later): a broker registers
    with its NameServer when it starts, then only every ``registerNameServerPeriod``."""
    wait = f"for i in $(seq 1200); do (exec 3<>/dev/tcp/{host}/{port}) 2>/dev/null && break; sleep 0.1; done; "
    return ("bash", "-c", wait + "exec " + shlex.join(argv))


def broker_listen_port(attempts: int = 50) -> int:
    """A free port P whose neighbours P-2 (fast channel) and P+1 (replication) are free too."""
    return broker_listen_ports(1, attempts=attempts)[0]


def broker_listen_ports(count: int, avoid: Sequence[int] = (), attempts: int = 50) -> list[int]:
    """``count`` free ports P whose neighbours P-2 (fast channel) and P+1 (replication) are free too, none of
    the three ports shared between two of them or with ``avoid``."""
    taken = set(avoid)
    chosen: list[int] = []
    for _ in range(attempts * count):
        port = free_ports(1)[0]
        trio = {port - 2, port, port + 1}
        if not trio & taken and all(_bindable(p) for p in (port - 2, port + 1)):
            chosen.append(port)
            taken |= trio
            if len(chosen) == count:
                return chosen
    raise OSError(f"no {count} free ports with free neighbours for RocketMQ brokers after {attempts * count} tries")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def disk_full_reason(path: Path) -> str | None:
    """One sentence when the disk holding ``path`` is too full for RocketMQ to accept writes."""
    usage = shutil.disk_usage(path)
    used = (usage.total - usage.free) / usage.total if usage.total else 0.0
    if used >= DISK_FULL_RATIO:
        return (
            f"the disk holding {path} is {used:.0%} full and RocketMQ refuses writes from "
            f"{DISK_FULL_RATIO:.0%}; free some space first"
        )
    return None
