"""Many roles in one JVM (harness/runner/jvm.py ``relay_group``, jvm/.../Main.group): the tagged lines of a JVM
that plays many roles, the grouping of JVM roles above ``ONE_PROCESS_EACH``, and whole cases of 72 roles
(36 topics, a producer and a consumer each) through JeroMQ and through the Java clients of Kafka, RabbitMQ and
RocketMQ, in which every role's records are complete, only one JVM per group process ran, and none is left
afterwards. Without java or the built jar, or without the broker, the tests that need them skip with the reason
(in CI they fail)."""

from __future__ import annotations

import io
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from rich.console import Console

from harness.compare import compare
from harness.drivers.base import Role
from harness.runner import _workers, jvm
from harness.runner._outcomes import Outcomes
from harness.runner.worker import WorkerSpec
from harness.scenario import parse_scenario
from tests.harness.drivers.conformance import require_backend
from tests.harness.runner.test_jvm_worker import java_left, need_jvm

TOPICS, MESSAGES = 36, 300  # 72 roles: above ONE_PROCESS_EACH (64)


def test_a_grouped_jvms_lines_carry_their_roles_place() -> None:
    assert jvm.parse("@3 progress 1200", grouped=True) == (3, "progress 1200")
    assert jvm.parse("@0 done 5 stopped by the runner", grouped=True) == (0, "done 5 stopped by the runner")
    assert jvm.parse("hello", grouped=True) == (None, "hello")  # the JVM's own lines carry no place
    assert jvm.parse("clock 123", grouped=True) == (None, "clock 123")
    assert jvm.parse("error no such client", grouped=True) == (None, "error no such client")
    assert jvm.parse("@3 progress 1200", grouped=False) == (0, "@3 progress 1200")  # one role: nothing tagged
    assert jvm.parse("progress 7", grouped=False) == (0, "progress 7")


def spec(kind: str, i: int, out: Path, **fields: Any) -> WorkerSpec:
    return WorkerSpec(kind=kind, name=f"{kind}-{i}", slot=i, system="kafka", driver="harness.drivers.java:KafkaJavaDriver",
                      options={}, broker=None, plan={}, role=Role(i, i), size=100, payload="fixed", total=3,
                      duration_ns=None, rate=None, capacity=1024, out=str(out / f"{kind}-{i}"), **fields)


def test_lines_go_to_their_roles_and_outcomes_to_each_producers_own(tmp_path: Path) -> None:
    """Through ``_Lines``: role lines in order with their place, outcome lines straight into the role's
    ``Outcomes`` (only after that role said ``outcomes on``), the JVM's own lines with no place."""
    roles = [jvm._Role(spec("producer", i, tmp_path), Outcomes(str(tmp_path / f"p{i}"), mapped_files=False)) for i in range(2)]
    output = "hello\n@1 outcomes on\n@0 outcomes off\n@1 ready\n@0 ready\n@1 outcome 0 3 1\n@0 progress 3\n" \
             "@0 outcome 0 3 1\n@1 done 3 \n"
    fake: Any = type("Proc", (), {"stdout": io.StringIO(output)})()
    lines = jvm._Lines(fake, roles, grouped=True)
    got = []
    while (item := lines.get(5)) is not None:
        got.append(item)
    assert got == [(None, "hello"), (1, "ready"), (0, "ready"), (0, "progress 3"), (1, "done 3 ")]
    assert roles[1].outcomes is not None and roles[1].outcomes.watched
    assert roles[1].outcomes.stamps(3).min() > 0  # the three acknowledgements, stamped
    assert roles[0].outcomes is not None and not roles[0].outcomes.watched  # said off: its outcome line ignored
    for role in roles:
        assert role.outcomes is not None
        role.outcomes.close()


def test_done_lines_that_came_within_the_grace_are_taken_after_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """After the runner's interrupt, the relay takes the ``done`` of every role whose line had come by the end
    of its grace, even when turning the records over takes past it (500 roles' conversions did at 1,000
    topics): none of those roles is named as stopped before it saved."""
    roles = [jvm._Role(spec("consumer", i, tmp_path), None) for i in range(3)]
    fake: Any = type("Proc", (), {"stdout": io.StringIO("".join(f"@{i} done 5 \n" for i in range(3)))})()
    lines = jvm._Lines(fake, roles, grouped=True)
    came = [lines.get(5) for _ in roles]  # all three had come (read, then put back in their order)
    assert came == [(i, "done 5 ") for i in range(3)]
    lines.held.extend(came)
    monkeypatch.setattr(jvm, "stop_grace", lambda n: 0.0)  # the grace is over before the first is taken
    monkeypatch.setattr(jvm, "_convert", lambda spec, outcomes=None: None)
    status: Any = type("Status", (), {"items": [], "put": lambda self, item: self.items.append(item)})()
    assert jvm._finish(roles, lines, status) == []
    assert [item[:3] for item in status.items] == [("done", f"consumer-{i}", 5) for i in range(3)]


