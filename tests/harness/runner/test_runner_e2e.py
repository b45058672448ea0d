"""End to end through the real runner with the `zmq` driver (pyzmq): worker processes, barrier, records,
results folder, summary; a stalled run; Ctrl-C in the middle of a run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from harness.compare import compare
from harness.drivers import SYSTEMS, register
from harness.pipeline import (
    ENGINE_VARIABLE,
    PER_REPETITION_COLUMNS,
    java_available,
    load_summary,
    run_folders,
)
from harness.report import write_report
from harness.runfolder.schema import RAW_SCHEMA
from harness.runner import _workers, worker
from harness.scenario import load_scenarios, parse_scenario

ROOT = Path(__file__).resolve().parents[3]


def quiet() -> Console:
    return Console(file=open(os.devnull, "w"), width=160)  # noqa: SIM115 - closed with the process


def run(tmp_path: Path, spec: dict, systems: list[str] | None = None):  # type: ignore[no-untyped-def]
    scenario = parse_scenario(spec, "test.yaml")
    return compare([scenario], systems=systems, out_root=tmp_path, console=quiet(), write_report=False)


def test_queue_run_writes_complete_results(tmp_path: Path) -> None:
    out = run(tmp_path, {"name": "q", "pattern": "queue", "message_sizes": [10, 100], "messages": 3000,
                         "warmup": 200, "repetitions": 2}, ["zmq"])
    assert out.complete, out.problems
    manifest = json.loads((out.run_dir / "manifest.json").read_text())
    assert manifest["complete"] is True
    assert manifest["systems"]["zmq"]["versions"]["libzmq"]
    assert manifest["host"]["clock"].startswith("CLOCK_MONOTONIC")
    assert manifest["tool"]["hot_loops"] == worker.HOT_LOOPS  # which per-message loops measured this run
    assert manifest["git_revision"]
    raws = sorted((out.run_dir / "raw").glob("*.parquet"))
    assert len(raws) == 4  # 2 sizes x 2 repetitions
    for path in raws:
        table = pq.read_table(path)
        assert table.schema.equals(RAW_SCHEMA, check_metadata=False)
        df = table.to_pandas()
        assert len(df) == 3200
        assert sorted(df["seq"]) == list(range(3200))
        assert df["t_recv"].notna().all()
        assert (df["t_recv"] >= df["t_send"]).all()
        assert df["warmup"].sum() == 200
    summary = pd.read_csv(out.run_dir / "summary.csv")
    assert list(summary.columns) == list(PER_REPETITION_COLUMNS)  # the pipeline's one summary
    assert len(summary) == 4
    assert (summary["sent"] == 3000).all() and (summary["received"] == 3000).all()
    assert (summary["lost"] == 0).all() and (summary["duplicated"] == 0).all()
    assert (summary["receiver_msgs_per_s"] > 0).all() and (summary["sender_msgs_per_s"] > 0).all()
    assert (summary["lat_p50_us"] <= summary["lat_p99_us"]).all()
    assert not list(out.run_dir.glob("**/*.tmp*"))
    assert manifest["variants"]["zmq/default"]["guarantee"] == summary["guarantee"].iloc[0]
    assert summary["complete"].all()
    assert (summary["backend"] == "embedded").all() and (summary["client"] == "pyzmq").all()
    # the report reads the stored summary: the summary is the same with or without --no-report
    before = (out.run_dir / "summary.parquet").read_bytes()
    write_report([out.run_dir])
    assert (out.run_dir / "summary.parquet").read_bytes() == before
    assert (out.run_dir / "report.html").is_file()


def test_pubsub_fixed_rate_and_reqrep(tmp_path: Path) -> None:
    scenarios = [
        parse_scenario({"name": "ps", "pattern": "pubsub", "message_sizes": [64], "messages": 2000,
                        "warmup": 200, "rate": 4000, "consumers": 2}, "t.yaml"),
        parse_scenario({"name": "rr", "pattern": "reqrep", "message_sizes": [100], "messages": 500,
                        "warmup": 50}, "t.yaml"),
    ]
    out = compare(scenarios, systems=["zmq"], out_root=tmp_path, console=quiet(), write_report=False)
    assert out.complete, out.problems
    s = out.summary.set_index("scenario")
    ps, rr = s.loc["ps"], s.loc["rr"]
    assert ps["expected"] == 4000 and ps["lost"] == 0  # every subscriber gets every message
    # open loop at 4000/s: the sender keeps the schedule, so the sender rate is close to the offered one
    assert 3000 < ps["sender_msgs_per_s"] < 5000
    assert ps["send_delay_p50_us"] >= 0 and not pd.isna(ps["lat_intended_p99_us"])
    assert rr["latency_kind"] == "round-trip" and rr["received"] == 500
    raw = pd.read_parquet(next((out.run_dir / "raw").glob("ps__*.parquet")))
    assert set(raw["consumer"]) == {0, 1}
    assert raw["t_intended"].notna().all()


def test_paced_producers_take_turns_at_the_case_rate(tmp_path: Path) -> None:
    """Four producers at 2,000 msg/s in all: producer p starts p / 2,000 s after the common start, so the
    case's intended sends, all producers together, are one every 500 us, not four at once every 2 ms."""
    out = run(tmp_path, {"name": "turns", "pattern": "queue", "message_sizes": [100], "messages": 200,
                         "warmup": 0, "rate": 2000, "producers": 4}, ["zmq"])
    assert out.complete, out.problems
    raw = pd.read_parquet(next((out.run_dir / "raw").glob("turns__*.parquet")))
    assert len(raw) == 800 and raw["t_intended"].notna().all()
    first = raw.groupby("producer")["t_intended"].min().astype("int64")
    assert list(first - first[0]) == [0, 500_000, 1_000_000, 1_500_000]
    gaps = raw["t_intended"].astype("int64").sort_values().diff().dropna()
    assert gaps.between(499_999, 500_001).all(), gaps.describe()


