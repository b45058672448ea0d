"""The JVM worker under the runner (harness/runner/jvm.py + jvm/): the same raw rows as the Python workers for
each pattern, the clock check, the conversion of the JVM's records, a failing JVM, client selection and
labels, and no `java` process left behind in any of these. Without java or the built jar the tests that
need it skip with the reason (in CI, ``CI=true``, they fail)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from harness.drivers import driver_class
from harness.drivers.base import BrokerEndpoint, DriverError
from harness.drivers.java import JeromqDriver, unavailable_reason
from harness.runner import jvm
from harness.runner._keys import random_picks
from harness.runner._send import Profile
from harness.runner.case import Case, CaseFailed, run_case, scenario_reason
from harness.runner.worker import WorkerSpec
from harness.scenario import ScenarioError, Variant, load_scenarios, parse_scenario
from harness.scenario._workload import PAYLOAD_POOL


def need_jvm() -> None:
    reason = unavailable_reason()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the JVM worker cannot run: {reason}")
        pytest.skip(reason)


def java_left(tmp_path: Path) -> list[str]:
    """JVM workers of this test still running (their command lines name spec files under tmp_path)."""
    found = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    return [pid for pid in found if _command(pid) == "java"]


def _command(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def run_jeromq(tmp_path: Path, fields: dict[str, Any], options: dict[str, Any] | None = None) -> Any:
    scenario = parse_scenario({"name": "j", "message_sizes": [100], "warmup": 0, "timeout": 20, **fields}, "t.yaml")
    variant = Variant(system="jeromq", name="default", options=options or {})
    case = Case(scenario, variant, scenario.message_sizes[0], scenario.rates[0], 0, "run", None)
    try:
        return run_case(case, JeromqDriver(variant.options), tmp_path / "work")
    finally:
        assert not java_left(tmp_path), "a JVM worker outlived its case"


def test_queue_rows_are_those_of_a_python_worker(tmp_path: Path) -> None:
    need_jvm()
    result = run_jeromq(tmp_path, {"pattern": "queue", "messages": 3000, "producers": 2, "consumers": 2})
    assert result.complete, result.problems
    rows = result.rows
    assert len(rows) == 6000
    assert sorted(zip(rows["producer"], rows["seq"], strict=True)) == [(p, s) for p in (0, 1) for s in range(3000)]
    assert rows["t_recv"].notna().all() and rows["t_send"].notna().all()
    assert (rows["t_recv"] >= rows["t_send"]).all()  # one clock: a message never arrives before it was sent
    assert rows["t_send"].min() >= result.start_ns  # paced from the common start stamp
    assert rows["t_intended"].isna().all() and rows["t_ack"].isna().all()  # full speed, no acks
    assert set(rows["consumer"]) == {0, 1}


def test_pubsub_open_loop_with_the_probe_handshake(tmp_path: Path) -> None:
    need_jvm()
    result = run_jeromq(tmp_path, {"pattern": "pubsub", "messages": 1000, "rate": 2000, "consumers": 2},
                        {"sndhwm": 0, "rcvhwm": 0})
    assert result.complete and not result.problems, result.problems
    rows = result.rows
    assert len(rows) == 2000 and rows["t_recv"].notna().all()  # both subscribers heard everything
    intended = rows[rows["consumer"] == 0].sort_values("seq")["t_intended"].astype("int64").to_numpy()
    assert intended[0] == result.start_ns
    assert np.all(np.diff(intended) > 0)  # one intended stamp per period, from the common start
    assert (rows["t_send"] >= rows["t_intended"]).all()


def test_paced_producers_take_turns_at_the_case_rate(tmp_path: Path) -> None:
    """As the Python worker (harness/runner/_send.py Schedule): producer p of the case starts its schedule
    p / rate s after the common start, so the producers' sends interleave evenly."""
    need_jvm()
    result = run_jeromq(tmp_path, {"pattern": "queue", "messages": 200, "rate": 2000, "producers": 4})
    assert result.complete and not result.problems, result.problems
    rows = result.rows
    assert len(rows) == 800 and rows["t_intended"].notna().all()
    first = rows.groupby("producer")["t_intended"].min().astype("int64")
    assert list(first - result.start_ns) == [0, 500_000, 1_000_000, 1_500_000]
    gaps = rows["t_intended"].astype("int64").sort_values().diff().dropna()
    assert gaps.between(499_999, 500_001).all(), gaps.describe()


