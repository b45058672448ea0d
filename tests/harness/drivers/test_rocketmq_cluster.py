"""RocketMQ's replicated broker group (controller mode): the generated configuration and the consumer's
served-check without a broker; then a real three-node group through ``provision``: it forms, ``leader`` names
the master, a kill of the master mid-flow loses no acknowledged (sync-sent) message while the controllers
elect another master, the killed node rejoins when started again, and nothing is left running.

librocketmq has aborted the process in client shutdowns, so the flow runs in a child process (as the
runner's workers do); the cluster is provisioned there too, and if that process dies the test stops the
JVMs it reported, by pid."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from harness.brokers import _jars, rocketmq
from harness.brokers._spec import NodeHost
from harness.drivers import rocketmq as driver
from harness.drivers import rocketmq_admin as admin
from harness.drivers.base import BrokerEndpoint, ClusterShape, DriverError
from tests.harness.brokers.test_cluster import _alive

SHAPE = ClusterShape(nodes=3, replicas=3, min_insync=2)


def _conf(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


@pytest.fixture
def jars(monkeypatch: pytest.MonkeyPatch) -> None:
    """Configuration only: no Java or jars needed."""
    monkeypatch.setattr(rocketmq.RocketMQProvisioner, "find_binary", lambda self: "/usr/bin/java")
    monkeypatch.setattr(_jars, "classpath", lambda name: "/jars/*")


def test_each_node_listens_on_and_advertises_its_own_address(tmp_path: Path, jars: None) -> None:
    hosts = [NodeHost(address=f"10.9.0.{i + 2}", host=f"n{i}") for i in range(3)]
    launch = rocketmq.RocketMQProvisioner().prepare_cluster(tmp_path, SHAPE, hosts)
    namesrvs = [n.url.removeprefix("rocketmq://") for n in launch.nodes]
    assert launch.url == "rocketmq://" + ";".join(namesrvs)
    assert [n.address for n in launch.nodes] == [h.address for h in hosts]
    brokers = launch.extra["brokers"].split(";")
    controllers = launch.extra["controllers"].split(";")
    ports = [int(a.rsplit(":", 1)[1]) for a in namesrvs + brokers + controllers]
    assert len(set(ports)) == 9
    broker_ports = [int(b.rsplit(":", 1)[1]) for b in brokers]
    for p in broker_ports:  # the fast channel (P-2) and the HA port (P+1) of one broker clash with nothing
        assert not {p - 2, p + 1} & (set(ports) - {p})
    for i, (node, host) in enumerate(zip(launch.nodes, hosts, strict=True)):
        ns, broker = _conf(tmp_path / node.name / "namesrv.conf"), _conf(tmp_path / node.name / "broker.conf")
        assert "127.0.0.1" not in (tmp_path / node.name / "namesrv.conf").read_text()
        assert "127.0.0.1" not in (tmp_path / node.name / "broker.conf").read_text()
        assert ns["bindAddress"] == host.address and namesrvs[i] == f"{host.address}:{ns['listenPort']}"
        assert ns["enableControllerInNamesrv"] == "true" and ns["controllerDLegerSelfId"] == f"n{i}"
        assert ns["controllerDLegerPeers"] == ";".join(f"n{j}-{c}" for j, c in enumerate(controllers))
        assert ns["enableElectUncleanMaster"] == "false"
        assert broker["brokerIP1"] == broker["brokerIP2"] == broker["bindAddress"] == host.address
        assert brokers[i] == f"{host.address}:{broker['listenPort']}"
        assert broker["namesrvAddr"] == ";".join(namesrvs) and broker["controllerAddr"] == ";".join(controllers)
        assert broker["brokerName"] == rocketmq.GROUP and broker["enableControllerMode"] == "true"
        assert broker["allAckInSyncStateSet"] == "true" and broker["minInSyncReplicas"] == "2"
        assert broker["flushDiskType"] == "ASYNC_FLUSH"
        assert broker["storePathRootDir"] == str(tmp_path / node.name / "store")
        assert ns["controllerStorePath"] == str(tmp_path / node.name / "controller")
        # heaps sized for two cores shared by six JVMs, and the broker waits for its own NameServer
        namesrv_cmd, broker_cmd = node.commands
        assert "-Xmx192m" in namesrv_cmd.argv and "-Xmx512m" in broker_cmd.argv[-1]
        assert f"/dev/tcp/{host.address}/{ns['listenPort']}" in broker_cmd.argv[-1]


@pytest.mark.parametrize(("shape", "says"), [
    (ClusterShape(3, 2, 2), "replicas must be 3"),
    (ClusterShape(4, 4, 2), "runs on 3 nodes"),
    (ClusterShape(2, 2, 2), "runs on 3 nodes"),
    (ClusterShape(3, 3, 4), "between 1 and 3"),
])
def test_a_shape_the_broker_group_cannot_take_is_refused_in_one_sentence(
    tmp_path: Path, jars: None, shape: ClusterShape, says: str
) -> None:
    with pytest.raises(DriverError, match=says):
        rocketmq.RocketMQProvisioner().prepare_cluster(tmp_path, shape, [NodeHost() for _ in range(shape.nodes)])


def test_the_nameservers_fastjson_cluster_info_is_read_per_group(monkeypatch: pytest.MonkeyPatch) -> None:
    body = ('{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.2:301",2:"10.0.0.3:302",-1:"x:1"},'
            '"brokerName":"broker-a","cluster":"mqbench"}},"clusterAddrTable":{"mqbench":["broker-a"]}}')
    asked: list[str] = []

    def call(addr: str, code: int, fields: Any = None, timeout: float = 5.0) -> tuple[dict[str, Any], bytes]:
        asked.append(addr)
        if addr.startswith("down"):
            raise OSError("connection refused")
        if addr.startswith("fresh"):  # a NameServer started again, before the brokers registered with it
            return {}, b'{"brokerAddrTable":{},"clusterAddrTable":{}}'
        return {}, body.encode()

    monkeypatch.setattr(admin, "remoting_call", call)
    assert admin.broker_groups("ns:1", 1.0) == {"broker-a": {0: "10.0.0.2:301", 2: "10.0.0.3:302", -1: "x:1"}}
    assert admin.broker_groups("down:1;fresh:2;ns:3", 1.0)["broker-a"][0] == "10.0.0.2:301"
    assert admin.group_masters("down:1;fresh:2;ns:3", 1.0) == {"broker-a": "10.0.0.2:301"}
    assert asked[-3:] == ["down:1", "fresh:2", "ns:3"]
    assert admin.broker_groups("fresh:1", 1.0) == {}
    with pytest.raises(OSError, match="no rocketmq NameServer"):
        admin.group_masters("down:1;down:2", 1.0)


class _Broker:
    """What ServedCheck asks, as data: the masters the NameServers name, boot times, and the group's clients."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.master: str | None = "m1:1"
        self.boot = {"m1:1": "100", "m2:1": "200"}
        self.clients = ["1-127.0.0.1@inst"]
        self.down = False
        monkeypatch.setattr(driver, "group_masters", self.masters)
        monkeypatch.setattr(driver, "broker_boot_time", lambda addr, timeout: self._answer(self.boot[addr]))
        monkeypatch.setattr(admin, "remoting_call", self.call)

    def _answer(self, value: Any) -> Any:
        if self.down:
            raise OSError("timed out")
        return value

    def masters(self, namesrv: str, timeout: float) -> dict[str, str | None]:
        return self._answer({"broker-a": self.master})

    def call(self, addr: str, code: int, fields: Any = None, timeout: float = 5.0) -> tuple[dict[str, Any], bytes]:
        assert code == admin.GET_CONSUMER_CONNECTION_LIST and fields == {"consumerGroup": "g"}
        self._answer(None)
        if not self.clients:
            raise admin.RemotingRefusal(admin.CONSUMER_NOT_ONLINE, "the consumer group not online")
        return {}, ('{"connectionSet":[' + ",".join(f'{{"clientId":"{c}"}}' for c in self.clients) + "]}").encode()