def test_jvm_roles_above_one_process_each_are_grouped_as_python_roles(tmp_path: Path) -> None:
    producers = [spec("producer", i, tmp_path) for i in range(TOPICS)]
    consumers = [spec("consumer", i, tmp_path) for i in range(TOPICS)]
    groups = _workers.groups(producers, consumers)
    names = [name for name, _ in groups]
    per = _workers.JVM_ROLE_PROCESSES  # fewer processes than for Python roles: each is a JVM
    assert names == [f"consumers-{i}" for i in range(per)] + [f"producers-{i}" for i in range(per)]
    played = sorted(s.name for _, specs in groups for s in specs)
    assert played == sorted(s.name for s in [*producers, *consumers])  # each role once
    few = _workers.groups(producers[:10], consumers[:10])
    assert all(name is None and len(specs) == 1 for name, specs in few)  # 20 roles: a process each
    resilient = [spec("producer", i, tmp_path, resilient=True) for i in range(TOPICS)]
    assert all(name is None for name, _ in _workers.groups(resilient, consumers))


class JavaWatch:
    """The JVMs of a test (java processes whose command line names a path under ``root``), seen every 50 ms
    while it runs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.seen: dict[int, str] = {}  # pid -> its spec file
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> JavaWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            for pid in java_left(self.root):
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                self.seen.setdefault(int(pid), next((a.decode() for a in argv if a.endswith(b".json")), ""))


def run_topics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, system: str, variant: dict[str, Any],
               per_kind: int) -> tuple[Any, JavaWatch]:
    monkeypatch.setattr(_workers, "JVM_ROLE_PROCESSES", per_kind)
    scenario = parse_scenario({"name": "topics", "pattern": "queue", "message_sizes": [100],
                               "messages": MESSAGES, "warmup": 0, "rate": 100 * TOPICS, "topics": TOPICS,
                               "producers_per_topic": 1, "consumers_per_topic": 1, "timeout": 60,
                               "variants": {system: [variant]}}, "test.yaml")
    with JavaWatch(tmp_path) as watch:
        out = compare([scenario], systems=[system], out_root=tmp_path,
                      console=Console(file=open(os.devnull, "w")), write_report=False)  # noqa: SIM115
    return out, watch


def check_complete(out: Any, watch: JavaWatch, tmp_path: Path, per_kind: int, acked: bool = False) -> None:
    assert out.complete, out.problems
    raw = pd.concat([pd.read_parquet(f) for f in sorted((out.run_dir / "raw").glob("*.parquet"))])
    assert sorted(raw["producer"].unique()) == list(range(TOPICS))
    for producer, rows in raw.groupby("producer"):  # every role's records: each message sent, received
        assert sorted(rows["seq"]) == list(range(MESSAGES)), f"producer {producer}"
        assert rows["t_recv"].notna().all(), f"producer {producer}: {rows['t_recv'].isna().sum()} not received"
        assert set(rows["consumer"]) == {producer}, f"producer {producer}"  # topic t: producer t, consumer t
        if acked:  # each producer's outcomes reached its own records
            assert rows["t_ack"].notna().all() and (rows["t_ack"] >= rows["t_send"]).all(), f"producer {producer}"
    assert (out.summary["lost"] == 0).all() and int(out.summary["received"].sum()) == TOPICS * MESSAGES
    assert len(watch.seen) == 2 * per_kind, watch.seen  # one JVM per group process, a group per kind
    assert all(path.endswith(".jvm-group-spec.json") for path in watch.seen.values()), watch.seen
    assert not java_left(tmp_path), f"JVMs left: {java_left(tmp_path)}"
    assert not subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True).stdout  # nor anything else


def test_72_jeromq_roles_run_in_one_jvm_per_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_jvm()
    out, watch = run_topics(tmp_path, monkeypatch, "jeromq", {"name": "default"}, per_kind=2)
    check_complete(out, watch, tmp_path, per_kind=2)


@pytest.mark.broker
@pytest.mark.parametrize(("system", "variant"), [
    ("kafka", {"name": "java", "client": "java"}),
    ("rabbitmq", {"name": "java", "client": "java", "confirms": True}),
    ("rocketmq", {"name": "java", "client": "java"}),  # synchronous sends: each acknowledged
])
def test_72_java_client_roles_of_a_broker_run_in_one_jvm_per_group(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, system: str, variant: dict[str, Any]) -> None:
    """Each role's records and acknowledgements stay its own in a JVM of many (RocketMQ's roles there share
    one client instance)."""
    require_backend(system)
    need_jvm()
    out, watch = run_topics(tmp_path, monkeypatch, system, variant, per_kind=2)
    check_complete(out, watch, tmp_path, per_kind=2, acked=True)


def test_a_role_failing_in_a_group_is_named_and_leaves_no_jvm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two producers in one JVM told to bind the same endpoint: one cannot, and the case fails naming it."""
    need_jvm()
    from harness.runner.case import CaseFailed, run_case
    from tests.harness.runner.test_jvm_worker import clashing_producers

    monkeypatch.setattr(_workers, "ONE_PROCESS_EACH", 2)  # 3 roles: a consumer group and a producer group
    monkeypatch.setattr(_workers, "JVM_ROLE_PROCESSES", 1)
    case, driver = clashing_producers()
    with JavaWatch(tmp_path) as watch, pytest.raises(CaseFailed) as failed:
        run_case(case, driver, tmp_path / "work")
    message = str(failed.value)
    assert message.startswith(("producer-0: jeromq (java)", "producer-1: jeromq (java)")), message
    assert "\n" not in message
    assert len(watch.seen) == 2  # the producers' JVM and the consumer's
    assert not java_left(tmp_path)