def test_reqrep_round_trips(tmp_path: Path) -> None:
    need_jvm()
    result = run_jeromq(tmp_path, {"pattern": "reqrep", "messages": 300})
    assert result.complete, result.problems
    rows = result.rows
    assert list(rows["seq"]) == list(range(300))
    assert (rows["t_recv"] > rows["t_send"]).all()


def clashing_producers() -> tuple[Case, JeromqDriver]:
    """A JeroMQ queue case whose two producers are told to bind the same endpoint: one cannot."""
    scenario = parse_scenario({"name": "f", "pattern": "queue", "message_sizes": [100], "messages": 10,
                               "producers": 2, "consumers": 1, "timeout": 10}, "t.yaml")
    driver = JeromqDriver({})

    def same_endpoint(topology: Any) -> dict[str, Any]:
        plan = JeromqDriver.plan(driver, topology)
        plan["endpoints"] = [plan["endpoints"][0]] * len(plan["endpoints"])
        return plan

    driver.plan = same_endpoint  # type: ignore[method-assign]
    return Case(scenario, Variant("jeromq", "default", {}), 100, None, 0, "run", None), driver


def test_a_failing_jvm_fails_the_case_in_one_sentence(tmp_path: Path) -> None:
    need_jvm()
    # Two producers told to bind the same endpoint: the second JVM cannot bind and reports why.
    case, driver = clashing_producers()
    with pytest.raises(CaseFailed) as failed:
        run_case(case, driver, tmp_path / "work")
    assert "jeromq" in str(failed.value) and "\n" not in str(failed.value)
    assert not java_left(tmp_path)


class FakeLines:
    def __init__(self, stamp: int) -> None:
        self.stamp = stamp

    def wait_for(self, prefix: str, timeout: float) -> str:
        return f"clock {self.stamp}"


def test_clock_check_refuses_a_stamp_outside_the_bracket() -> None:
    with pytest.raises(DriverError, match="do not read the same clock"):
        jvm.check_clock(lambda line: None, FakeLines(1))  # type: ignore[arg-type]
    with pytest.raises(DriverError, match="do not read the same clock"):
        jvm.check_clock(lambda line: None, FakeLines(2**62))  # type: ignore[arg-type]


def test_a_jvm_replier_answers_the_clock_and_stops_when_told(tmp_path: Path) -> None:
    need_jvm()
    from harness.brokers import free_port
    from harness.drivers.base import Pattern, Topology

    topology = Topology(Pattern.REQREP, 1, 1, 1, 100, "clock")
    plan = {"topology": {"pattern": "reqrep", "topics": 1, "producers": 1, "consumers": 1, "message_size": 100,
                         "run_tag": topology.run_tag}, "endpoints": [f"tcp://127.0.0.1:{free_port()}"]}
    spec = spec_for("replier", tmp_path / "replier", plan)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(jvm.spec_json(spec, "jeromq")))
    proc = subprocess.Popen(jvm.command(jvm.MAIN, str(spec_path)), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, bufsize=1, start_new_session=True)
    try:
        lines = jvm._Lines(proc, [jvm._Role(spec)])
        lines.wait_for("hello", jvm.HELLO_TIMEOUT)
        jvm.check_clock(lambda text: jvm._send(proc, text), lines)  # raises when the clocks differ
        lines.wait_for("ready", jvm.HELLO_TIMEOUT)
        jvm._send(proc, "stop")
        assert lines.wait_for("done", jvm.HELLO_TIMEOUT) == "done 0 "
        assert proc.wait(30) == 0
    finally:
        jvm.kill_group(proc)


