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
from harness.brokers._spec import Command, Launch

if TYPE_CHECKING:
    from harness.brokers._provision import Placement

# The broker refuses writes once the disk holding its store is this full (diskSpaceWarningLevelRatio).
DISK_FULL_RATIO = 0.90
# Small heaps for a 2-core machine; RocketMQ's own scripts ask for 4-8 GiB and pre-touch them.
NAMESRV_HEAP = ("-Xms256m", "-Xmx256m", "-Xmn128m")
BROKER_HEAP = ("-Xms768m", "-Xmx768m", "-Xmn256m", "-XX:MaxDirectMemorySize=512m")
JVM_COMMON = ("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true", *_jars.JAVA17_OPENS)


class RocketMQProvisioner(_jars.JarsBroker, Provisioner):
    system = "rocketmq"
    advertises_address = True  # the name server names the broker to connect to
    schemes = ("rocketmq",)
    jars, display = "rocketmq", "Apache RocketMQ"
    ready_timeout = 150.0  # two JVMs on two cores: the broker registers 30-55 s after launch
    stop_grace = 20.0  # its SIGTERM shutdown takes 10 s or more
    depth_note = "the consumer group's lag is not sampled (one admin request per sample); sent - received stands in"

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
        # user.home: RocketMQ logs under ${user.home}/logs/rocketmqlogs, copied into the run folder.
        jvm = (java, *JVM_COMMON, f"-Duser.home={home}", f"-Drocketmq.home.dir={home}", "-cp", self.jar_path())
        namesrv_argv = (*jvm[:1], *NAMESRV_HEAP, *jvm[1:], "org.apache.rocketmq.namesrv.NamesrvStartup",
                        "-c", str(workdir / "namesrv.conf"))
        broker_argv = (*jvm[:1], *BROKER_HEAP, *jvm[1:], "org.apache.rocketmq.broker.BrokerStartup",
                       "-c", str(workdir / "broker.conf"))
        wait = (f"for i in $(seq 1200); do (exec 3<>/dev/tcp/{LOOPBACK}/{namesrv_port}) 2>/dev/null && break; "
                "sleep 0.1; done; ")
        return Launch(
            commands=(
                Command("rocketmq-namesrv", namesrv_argv, env=env),
                Command("rocketmq-broker", ("bash", "-c", wait + "exec " + shlex.join(broker_argv)), env=env),
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

    def probe(self, url: str, timeout: float) -> str:
        """Ready when the NameServer lists a broker and that broker answers; returns the broker's release."""
        from harness.drivers.rocketmq import broker_addresses, broker_version

        host, port = host_port(url, 9876)
        brokers = broker_addresses(f"{host}:{port}", timeout)
        if not brokers:
            raise ProbeError("no broker has registered with the NameServer yet")
        return broker_version(brokers[0], timeout)


def broker_config(advertised: str, port: int, namesrv: str, store: Path, bind: str = "") -> str:
    """The broker's settings; ``bind`` restricts its client listener to one address (a local process)."""
    settings = {
        "brokerClusterName": "mqbench",
        "brokerName": "broker-a",
        "brokerId": "0",
        "brokerIP1": advertised,
        "listenPort": str(port),
        "namesrvAddr": namesrv,
        "storePathRootDir": str(store),
        "storePathCommitLog": str(store / "commitlog"),
        "flushDiskType": "ASYNC_FLUSH",
        "autoCreateTopicEnable": "true",
    }
    if bind:
        settings["bindAddress"] = bind
    return "".join(f"{k}={v}\n" for k, v in settings.items())


def broker_listen_port(attempts: int = 50) -> int:
    """A free port P whose neighbours P-2 (fast channel) and P+1 (replication) are free too."""
    for _ in range(attempts):
        port = free_ports(1)[0]
        if all(_bindable(p) for p in (port - 2, port + 1)):
            return port
    raise OSError(f"no free port with free neighbours for the RocketMQ broker after {attempts} tries")


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