def test_a_consumer_served_as_it_started_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = _Broker(monkeypatch)
    check = driver.ServedCheck("ns:1", "g", "inst")
    check.begin()
    for _ in range(5):
        check.check()
    broker.down = True  # nothing answers (a partition): the client is left to wait
    for _ in range(5):
        check.check()
    broker.down, broker.master = False, None  # an election under way: no master to move to yet
    check.check()


def test_a_consumer_dropped_by_its_master_after_a_reset_is_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = _Broker(monkeypatch)
    check = driver.ServedCheck("ns:1", "g", "inst")
    check.begin()
    broker.clients = ["2-127.0.0.1@other"]  # the group's other consumer stays; this one was dropped
    check.check()  # one check may fall between a reconnect and its heartbeat
    with pytest.raises(DriverError, match="no longer lists this consumer"):
        check.check()
    broker.clients = []  # CONSUMER_NOT_ONLINE: the group has no consumer at all
    check2 = driver.ServedCheck("ns:1", "g", "inst")
    check2.check()
    with pytest.raises(DriverError, match="no longer lists"):
        check2.check()


@pytest.mark.parametrize("change", ["failover", "restart", "elected"])
def test_a_consumer_is_made_again_when_its_group_has_another_master(
    monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    broker = _Broker(monkeypatch)
    if change == "elected":
        broker.master = None  # the consumer started while the group had no master
    check = driver.ServedCheck("ns:1", "g", "inst")
    check.begin()
    check.check()
    if change == "failover":
        broker.master = "m2:1"
    elif change == "restart":
        broker.boot["m1:1"] = "101"
    else:
        broker.master = "m1:1"
    with pytest.raises(DriverError, match="master is now"):
        check.check()


def test_parity_says_what_a_send_waits_for_on_one_node_and_on_the_group() -> None:
    single = BrokerEndpoint("rocketmq", "rocketmq://127.0.0.1:9876", "process")
    group = BrokerEndpoint("rocketmq", "rocketmq://a:1;b:2;c:3", "process", shape=SHAPE)
    assert driver.RocketMQDriver({}, single).parity()["acks"] == "sync send: the broker's write"
    acks = driver.RocketMQDriver({}, group).parity()["acks"]
    assert "SyncStateSet" in acks and "at least 2 of 3" in acks
    assert driver.RocketMQDriver({"send": "oneway"}, group).parity()["acks"] == "none (one-way send)"
    assert "ASYNC_FLUSH" in driver.RocketMQDriver({}, group).parity()["fsync"]
    assert driver.RocketMQDriver({}, group).namesrv == "a:1;b:2;c:3"


# -- a real three-node group ----------------------------------------------------------------------------


def _kill_master_mid_flow(tmp: str, report: Any) -> dict[str, Any]:
    """In a child process: the node-fault flow with a kill of the master; then the killed node started again."""
    from harness.brokers import ClusterControl, _process
    from tests.harness.drivers import node_faults

    seen: dict[str, Any] = {}
    real_provision = node_faults.provision

    @contextlib.contextmanager
    def provision(*args: Any, **kwargs: Any) -> Any:
        with real_provision(*args, **kwargs) as endpoint:
            seen["startup_s"] = endpoint.extra["startup_s"]
            report.put(("pids", list(endpoint.extra["pids"])))  # for the parent, should this process die
            yield endpoint

    def fault(control: ClusterControl, node: int) -> None:
        control.kill(node)
        killed = time.monotonic()
        while time.monotonic() - killed < 120:
            with contextlib.suppress(Exception):
                if (moved := control.leader("")) != node:
                    seen["new_master"], seen["failover_s"] = moved, time.monotonic() - killed
                    break
            time.sleep(0.2)
        control.start(node)  # waits until the group is whole again: every broker registered, slaves in sync
        report.put(("pids", control.pids()))
        seen["rejoined_s"] = time.monotonic() - killed
        seen["after_restart"] = control.leader("")

    node_faults.provision = provision  # type: ignore[assignment]
    history = node_faults.run_node_fault("rocketmq", {}, SHAPE, fault, Path(tmp), before=1000, after=1000)
    seen["left"] = _process.live_pids()
    return {"history": history, **seen}


def _child(tmp: str, report: Any) -> None:
    try:
        report.put(("done", _kill_master_mid_flow(tmp, report)))
    except BaseException as exc:  # noqa: BLE001 - reported to the test
        import traceback

        report.put(("error", "".join(traceback.format_exception(exc))))


@pytest.mark.broker
def test_a_killed_master_loses_no_acknowledged_message_and_its_node_rejoins(tmp_path: Path) -> None:
    from tests.harness.drivers.conformance import require_backend
    from tests.harness.drivers.node_faults import check_no_acknowledged_loss

    require_backend("rocketmq", "process")
    ctx = multiprocessing.get_context("spawn")
    report = ctx.Queue()
    child = ctx.Process(target=_child, args=(str(tmp_path), report))
    child.start()
    pids: list[int] = []
    result: tuple[str, Any] | None = None
    deadline = time.monotonic() + 900
    try:
        while result is None and time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                kind, value = report.get(timeout=1.0)
                if kind == "pids":
                    pids += value
                else:
                    result = (kind, value)
            if result is None and not child.is_alive():
                break
        child.join(timeout=60)
    finally:
        if child.is_alive():
            child.kill()
            child.join()
        stray = [p for p in pids if _alive(p)]
        for pid in stray:  # the child died without its teardown: stop the JVMs it started, by pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    assert result is not None, f"the flow's process ended with status {child.exitcode} and said nothing"
    assert result[0] == "done", result[1]
    seen = result[1]
    history = seen["history"]
    check_no_acknowledged_loss(history, "rocketmq sync sends on a 3-node group (controller mode)")
    assert len(history.accepted) > 1000, "the producer was acknowledged nothing after the fault"
    assert seen["new_master"] != history.leader, "leader() did not move off the killed master"
    assert "rejoined_s" in seen, "the killed node did not rejoin"
    assert seen["left"] == [] and not stray, "a process of the cluster was left running"
    assert pids and not [p for p in pids if _alive(p)]
    print(f"\nrocketmq group: formed in {seen['startup_s']:.0f} s; master {history.leader} killed, node "
          f"{seen['new_master']} master after {seen['failover_s']:.1f} s; rejoined after {seen['rejoined_s']:.0f} s; "
          f"accepted {len(history.accepted)}, refused {len(history.refused)}, duplicates {history.duplicates}")


# -- the consumer's own process, played by a script that speaks its pipe protocol ----------------------------

_FAKE = """
import os, struct, sys
data, acks, frame = int(sys.argv[1]), int(sys.argv[2]), struct.Struct(">I")
def out(payload):
    view = memoryview(payload)
    while view:
        view = view[os.write(data, view):]
mode = os.environ["FAKE_MODE"]
if mode == "fail":
    text = b"the NameServer at ns:1 is unreachable"
    out(frame.pack(0xFFFFFFFE) + frame.pack(len(text)) + text)
    os._exit(2)
out(frame.pack(0xFFFFFFFF))
acked = []
for body in (b"a", b"bb", bytes(200_000), b"last"):  # 200 kB spans several reads of the pipe
    out(frame.pack(len(body)) + body)
    if mode == "abort" and body == b"bb":
        os.abort()
    if not os.read(acks, 1):  # the driver closed: this one is never acknowledged
        break
    acked.append(body)
sys.stdin.buffer.read()
print(len(acked), flush=True)  # what the consumer would save as the group's offset
os._exit(0)
"""


@pytest.fixture
def fake_process(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(driver, "CONSUMER_PROCESS", ("-c", _FAKE))
    monkeypatch.setattr(driver, "group_masters", lambda namesrv, timeout: (_ for _ in ()).throw(OSError("away")))

    def make(mode: str) -> Any:
        monkeypatch.setenv("FAKE_MODE", mode)
        d = driver.RocketMQDriver({}, BrokerEndpoint("rocketmq", "rocketmq://ns:1", "process"))
        return driver._RocketMQConsumer(d, "t", "g", "g-0")

    return make


def _poll_until(consumer: Any, got: list[bytes], count: int) -> None:
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        consumer.poll(0.1)


def test_the_consumers_process_relays_every_message_and_has_each_acknowledged_once_taken(
    fake_process: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    consumer, got = fake_process("normal"), []
    consumer.start(got.append)
    process = consumer.process
    _poll_until(consumer, got, 4)
    consumer.close()
    assert got == [b"a", b"bb", bytes(200_000), b"last"]
    assert process.poll() == 0 and capfd.readouterr().out.strip() == "4"


def test_a_message_is_acknowledged_only_after_on_message_returned(
    fake_process: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    consumer, got = fake_process("normal"), []

    class Stopped(Exception):
        pass

    def take(payload: bytes) -> None:
        if len(got) == 2:
            raise Stopped  # the worker dies while it records the third
        got.append(payload)

    consumer.start(take)
    with pytest.raises(Stopped):
        _poll_until(consumer, got, 4)
    consumer.close()
    assert got == [b"a", b"bb"] and capfd.readouterr().out.strip() == "2"  # the third comes again to a successor


def test_a_consumer_whose_process_ended_raises_so_that_it_is_made_again(fake_process: Any) -> None:
    consumer, got = fake_process("abort"), []
    consumer.start(got.append)
    with pytest.raises(DriverError, match="process ended"):
        _poll_until(consumer, got, 10)
    assert got == [b"a", b"bb"]  # what it relayed before it died is handed over first
    consumer.close()


def test_a_consumer_that_cannot_start_says_why_in_one_sentence(fake_process: Any) -> None:
    consumer = fake_process("fail")
    with pytest.raises(DriverError, match=r"cannot start a rocketmq consumer against ns:1: the NameServer at ns:1 is unreachable"):
        consumer.start(lambda payload: None)
    assert consumer.process is None


@pytest.mark.parametrize(("at", "busy", "waits"), [
    (1.5, driver.TIMER_BUSY, 0.0),  # between the heartbeat and the route update
    (2.95, driver.TIMER_BUSY, 3.0 + driver.TIMER_BUSY - 2.95),  # just before the route update: past it
    (3.2, driver.TIMER_BUSY, 3.0 + driver.TIMER_BUSY - 3.2),
    (3.2, driver.TIMER_BUSY_FAILING, 3.0 + driver.TIMER_BUSY_FAILING - 3.2),
    (0.0, driver.TIMER_BUSY, 0.01 + driver.TIMER_BUSY),  # the first heartbeat
    (63.05, driver.TIMER_BUSY, 63.0 + driver.TIMER_BUSY - 63.05),  # the route update two periods later
    (33.0 + driver.TIMER_BUSY, driver.TIMER_BUSY, 0.0),
    (29.95, driver.TIMER_BUSY, 30.01 + driver.TIMER_BUSY - 29.95),  # the heartbeat one period later
])
def test_a_producer_is_shut_down_only_when_none_of_its_timers_waits_for_an_answer(
        at: float, busy: float, waits: float) -> None:
    """librocketmq aborts the process when a shutdown interrupts a timer's request (2 of 6 shutdowns at the
    route update's time did here); the heartbeat at 0.01 s and the route update at 3 s after the start come
    again every 30 s."""
    assert driver.quiet_delay((0.0, 0.0), at, busy) == pytest.approx(waits)


def test_a_slow_start_widens_the_window_by_its_length() -> None:
    started = (10.0, 10.4)  # the timers were scheduled at some moment within start()
    assert driver.quiet_delay(started, 12.95, driver.TIMER_BUSY) == pytest.approx(13.4 + driver.TIMER_BUSY - 12.95)
    assert driver.quiet_delay(started, 12.85, driver.TIMER_BUSY) == 0.0


def test_windows_that_overlap_are_waited_out_together() -> None:
    """With a broker gone a heartbeat may still wait when the route update fires: both are waited out."""
    waits = driver.quiet_delay((0.0, 0.0), 0.2, driver.TIMER_BUSY_FAILING)
    assert waits == pytest.approx(3.0 + driver.TIMER_BUSY_FAILING - 0.2)