def _run_fake(tmp_path: Path, name: str, cls: str, options: dict):  # type: ignore[no-untyped-def]
    """A 1,000-message queue case through a test driver of fake_drivers, registered for the run only."""
    register(name, f"tests.harness.runner.fake_drivers:{cls}")
    try:
        return run(tmp_path, {"name": name, "pattern": "queue", "message_sizes": [100], "messages": 1000,
                              "warmup": 0, "timeout": 2, "variants": {name: options}}, [name])
    finally:
        SYSTEMS.pop(name, None)


def test_stalled_run_ends_with_clear_message_and_keeps_data(tmp_path: Path) -> None:
    out = _run_fake(tmp_path, "stalling", "StallingDriver", {"block_after": 300})
    assert not out.complete
    assert any("stalled" in p for p in out.problems)
    manifest = json.loads((out.run_dir / "manifest.json").read_text())
    assert manifest["complete"] is False
    raw = pd.read_parquet(next((out.run_dir / "raw").glob("*.parquet")))
    got = raw[raw["t_recv"].notna()]
    assert len(got) == 300  # what was measured before the stall is kept, with its send stamps
    assert got["t_send"].notna().all(), out.problems
    assert list(out.summary["complete"]) == [False]  # the stalled case, from the manifest's case entry


def test_a_problem_is_printed_whole_brackets_and_all(tmp_path: Path) -> None:
    """What a client says goes to the console as it is: text in square brackets is not taken for markup."""
    import io

    register("refusing", "tests.harness.runner.fake_drivers:RefusingDriver")
    printed = io.StringIO()
    try:
        scenario = parse_scenario({"name": "refused", "pattern": "queue", "message_sizes": [100], "messages": 100,
                                   "variants": {"refusing": {}}}, "test.yaml")
        out = compare([scenario], systems=["refusing"], out_root=tmp_path, console=Console(file=printed, width=400),
                      write_report=False)
    finally:
        SYSTEMS.pop("refusing", None)
    assert not out.complete
    assert any("BrokersSent: [broker-a, broker-a, broker-a]" in p for p in out.problems), out.problems
    assert "BrokersSent: [broker-a, broker-a, broker-a]" in printed.getvalue(), printed.getvalue()


