"""The crosscheck adapters of the JVM brokers' own tools: Kafka's perf tools, RocketMQ's benchmark and
ActiveMQ's producer/consumer. Their parsers on output captured from real runs (``fixtures/``), the Java
launcher's process handling, what each says when it cannot run, then one real repetition per tool against a
broker started through the harness's provisioning, leaving no process behind.

The real cases need `make brokers` (Java, the jars, Debian's activemq); without them they skip, except in CI
(``CI=true``), where they fail with the reason.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from harness.brokers import _jars, provision
from harness.brokers.activemq import broker_xml
from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing
from harness.crosscheck.tools import activemq as amq_tool
from harness.crosscheck.tools import kafka as kafka_tool
from harness.crosscheck.tools import rocketmq as rmq_tool
from harness.crosscheck.tools._exec import ToolProcess, Tools
from harness.drivers.base import BrokerEndpoint
from tests.harness.brokers.test_interrupt import left_running
from tests.harness.drivers.conformance import require_backend

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


# -- Kafka's perf tools ----------------------------------------------------------------------------------


def test_kafka_producer_interval_lines() -> None:
    lines = kafka_tool.parse_producer_intervals(fixture("kafka-producer-intervals.txt"))
    assert lines[0] == (1.0, 0.5, 2044.0) and lines[1] == (2.0, 14465.8, 37.9)
    assert [t for t, _, _ in lines] == [float(n) for n in range(1, len(lines) + 1)]
    assert kafka_tool.produced_records("1 records sent, 0.5 records/sec (0.00 MB/sec), 2044.0 ms avg latency, x.\n"
                                       "14784 records sent, 14465.8 records/sec (1.38 MB/sec), 37.9 ms avg latency\n"
                                       ) == 14785


def test_kafka_consumer_rate_is_taken_in_the_window_after_the_warm_up_record() -> None:
    points = kafka_tool.parse_intervals(fixture("kafka-consumer-intervals.txt"))
    counts = [n for _, n in points]
    assert counts[:3] == [1, 2, 13917] and counts == sorted(counts)
    first = points[1][0]  # the first line past the warm-up record: the producer's records arrive
    rate, covered = kafka_tool.steady_rate(points, 1, 2.0, 3.0)
    before = max(p for p in points if p[0] <= first + 2.0)
    after = min(p for p in points if p[0] >= first + 5.0)
    assert covered == pytest.approx(after[0] - before[0]) and covered >= 3.0
    assert rate == pytest.approx((after[1] - before[1]) / covered)
    # The warm-up line (1 record) and the group join before it are not receiving time.
    assert kafka_tool.steady_rate(points, 1, 100.0, 3.0)[1] == 0.0  # the run ended before that window
    # the older fixture (a counted run) parses the same way
    assert kafka_tool.parse_intervals(fixture("kafka-consumer-performance.txt"))[2][1] == 3232


def test_kafka_end_to_end_latency_percentiles() -> None:
    assert kafka_tool.parse_latency(fixture("kafka-end-to-end-latency.txt")) == (2.0, 35.0)
    with pytest.raises(ValueError):
        kafka_tool.parse_latency("Avg latency: 7.0 ms\n")


def test_kafka_best_batches_and_keeps_the_acks() -> None:
    case = CrossCase("kafka", 100, guarantee="durable", producers=2, consumers=2)
    best = kafka_tool.KafkaPerf().best(case)
    assert best is not None and best.best and best.guarantee == "durable"
    assert (best.producers, best.consumers) == (1, 1)


# -- RocketMQ's benchmark ---------------------------------------------------------------------------------


def _consumer_line(second: int, tps: int, busy: bool) -> str:
    rt = 3 if busy else 0
    return (f"Current Time: 2026-11-24 06:00:{second:02d},700 | Consume TPS: {tps} | AVG(B2C) RT(ms):   1.000 | "
            f"AVG(S2C) RT(ms):   1.000 | MAX(B2C) RT(ms): {rt} | MAX(S2C) RT(ms): {rt} | Consume Fail: 0\n")


def test_rocketmq_consumer_rate_uses_only_windows_inside_the_steady_part() -> None:
    # Idle until second 5, a ramp (windows still holding idle seconds), then steady
    text = "".join(_consumer_line(s, 0, False) for s in range(6))
    text += "".join(_consumer_line(s, 100 * (s - 5), True) for s in range(6, 15))
    text += "".join(_consumer_line(s, 1000 + (s % 2), True) for s in range(15, 40))
    lines = rmq_tool.parse_consumer(text)
    assert len(lines) == 40 and not lines[0].busy and lines[6].busy
    began = rmq_tool.consumption_began(lines)
    assert began == lines[5].at
    # 5 s ramp: windows from second 10 on; the stop at second 38: lines 20 .. 38
    rate, covered = rmq_tool.steady_consumer_rate(lines, rmq_tool.steady_start(lines, 5.0), lines[38].at)
    assert 1000 <= rate <= 1001 and covered == pytest.approx(18.0 + rmq_tool.WINDOW_S)
    # Shorter than the window: no steady line, no figure.
    assert math.isnan(rmq_tool.steady_consumer_rate(lines, rmq_tool.steady_start(lines, 5.0), lines[14].at)[0])


def test_rocketmq_consumer_rate_waits_for_a_late_consumer_to_drain_its_backlog() -> None:
    # A real run at the tool's best: the rebalance gave the Consumer its queue 23 s after the first sends, and
    # it drained that backlog at up to 49k msg/s while the Producer sent 9k-17k; it caught up at 15:23:01.
    lines = rmq_tool.parse_consumer(fixture("rocketmq-consumer-backlog.txt"))
    level = rmq_tool.caught_up(lines)
    assert datetime.fromtimestamp(level).strftime("%H:%M:%S") == "15:23:01"
    assert rmq_tool.steady_start(lines, 5.0) == level > rmq_tool.consumption_began(lines) + 5.0
    rate, covered = rmq_tool.steady_consumer_rate(lines, rmq_tool.steady_start(lines, 5.0), lines[-1].at)
    # Only the windows after the drain: 14.1k-15.2k, not the drain's 20k-49k.
    assert 14_000 <= rate <= 15_200 and covered == pytest.approx(4.0 + rmq_tool.WINDOW_S)
    # A Consumer that never caught up (the run waits for it first) is the slower side, measured while behind:
    # from 5 s after its first receipt.
    behind = [dataclasses.replace(line, oldest_ms=max(line.oldest_ms, rmq_tool.CAUGHT_UP_MS)) for line in lines]
    assert math.isnan(rmq_tool.caught_up(behind))
    assert rmq_tool.steady_start(behind, 5.0) == rmq_tool.consumption_began(lines) + 5.0
    assert rmq_tool.steady_consumer_rate(behind, rmq_tool.steady_start(behind, 5.0), lines[-1].at)[0] > 20_000


def test_rocketmq_real_output() -> None:
    lines = rmq_tool.parse_consumer(fixture("rocketmq-consumer-forever.txt"))
    busy = [line.tps for line in lines if line.busy]
    rate, covered = rmq_tool.steady_consumer_rate(lines, rmq_tool.steady_start(lines, 5.0), lines[-1].at)
    assert min(busy) <= rate <= max(busy) and covered >= rmq_tool.WINDOW_S
    sent = rmq_tool.parse_sent(fixture("rocketmq-producer-forever.txt"))
    assert len(sent) > 10 and any(tps > 0 for _, tps, _ in sent)
    # A producer whose only thread died on its first send prints no line with a send.
    assert not any(tps > 0 for _, tps, _ in rmq_tool.parse_sent(fixture("rocketmq-producer-sent-nothing.txt")))
    assert rmq_tool._MAIN_FAILED in fixture("rocketmq-consumer-failed-start.txt")
    best = rmq_tool.RocketBenchmark().best(CrossCase("rocketmq", 100))
    assert best is not None and best.producers == rmq_tool.BEST_THREADS


def test_rocketmq_checks_async_variants_against_its_best_run_only() -> None:
    tool = rmq_tool.RocketBenchmark()
    cases = {(send, client): CrossCase("rocketmq", 100, options={"send": send, "client": client})
             for send in ("sync", "async") for client in ("python", "java")}
    assert all(tool.applies(case) for case in cases.values())
    assert not tool.applies(CrossCase("rocketmq", 100, options={"send": "oneway"}))  # the tool has no one-way sends
    assert [key for key, case in cases.items() if tool.unmatched(case)] == [("async", "python"), ("async", "java")]
    bests = {tool.best(case).key() for case in cases.values()}  # type: ignore[union-attr]
    assert len(bests) == 1  # one best run a repetition serves every variant


# -- ActiveMQ's producer/consumer -------------------------------------------------------------------------


def test_activemq_receipts_and_sends_from_their_log_lines() -> None:
    got = amq_tool.receipts(fixture("activemq-consumer-stamps.txt"))
    put = amq_tool.sends(fixture("activemq-producer-stamps.txt"))
    consumer_lines = fixture("activemq-consumer-stamps.txt").count(" Received ")
    assert len(got) == consumer_lines and got == sorted(got) and len(put) > 10
    assert abs(put[0] - got[0]) < 1.0  # the same moments (a send is logged once it returned)
    assert amq_tool.receipts("consumer-1 wait until 50000 messages are consumed\n") == []


def test_activemq_instance_config_has_an_openwire_connector_on_its_own_port() -> None:
    xml = "<broker><transportConnectors>\n</transportConnectors></broker>"
    out = broker_xml(xml, 42000, 42001)
    assert "stomp://127.0.0.1:42000" in out and 'uri="tcp://127.0.0.1:42001' in out
    assert "tcp://" not in broker_xml(xml, 42000)


def test_activemq_tool_needs_the_openwire_url(tmp_path: Path) -> None:
    endpoint = BrokerEndpoint(system="activemq", url="stomp://127.0.0.1:1", backend="external")
    if amq_tool.ActiveMQPerf().missing() is not None:
        pytest.skip(str(amq_tool.ActiveMQPerf().missing()))
    with pytest.raises(ToolMissing, match="OpenWire"):
        amq_tool.ActiveMQPerf().run(CrossCase("activemq", 100, 10), endpoint, tmp_path, [])


# -- what a tool says when it cannot run -------------------------------------------------------------------


def test_missing_jars_or_java_say_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MQBENCH_BROKERS_DIR", str(tmp_path))
    monkeypatch.setattr(_jars, "java", lambda: "/usr/bin/java")
    for tool, jar in ((kafka_tool.KafkaPerf(), "kafka-tools"), (rmq_tool.RocketBenchmark(), "rocketmq-example")):
        reason = tool.missing()
        assert reason is not None and jar in reason and "make brokers" in reason
        with pytest.raises(ToolMissing):
            tool.run(CrossCase(tool.system, 100, 10), BrokerEndpoint(tool.system, "x://h:1", "external"), tmp_path, [])
    # A jar folder fetched before the tool joined its pom: still missing.
    lib = tmp_path / f"rocketmq-{_jars.pinned_version('rocketmq')}" / "lib"
    lib.mkdir(parents=True)
    (lib / ".complete").touch()
    assert "rocketmq-example" in str(rmq_tool.RocketBenchmark().missing())
    (lib / f"rocketmq-example-{_jars.pinned_version('rocketmq')}.jar").touch()
    assert rmq_tool.RocketBenchmark().missing() is None
    monkeypatch.setattr(_jars, "java", lambda: None)
    tools: list[Tool] = [kafka_tool.KafkaPerf(), rmq_tool.RocketBenchmark(), amq_tool.ActiveMQPerf()]
    assert all("Java" in str(tool.missing()) for tool in tools)


# -- the launcher -----------------------------------------------------------------------------------------


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_launcher_reports_status_output_and_cpu(tmp_path: Path) -> None:
    with Tools(tmp_path, "demo 1") as tools:
        busy = tools.start("busy", _python("s = 0\nfor i in range(3_000_000): s += i\nprint('done', s)"))
        assert tools.wait(busy, timeout=120) == 0
        bad = tools.start("bad", _python("import sys; print('usage: demo'); print('Invalid value'); sys.exit(3)"))
        with pytest.raises(ToolFailed, match=r"demo 1: bad exited with status 3.*Invalid value"):
            tools.wait(bad, timeout=120)
        uses = tools.cpu_uses([busy])
    assert "done" in busy.output()
    assert [u.role for u in uses] == ["tool-busy"] and uses[0].cpu_s > 0 and uses[0].wall_s > 0


def test_launcher_stops_what_runs_by_pid_also_on_error(tmp_path: Path) -> None:
    started: list[ToolProcess] = []
    with pytest.raises(RuntimeError), Tools(tmp_path, "demo") as tools:
        started.append(tools.start("ignores-term", _python(
            "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
            "time.sleep(600)")))
        started.append(tools.start("sleeper", _python("import time; print('ready', flush=True); time.sleep(600)")))
        tools.await_output(started, lambda out: "ready" in out, 60, "not ready")
        raise RuntimeError("the adapter failed half-way")
    assert all(p.status is not None for p in started)
    assert not left_running({p.pid for p in started}, wait=5)


def test_launcher_wait_for_output_fails_when_the_process_ends_first(tmp_path: Path) -> None:
    with Tools(tmp_path, "demo") as tools:
        proc = tools.start("quits", _python("print('Exception in thread main: boom')"))
        with pytest.raises(ToolFailed, match="boom"):
            tools.await_output([proc], lambda out: "never" in out, 60, "never said it")
        late = tools.start("late", _python("import time; time.sleep(600)"))
        with pytest.raises(ToolFailed, match="did not finish"):
            tools.wait(late, timeout=0.5)
        assert late.status is not None


def test_run_measured_feeds_stdin_and_stops_the_others_when_one_fails(
    tmp_path: Path, started_pids: set[int],
) -> None:
    from harness.crosscheck.tools._exec import Step, run_measured

    lines = tmp_path / "lines.txt"
    lines.write_text("a\nb\nc\n")
    counted = run_measured("demo", [Step("consumer", _python("import sys; print(len(sys.stdin.readlines()))"),
                                         stdin=lines)], tmp_path / "ok", broker_pids=[], timeout=60)
    assert counted.output("consumer").strip() == "3"
    assert [u.role for u in counted.cpu()] == ["tool-consumer"]
    before = set(started_pids)
    steps = [Step("consumer", _python("import time; time.sleep(600)")),
             Step("producer", _python("import sys; print('Error: connection refused'); sys.exit(1)"))]
    with pytest.raises(ToolFailed, match="connection refused"):
        run_measured("demo", steps, tmp_path / "bad", broker_pids=[], timeout=60)
    pids = started_pids - before
    assert len(pids) == 2 and not left_running(pids, wait=5)


# -- real runs ------------------------------------------------------------------------------------------


def _require(tool: Tool) -> None:
    require_backend(tool.system, "process")
    reason = tool.missing()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool.name}: {reason}")
        pytest.skip(f"{tool.name}: {reason}")


@pytest.fixture
def started_pids(monkeypatch: pytest.MonkeyPatch) -> Iterator[set[int]]:
    """The pid of every process the tools start."""
    pids: set[int] = set()
    start = Tools.start

    def recording(self: Tools, *args: object, **kwargs: object) -> ToolProcess:
        proc = start(self, *args, **kwargs)  # type: ignore[arg-type]
        pids.add(proc.pid)
        return proc

    monkeypatch.setattr(Tools, "start", recording)
    yield pids


@pytest.mark.parametrize("tool", [kafka_tool.KafkaPerf(), rmq_tool.RocketBenchmark(), amq_tool.ActiveMQPerf()],
                         ids=["kafka", "rocketmq", "activemq"])
def test_tool_measures_its_broker_with_the_rows_settings_and_at_its_best_and_leaves_nothing(
    tool: Tool, tmp_path: Path, started_pids: set[int], monkeypatch: pytest.MonkeyPatch,
) -> None:
    _require(tool)
    monkeypatch.setattr(type(tool), "ramp", 2.0)  # a short ramp: the test checks the flow, not the figures
    case = CrossCase(tool.system, size=100, seconds=3.0)
    best = tool.best(case)
    assert best is not None and best.best
    with provision(tool.system, backend="process", logs_dir=tmp_path / "logs") as endpoint:
        broker = list(endpoint.extra.get("pids", []))
        results = [tool.run(c, endpoint, tmp_path / f"tool-{c.best}", broker) for c in (case, best)]
    for result in results:
        assert result.receiver_rate > 0 and result.sender_rate > 0 and result.steady_s >= 3.0
        assert result.tool.startswith(tool.name) and result.command and result.note and result.settings
        roles = {use.role for use in result.cpu}
        assert "broker" in roles and any(role.startswith("tool-producer") for role in roles)
    assert results[0].settings != results[1].settings
    assert started_pids and not left_running(started_pids, wait=10)
    if tool.system == "kafka":
        assert results[0].latency_kind == "one-way" and 0 < results[0].latency_p50_us <= results[0].latency_p99_us