def test_a_consumer_is_ready_only_once_its_connection_has_shaken_hands(tmp_path: Path) -> None:
    """A JeroMQ consumer whose first connection never completes its ZMTP handshake (a listener that accepts and
    stays silent: what JeroMQ 0.6.0's poller leaves when it loses a new connection's registration, a topic then
    unread for the whole case) dials again, and says ``ready`` only once connected to the real producer, whose
    messages it then records."""
    need_jvm()
    import socket
    import time

    import zmq

    from harness.brokers import free_port
    from harness.drivers.base import Pattern, Topology
    from harness.runner._records import HEADER

    port = free_port()
    endpoint = f"tcp://127.0.0.1:{port}"
    silent = socket.create_server(("127.0.0.1", port))
    topology = Topology(Pattern.QUEUE, 1, 1, 1, 100, "shake")
    plan = {"topology": {"pattern": "queue", "topics": 1, "producers": 1, "consumers": 1, "message_size": 100,
                         "run_tag": topology.run_tag}, "endpoints": [endpoint]}
    spec = spec_for("consumer", tmp_path / "consumer", plan)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(jvm.spec_json(spec, "jeromq")))
    proc = subprocess.Popen(jvm.command(jvm.MAIN, str(spec_path)), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, bufsize=1, start_new_session=True)
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.linger = 1000
    held = None
    try:
        lines = jvm._Lines(proc, [jvm._Role(spec)])
        lines.wait_for("hello", jvm.HELLO_TIMEOUT)
        jvm.check_clock(lambda text: jvm._send(proc, text), lines)
        silent.settimeout(jvm.HELLO_TIMEOUT)
        held, _ = silent.accept()  # the consumer's first connection: accepted, never answered
        silent.close()
        with pytest.raises(DriverError, match="'ready'"):  # not ready on a connection without a handshake
            lines.wait_for("ready", 1.0)
        push.bind(endpoint)  # the producer, on the same port: the consumer's next dial reaches it
        lines.wait_for("ready", jvm.HELLO_TIMEOUT)
        jvm._send(proc, f"start {time.monotonic_ns()}")
        for seq in range(10):
            push.send(HEADER.pack(0, seq, time.monotonic_ns()).ljust(100, b"\0"))
        lines.wait_for("progress 10", 30)  # all ten recorded
        jvm._send(proc, "stop")
        assert lines.wait_for("done", jvm.HELLO_TIMEOUT).startswith("done 10 ")
        assert proc.wait(30) == 0
    finally:
        if held is not None:
            held.close()
        silent.close()
        push.close()
        ctx.term()
        jvm.kill_group(proc)


def spec_for(kind: str, out: Path, plan: dict[str, Any] | None = None) -> WorkerSpec:
    from harness.drivers.base import Role

    return WorkerSpec(kind=kind, name=f"{kind}-0", slot=0, system="jeromq", driver="java:JeromqDriver",
                      options={}, broker=None, plan=plan or {}, role=Role(0, 0), size=100, payload="fixed", total=3,
                      duration_ns=None, rate=None, capacity=1024, out=str(out))