def test_a_worker_that_crashes_is_named_with_its_signal(tmp_path: Path) -> None:
    out = _run_fake(tmp_path, "crashing", "CrashingDriver", {"crash_after": 200})
    assert not out.complete
    assert any("ended by SIGABRT" in p and "producer" in p for p in out.problems), out.problems


def _late_subscription(tmp_path: Path, late_ms: int, **fields: Any) -> Any:
    register("late-subscription", "tests.harness.runner.fake_drivers:LateSubscriptionDriver")
    try:
        return run(tmp_path, {"name": "late", "pattern": "pubsub", "message_sizes": [100], "messages": 3000,
                              "warmup": 0, "consumers": 2, "producers": 2, "topics": 1, "rate": 10000,
                              # no HWM: what is lost here can only be lost before the subscription arrived
                              "variants": {"late-subscription": {"late_ms": late_ms, "sndhwm": 0,
                                                                 "rcvhwm": 0}},
                              **fields},
                   ["late-subscription"])
    finally:
        SYSTEMS.pop("late-subscription", None)


def test_pubsub_starts_only_once_every_subscription_has_reached_its_publishers(tmp_path: Path) -> None:
    """Publishers that drop everything for their first second (a subscription on its way, made
    deterministic). With a fixed pause before the start, the 0.6 s of sending (3000 messages from each
    producer at 10,000/s in all) would be dropped; the probe handshake holds the start until each consumer
    hears each producer."""
    out = _late_subscription(tmp_path, 1000)
    assert out.complete and not out.problems
    row = out.summary.iloc[0]
    assert (row["expected"], row["received"], row["lost"]) == (12000, 12000, 0)  # 2 producers x 3000 x 2
    raw = pd.read_parquet(next((out.run_dir / "raw").glob("*.parquet")))
    assert set(raw["producer"]) == {0, 1}  # no probe among the rows
    for (_, _), got in raw.groupby(["producer", "consumer"]):
        assert sorted(got["seq"]) == list(range(3000)) and got["t_recv"].notna().all()


def test_pubsub_whose_subscription_never_arrives_says_so_and_shows_the_loss(tmp_path: Path) -> None:
    out = _late_subscription(tmp_path, 600_000, timeout=2)
    assert any("did not hear every producer's probe within 2 s" in p for p in out.problems)
    assert "consumer-0" in " ".join(out.problems) and "consumer-1" in " ".join(out.problems)
    row = out.summary.iloc[0]
    assert (row["expected"], row["received"], row["lost"]) == (12000, 0, 12000)


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def test_ctrl_c_stops_workers_and_marks_incomplete(tmp_path: Path) -> None:
    scenario = tmp_path / "long.yaml"
    scenario.write_text("name: long\npattern: queue\nmessage_sizes: [100]\nduration: 60s\nrate: 2000\n"
                        "systems: [zmq]\n")
    # Started with SIGINT ignored, as a non-interactive shell starts a job with `&` (and as some CI runners
    # start tests): the CLI must still stop on SIGINT.
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "compare", str(scenario), "--out", str(tmp_path / "res")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        deadline = time.monotonic() + 60
        workers: set[int] = set()
        while time.monotonic() < deadline and len(workers) < 3:  # forkserver + producer + consumer
            time.sleep(0.5)
            workers = _descendants(proc.pid)
        assert len(workers) >= 3, "workers never started"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    assert "interrupted" in output and "Traceback" not in output
    (run_dir,) = run_folders(tmp_path / "res")
    assert json.loads((run_dir / "manifest.json").read_text())["complete"] is False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in workers):
        time.sleep(0.2)
    left = [p for p in workers if Path(f"/proc/{p}").exists()]
    assert not left, f"processes left running: {left}"