def test_an_interrupt_while_records_are_saved_waits_until_they_are_whole(tmp_path: Path) -> None:
    """A 1,000-topic run here: the runner's SIGUSR1 came inside ``np.savez`` of a group's relay, broke the
    file and lost every role of the group. It now interrupts once the records are saved."""
    import signal
    import time

    import numpy as np

    from harness.runner._context import Interrupted
    from harness.runner._records import save

    def interrupt(signum: int, frame: Any) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        with pytest.raises(Interrupted):
            with jvm._whole():
                os.kill(os.getpid(), signal.SIGUSR1)
                time.sleep(0.05)  # the handler would have run here
                save(str(tmp_path / "consumer-0"), t_recv=np.arange(1000, dtype="<i8"))
        assert np.load(tmp_path / "consumer-0.npz")["t_recv"].sum() == sum(range(1000))  # whole
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_an_interrupt_while_a_done_line_is_handled_loses_no_role(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner's SIGUSR1 came while the relay converted one role's records after ``stop``: the interrupt
    was raised between that conversion and the role's report, so the role was named as stopped before it
    saved although its records were whole (one consumer of each 500-role JVM at 1,000 RocketMQ topics). The
    interrupt now waits until the line is handled, and the relay's grace takes the rest."""
    import signal
    import time
    from types import SimpleNamespace

    from harness.runner._context import Interrupted
    from harness.runner.worker import _interrupt

    roles = [jvm._Role(spec("consumer", i, tmp_path), None) for i in range(3)]
    output = "hello\n" + "".join(f"@{i} done {i + 5} \n" for i in range(3))
    proc: Any = SimpleNamespace(stdout=io.StringIO(output), stdin=io.StringIO(), pid=os.getpid(), wait=lambda: 0)
    converted: list[str] = []

    def convert(spec: WorkerSpec, outcomes: Any = None) -> None:
        if not converted:  # the runner's interrupt comes during the first conversion
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.05)  # where the handler would have run
        converted.append(spec.name)

    monkeypatch.setattr(jvm, "_convert", convert)
    monkeypatch.setattr(jvm, "check_clock", lambda send, lines: None)
    status: Any = SimpleNamespace(items=[])
    status.put = status.items.append
    ctx: Any = SimpleNamespace(start=threading.Event(), stop=threading.Event(), released=lambda: False,
                               status=status, progress={})
    lines = jvm._Lines(proc, roles, grouped=True)
    previous = signal.signal(signal.SIGUSR1, _interrupt)  # the worker process's handler
    try:
        with pytest.raises(Interrupted):
            jvm._drive(roles, proc, lines, ctx, tmp_path / "jvm.log")
        assert jvm._finish(roles, lines, status) == []  # no role left to name as stopped before saving
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert converted == [f"consumer-{i}" for i in range(3)]
    assert status.items == [("done", f"consumer-{i}", i + 5, "") for i in range(3)]


def test_ctrl_c_during_a_grouped_jvm_case_leaves_no_jvm(tmp_path: Path) -> None:
    """``mqbench compare`` of 72 JeroMQ roles (16 JVMs of a group each) stopped by Ctrl-C mid-run: it says
    so without a traceback, marks the run incomplete, and no JVM outlives it."""
    import json
    import signal
    import sys
    import time

    from harness.pipeline import run_folders

    need_jvm()
    scenario = tmp_path / "topics.yaml"
    scenario.write_text(f"name: topics\npattern: queue\nmessage_sizes: [100]\nduration: 120s\nrate: {100 * TOPICS}\n"
                        f"topics: {TOPICS}\nproducers_per_topic: 1\nconsumers_per_topic: 1\nsystems: [jeromq]\n")
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "compare", str(scenario), "--out",
                             str(tmp_path / "res")], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(java_left(tmp_path)) < 2 * _workers.JVM_ROLE_PROCESSES:
            time.sleep(0.5)
        assert len(java_left(tmp_path)) == 2 * _workers.JVM_ROLE_PROCESSES, "the groups' JVMs never all started"
        time.sleep(3.0)  # the case under way
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    assert "interrupted" in output and "Traceback" not in output, output
    (run_dir,) = run_folders(tmp_path / "res")
    assert json.loads((run_dir / "manifest.json").read_text())["complete"] is False
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and java_left(tmp_path):
        time.sleep(0.2)
    assert not java_left(tmp_path), f"JVMs left: {java_left(tmp_path)}"