@pytest.mark.parametrize(("kind", "written", "expected"), [
    ("producer", {"t_send": [5, 6, 7]}, {"t_send": "<i8", "t_ack": "<i8", "t_intended": "<i8"}),
    ("consumer", {"t_recv": [5, 6, 7], "producer": [0, 1, 65534], "seq": [0, 1, 2**32 - 1]},
     {"t_recv": "<i8", "producer": "<u2", "seq": "<u4"}),
    ("requester", {"t_send": [1, 2, 3], "t_recv": [4, -1, 6], "t_intended": [1, 2, 3]},
     {"t_send": "<i8", "t_recv": "<i8", "t_intended": "<i8"}),
])
def test_records_become_the_python_workers_arrays(tmp_path: Path, kind: str, written: dict[str, list[int]],
                                                  expected: dict[str, str]) -> None:
    out = tmp_path / kind
    arrays = {}
    for name, values in written.items():
        path = tmp_path / f"{kind}.jvm-{name}.bin"
        np.array(values, dtype="<i8").tofile(path)
        arrays[name] = str(path)
    (tmp_path / f"{kind}.jvm.json").write_text(json.dumps({"count": 3, "arrays": arrays, "error": ""}))
    jvm._convert(spec_for(kind, out))
    with np.load(f"{out}.npz") as saved:
        assert {k: saved[k].dtype for k in saved.files} == {k: np.dtype(v) for k, v in expected.items()}
        for name, values in written.items():
            assert saved[name].tolist() == values
        for name in set(expected) - set(written):
            assert saved[name].size == 0
    assert not list(tmp_path.glob("*.bin")) and not list(tmp_path.glob("*.jvm.json"))


def test_a_variant_chooses_its_client_and_the_label_names_it() -> None:
    sc = parse_scenario({"name": "c", "pattern": "queue", "message_sizes": [100], "messages": 10,
                         "variants": {"rabbitmq": [{"name": "pika"}, {"name": "java", "client": "java"}]}}, "t.yaml")
    pika, java = sc.variants_for("rabbitmq")
    broker = BrokerEndpoint("rabbitmq", "amqp://guest:guest@127.0.0.1:5672/", "process")
    assert driver_class("rabbitmq", pika.options.get("client"))(pika.options, broker).label() == "rabbitmq (pika)"
    if unavailable_reason() is None:
        driver = driver_class("rabbitmq", java.options.get("client"))(java.options, broker)
        assert driver.label() == "rabbitmq (java)"
        assert driver.versions()["amqp-client"][0].isdigit()
    kafka = BrokerEndpoint("kafka", "kafka://127.0.0.1:9092", "process")
    if unavailable_reason() is None:
        driver = driver_class("kafka", "java")({"client": "java", "acks": "all"}, kafka)
        assert driver.label() == "kafka (java)" and driver.guarantee().value != "at-most-once"
    with pytest.raises(ScenarioError, match="client"):
        parse_scenario({"name": "c", "pattern": "queue", "message_sizes": [100], "messages": 10,
                        "variants": {"rabbitmq": {"client": "cobol"}}}, "t.yaml")