def test_smoke_yaml_end_to_end(tmp_path: Path) -> None:
    scenarios = load_scenarios(ROOT / "scenarios" / "smoke.yaml")
    out = compare(scenarios, systems=["zmq"], out_root=tmp_path, console=quiet(), write_report=False)
    assert out.complete, out.problems
    assert set(out.summary["scenario"]) == {"smoke-queue", "smoke-pubsub", "smoke-reqrep"}
    assert (out.summary["lost"] == 0).all()


@pytest.mark.parametrize("argv", [["compare", "--systems", "nosuch"], ["compare", "missing.yaml"]])
def test_cli_errors_are_one_line(argv: list[str], tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "harness.cli", *argv, "--out", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    text = (proc.stdout + proc.stderr).strip()
    assert "Traceback" not in text and len(text.splitlines()) == 1, text


def test_an_engine_variable_naming_no_engine_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "compare", "--systems", "zmq", "--out", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, ENGINE_VARIABLE: "duckdb"})
    assert proc.returncode == 2
    text = (proc.stdout + proc.stderr).strip()
    assert "Traceback" not in text and len(text.splitlines()) == 1, text
    assert f"{ENGINE_VARIABLE}='duckdb' names no engine" in text
    assert not any((tmp_path).iterdir()), "nothing runs before the engine is known"


def test_compare_summarises_with_spark_unless_told_otherwise(tmp_path: Path) -> None:
    """What a user's ``make compare`` does: no ``--engine`` and no ``MQBENCH_ENGINE`` (which the suite sets to
    pandas) is Spark SQL on ``local[*]``, said on the ``computed by:`` line and in the stored summary."""
    if not java_available():
        if os.environ.get("CI") == "true":
            pytest.fail("Java 17 is required for the Spark engine in CI (openjdk-17-jre-headless)")
        pytest.skip("PySpark needs Java 17: install openjdk-17-jre-headless")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: default-engine\npattern: queue\nmessage_sizes: [100]\nmessages: 2000\nwarmup: 100\n"
                        "systems: [zmq, mqcore]\n")
    env = {k: v for k, v in os.environ.items() if k != ENGINE_VARIABLE}
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "compare", str(scenario), "--no-report",
                           "--out", str(tmp_path / "res")], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "computed by: Spark (local[*]; session start" in proc.stdout, proc.stdout
    (run_dir,) = run_folders(tmp_path / "res")
    stored = load_summary(run_dir, engine="pandas")  # reads what compare stored; computes nothing
    assert stored.engine == "spark"
    assert set(stored.per_repetition["system"]) == {"zmq", "mqcore"}
    assert (stored.per_repetition["lost"] == 0).all()


def test_unavailable_systems_are_skipped_unless_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.compare as compare_module

    real = compare_module.system_status

    def nats_missing(system: str, brokers: object = None, backend: str = "auto") -> compare_module.SystemStatus:
        if system == "nats":
            return compare_module.SystemStatus(system, False, "", "nats-server is not installed")
        return real(system, brokers, backend)  # type: ignore[arg-type]

    monkeypatch.setattr(compare_module, "system_status", nats_missing)
    spec = {"name": "x", "pattern": "queue", "systems": ["zmq", "nats"], "message_sizes": [100],
            "messages": 300, "warmup": 0}
    out = run(tmp_path, spec)  # listed by the scenario: skipped with its reason
    assert out.complete and list(out.summary["system"]) == ["zmq"]
    manifest = json.loads((out.run_dir / "manifest.json").read_text())
    assert manifest["not_available"] == {"nats": "nats-server is not installed"}
    with pytest.raises(compare_module.CompareError, match="nats cannot run here"):
        run(tmp_path, spec, ["zmq", "nats"])  # asked for with --systems: an error


@pytest.mark.parametrize("grouped", [False, True], ids=["own-process", "grouped"])
def test_a_client_that_hangs_in_its_close_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         grouped: bool) -> None:
    """A producer whose close never returns, after it saved its records and reported: alone in its process
    (interrupted) or among other roles in a group (killed), the case is complete, nothing counts as lost,
    and the run says which worker was stopped and why."""
    if grouped:
        monkeypatch.setattr(_workers, "ONE_PROCESS_EACH", 2)  # 2 topics: 4 roles in 2 group processes
        monkeypatch.setattr(_workers, "ROLE_PROCESSES", 1)
    register("hanging-close", "tests.harness.runner.fake_drivers:HangingCloseDriver")
    try:
        out = run(tmp_path, {"name": "hang", "pattern": "queue", "message_sizes": [100], "messages": 500,
                             "warmup": 0, "topics": 2, "producers_per_topic": 1,
                             "consumers_per_topic": 1, "timeout": 5}, ["hanging-close"])
    finally:
        SYSTEMS.pop("hanging-close", None)
    assert out.complete, out.problems
    assert list(out.summary["received"]) == [1000] and list(out.summary["lost"]) == [0]
    notes = json.loads((out.run_dir / "manifest.json").read_text())["cases"][0].get("notes", [])
    if grouped:  # the group ignores the interrupt: killed, and named in the case's notes
        assert any(n.startswith("producers-0: their clients did not close") for n in notes), notes
    else:  # interrupted in its close: nothing to say
        assert not notes, notes


def test_grouped_roles_set_up_their_clients_a_few_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Twelve producers in one process and twelve consumers in another, each taking 50 ms to make its client:
    at most ``SETUP_AT_ONCE`` of a process set up at once (a thousand clients connecting together overwhelm a
    broker), more than one all the same, and the case completes."""
    monkeypatch.setattr(_workers, "ONE_PROCESS_EACH", 2)
    monkeypatch.setattr(_workers, "ROLE_PROCESSES", 1)
    record = tmp_path / "most"
    register("slow-setup", "tests.harness.runner.fake_drivers:SlowSetupDriver")
    try:
        out = run(tmp_path, {"name": "setup", "pattern": "queue", "message_sizes": [100], "messages": 50,
                             "warmup": 0, "topics": 12, "producers_per_topic": 1, "consumers_per_topic": 1,
                             "variants": {"slow-setup": {"record": str(record)}}}, ["slow-setup"])
    finally:
        SYSTEMS.pop("slow-setup", None)
    assert out.complete, out.problems
    most = [int(p.read_text()) for p in tmp_path.glob("most.*")]
    assert len(most) == 2 and max(most) <= worker.SETUP_AT_ONCE and min(most) > 1, most


def _report_then_exit(status: Any, names: list[str]) -> None:
    """A group process whose roles failed: news of others first, then each role's error, then its exit."""
    for i in range(300):
        status.put(("subscribed", f"other-{i}"))
    for name in names:
        status.put(("error", name, "rocketmq (java): the role could not start its client"))


def test_a_group_that_reports_errors_and_exits_is_failed_by_its_errors_not_its_exit() -> None:
    """A 1,000-topic run here said only "consumer-584 exited (code 0) before it was ready": the group process
    had reported each role's error and ended, and the runner saw it gone before it read the errors."""
    w = _workers.Workers(2)
    names = ["consumer-0", "consumer-1"]
    p = _workers._CTX.Process(target=_report_then_exit, args=(w.status, names), daemon=True)
    p.start()
    p.join(30)
    w.procs["consumers-0"] = p
    w.group_of.update({name: "consumers-0" for name in names})
    with pytest.raises(_workers.CaseFailed) as failed:
        w.wait_ready(names)
    assert str(failed.value) == "consumer-0: rocketmq (java): the role could not start its client"
    w.status.close()
    w.status.join_thread()