def test_without_the_jar_jeromq_says_what_to_do(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import harness.drivers.java as java

    monkeypatch.setattr(java, "JAR", tmp_path / "missing.jar")
    from harness.compare import system_status

    status = system_status("jeromq")
    assert not status.ready and "make jvm" in status.reason
    monkeypatch.setattr(java.shutil, "which", lambda name: None)
    assert "install a Java 17" in (java.unavailable_reason() or "")


def _within(seconds: float, condition: Any) -> bool:
    """Whether ``condition()`` became true within ``seconds`` (a bound on waiting, not a timing check)."""
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_ctrl_c_mid_run_leaves_no_jvm(tmp_path: Path) -> None:
    need_jvm()
    import signal
    import sys
    import time

    scenario = tmp_path / "long.yaml"
    scenario.write_text("name: long\npattern: queue\nmessage_sizes: [100]\nduration: 60s\nrate: 2000\n"
                        "systems: [jeromq]\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "compare", str(scenario), "--out", str(tmp_path / "res")],
        cwd=Path(__file__).resolve().parents[3], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:  # Ctrl-C once the producer's and the consumer's JVMs run
        started = _within(60, lambda: len(java_left(tmp_path)) == 2)
        time.sleep(1.0)  # into the run
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=60)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert started, "the JVM workers never started"
    assert proc.returncode == 130, output
    assert _within(10, lambda: not java_left(tmp_path)), f"JVMs left: {java_left(tmp_path)}"


def test_records_saved_after_the_runners_grace_carry_only_the_jvms_own_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A JVM that stopped on ``stop`` and saved its records later than the runner's grace (a RocketMQ consumer
    closes slowly) reports what it said, not an interruption; its count goes into the accounting."""
    import queue
    from types import SimpleNamespace

    import harness.runner.jvm as relay

    monkeypatch.setattr(relay, "_convert", lambda spec, outcomes: None)

    class Lines:
        def __init__(self, *lines: str) -> None:
            self.left = [(0, line) for line in lines]

        def get(self, timeout: float) -> tuple[int, str]:
            if not self.left:
                raise queue.Empty
            return self.left.pop(0)

    for line, error in (("done 60000 ", ""), ("done 7 stopped by the runner before all messages were sent",
                                              "stopped by the runner before all messages were sent")):
        status: queue.Queue[tuple[object, ...]] = queue.Queue()
        role = relay._Role(SimpleNamespace(name="consumer-0"))  # type: ignore[arg-type]  # a consumer: no outcomes
        assert relay._finish([role], Lines("progress 5", line), status) == []
        assert status.get_nowait() == ("done", "consumer-0", int(line.split()[1]), error)


# -- workload fields in the JVM worker -------------------------------------------------------------------


def test_a_rate_profile_paces_the_jvm_as_it_paces_the_python_workers(tmp_path: Path) -> None:
    need_jvm()
    steps = [[400, "0.5s"], [2000, "0.25s"], [0, "0.25s"]]
    result = run_jeromq(tmp_path, {"pattern": "queue", "duration": "2s", "rate_profile": steps})
    assert result.complete, result.problems
    rows = result.rows.sort_values("seq")
    seq = rows["seq"].to_numpy(np.int64)
    offsets = rows["t_intended"].to_numpy(np.int64) - int(rows["t_intended"].iloc[0])
    expected = Profile(((400.0, 0.5), (2000.0, 0.25), (0.0, 0.25))).at(seq)
    assert seq[0] == 0 and np.abs(offsets - expected).max() <= 1000  # the same schedule, to a microsecond
    assert len(rows) == 2 * (400 * 0.5 + 2000 * 0.25)  # two rounds of the steps in 2 s (the pause sends none)
    assert rows["t_recv"].notna().all()


def test_compressible_bodies_and_keys_reach_the_jvm_as_the_python_definitions(tmp_path: Path) -> None:
    from dataclasses import replace

    spec = replace(spec_for("producer", tmp_path / "p"), payload="compressible", compressible=0.75,
                   size=1024, keys="random", key_count=5, rate_profile=((100.0, 1.0), (0.0, 0.5)))
    sent = jvm.spec_json(spec, "jeromq")
    picks = random_picks("random", 5, 0)
    assert picks is not None and sent["key_count"] == 5 and sent["key_picks"] == picks.tolist()
    assert sent["rate_profile"] == [[100.0, 1.0], [0.0, 0.5]]
    pool = Path(sent["bodies"]).read_bytes()
    assert len(pool) == PAYLOAD_POOL * 1024 and len({pool[i:i + 1024] for i in range(0, len(pool), 1024)}) > 1
    assert len(zlib.compress(pool)) < 0.5 * len(pool)  # about a quarter of each body is random
    turn = jvm.spec_json(replace(spec, keys="round-robin", payload="fixed"), "jeromq")
    assert turn["key_picks"] is None and "bodies" not in turn  # in turn: the JVM computes (seq + index) % count
    assert "key_count" not in jvm.spec_json(replace(spec, keys="none"), "jeromq")
    need_jvm()  # and the JVM sends such a pool in turn
    body = tmp_path / "orders.json"
    body.write_text('{"order": 1, "items": ["a", "b"]}')
    for payload in ({"compressible": 0.5}, {"file": str(body)}):
        result = run_jeromq(tmp_path, {"pattern": "queue", "messages": 500, "payload": payload})
        assert result.complete, result.problems
        assert len(result.rows) == 500 and result.rows["t_recv"].notna().all()


def test_backlog_is_held_by_the_jvm_consumer_then_drained_at_the_drain_rate(tmp_path: Path) -> None:
    """JeroMQ as the Python workers' zmq: the consumer reads nothing until the release, PUSH blocks at its
    high-water mark (no broker holds a backlog: noted), then the producer goes on at half its rate."""
    need_jvm()
    result = run_jeromq(tmp_path, {"pattern": "queue", "message_sizes": [10_000], "messages": 3000, "rate": 3000,
                                   "backlog": {"messages": 2500, "drain_rate": 0.5}}, {"sndhwm": 100, "rcvhwm": 100})
    assert result.complete, result.problems
    record, rows = result.backlog, result.rows
    assert record is not None and "blocked" in record["note"], record
    assert rows["t_recv"].notna().all() and len(rows) == 3000  # blocked, not dropped
    assert rows["t_recv"].min() >= record["release_ns"]  # nothing was received before the release
    after = rows[rows["t_send"] > record["release_ns"] + 200_000_000].sort_values("seq")
    gaps = np.diff(after["t_intended"].to_numpy(np.int64))
    assert np.median(gaps) == pytest.approx(1e9 / 1500, rel=0.01)  # the drain rate: half of 3,000/s


def test_workload_fields_the_jvm_cannot_run_are_refused_naming_field_and_client(tmp_path: Path) -> None:
    def reason(system: str, client: str | None, **fields: Any) -> str | None:
        sc = parse_scenario({"name": "w", "pattern": "queue", "message_sizes": [100], "messages": 100,
                             **({} if "rate_profile" in fields else {"rate": 100}), **fields}, "t.yaml")
        return scenario_reason(system, sc, client)

    assert reason("kafka", "java", keys="random", key_count=4) is None
    assert reason("rabbitmq", "java", rate_profile=[[100, "1s"]], payload={"compressible": 0.5}) is None
    assert reason("jeromq", None, keys="round-robin") == "jeromq has no message keys to route by"
    for system, client in (("kafka", "java"), ("kafka", None), ("jeromq", None)):  # the JVM holds back too
        assert reason(system, client, backlog={"messages": 50, "drain_rate": 0.5}) is None
    path = tmp_path / "sweep.yaml"
    path.write_text("name: s\npattern: queue\nmessage_sizes: [100]\nmessages: 100\ntopics: [2, 40]\n"
                    "producers_per_topic: 1\nconsumers_per_topic: 1\n")
    few, many = load_scenarios(path)  # a sweep's case of more than 64 roles: the JVM plays them in groups
    assert scenario_reason("rabbitmq", few, "java") is None and scenario_reason("rabbitmq", many, "java") is None


def test_a_relay_leaves_the_processs_signals_as_it_found_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relay run in this process (as a test does) left SIGTERM ignored, and the ignoring is inherited: the
    Spark daemons a later test started did not stop on SIGTERM (CI: "had to SIGKILL" two clusters)."""
    import signal

    from harness.runner._context import WorkerContext

    monkeypatch.setattr(jvm, "unavailable_reason", lambda: None)
    monkeypatch.setattr(jvm, "command", lambda *args, **kwargs: ["true"])  # a "JVM" that ends at once
    ctx = WorkerContext(status=queue.Queue(), start=threading.Event(), stop=threading.Event(),
                        start_ns=SimpleNamespace(value=0), progress=[0])
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGUSR1)}
    with contextlib.suppress(Exception):
        jvm.relay(spec_for("consumer", tmp_path / "c"), ctx, JeromqDriver({}))
    assert signal.getsignal(signal.SIGTERM) == before[signal.SIGTERM]
    assert signal.getsignal(signal.SIGUSR1) == before[signal.SIGUSR1]
    child = subprocess.Popen(["sleep", "30"])
    child.terminate()
    assert child.wait(timeout=10) == -signal.SIGTERM  # a process started now stops on SIGTERM
