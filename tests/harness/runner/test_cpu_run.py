"""A smoke run of a brokerless system (zmq) and a broker that starts fast (redis) through the real runner:
the run folder's CPU table has every process role of every case, the summary's CPU columns are filled,
and the report shows them."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from harness.brokers import choose_backend
from harness.compare import compare
from harness.metrics.bound import NO_BROKER
from harness.runfolder import RunFolder
from harness.runfolder.schema import CPU, CPU_SUMMARY_COLUMNS, CPU_TABLE_COLUMNS
from harness.scenario import parse_scenario


def test_zmq_and_redis_record_cpu_per_process(tmp_path: Path) -> None:
    choice = choose_backend("redis")
    if choice.backend is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"redis: {choice.reason}")
        pytest.skip(f"redis: {choice.reason}")
    scenario = parse_scenario({"name": "cpu-smoke", "pattern": "queue", "message_sizes": [100], "messages": 5000,
                               "warmup": 200, "repetitions": 1}, "test.yaml")
    out = compare([scenario], systems=["zmq", "redis"], out_root=tmp_path,
                  console=Console(file=open(os.devnull, "w")), write_report=True)  # noqa: SIM115
    assert out.complete, out.problems

    cpu = RunFolder.open(out.run_dir).read_table(CPU)
    assert list(cpu.columns) == list(CPU_TABLE_COLUMNS)
    assert (out.run_dir / f"{CPU}.csv").is_file()
    roles = {system: set(group["role"]) for system, group in cpu.groupby("system")}
    assert roles == {"zmq": {"harness", "producer-0", "consumer-0"},
                     "redis": {"harness", "broker", "producer-0", "consumer-0"}}
    assert cpu["cpu_s"].notna().all() and (cpu["cpu_s"] >= 0).all() and (cpu["wall_s"] > 0).all()

    summary = out.summary.set_index("system")
    assert set(CPU_SUMMARY_COLUMNS) <= set(out.summary.columns)
    redis, zmq = summary.loc["redis"], summary.loc["zmq"]
    for row in (redis, zmq):
        assert not math.isnan(row["client_cpu_pct"]) and row["client_cpu_role"] in ("producer-0", "consumer-0")
        assert not math.isnan(row["harness_cpu_pct"]) and row["cpu_total_s"] >= 0
    assert not math.isnan(redis["broker_cpu_pct"]) and redis["cpu_note"] == ""
    assert math.isnan(zmq["broker_cpu_pct"]) and zmq["cpu_note"] == NO_BROKER

    html = (out.run_dir / "report.html").read_text()
    md = (out.run_dir / "summary.md").read_text()
    table = md[md.index("## CPU per case"):md.index("## Delivery")]
    assert "CPU per case" in html and "broker CPU" in html
    broker_figure = f"{redis['broker_cpu_pct']:.0f}%"
    assert any(line.startswith("| redis") and broker_figure in line for line in table.splitlines())
    assert pd.read_csv(out.run_dir / "summary.csv")["cpu_note"].fillna("").tolist().count(NO_BROKER) == 1


def test_a_worker_whose_client_runs_in_the_jvm_is_metered_with_its_jvm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.drivers.java import JeromqDriver, unavailable_reason
    from harness.runner import _workers
    from harness.runner.case import Case, run_case
    from harness.scenario import Variant

    reason = unavailable_reason()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the JVM worker cannot run: {reason}")
        pytest.skip(reason)
    metered: dict[str, list[str]] = {}

    class Recording(_workers.CpuMeter):
        def __init__(self, roles: dict[str, list[int]]) -> None:
            super().__init__(roles)
            metered.update({role: [_command(pid) for pid in pids] for role, pids in roles.items()})

    monkeypatch.setattr(_workers, "CpuMeter", Recording)
    scenario = parse_scenario({"name": "j", "pattern": "queue", "message_sizes": [100], "messages": 2000,
                               "warmup": 0, "timeout": 20}, "t.yaml")
    variant = Variant(system="jeromq", name="default", options={})
    result = run_case(Case(scenario, variant, 100, None, 0, "run", None), JeromqDriver({}), tmp_path / "work")
    assert result.complete, result.problems
    assert {u.role for u in result.cpu} == {"harness", "producer-0", "consumer-0"}  # no broker row
    for role in ("producer-0", "consumer-0"):
        assert metered[role][-1] == "java", metered  # the worker's relay and the JVM it started


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_an_external_broker_is_not_measured_and_says_so(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import time

    from harness.brokers import free_port

    server = shutil.which("redis-server")
    if server is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is not installed (make brokers)")
        pytest.skip("redis-server is not installed (make brokers)")
    port = free_port()
    redis = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # the external check below retries the connection anyway
        scenario = parse_scenario({"name": "ext", "pattern": "queue", "message_sizes": [100], "messages": 2000,
                                   "warmup": 100, "repetitions": 1}, "test.yaml")
        out = compare([scenario], systems=["redis"], out_root=tmp_path / "results",
                      brokers={"redis": f"redis://127.0.0.1:{port}"},
                      console=Console(file=open(os.devnull, "w")), write_report=False)  # noqa: SIM115
    finally:
        redis.kill()
        redis.wait()
    assert out.complete, out.problems
    row = out.summary.iloc[0]
    assert math.isnan(row["broker_cpu_pct"]) and row["cpu_note"].startswith("not measured: it runs outside")
    assert row["client_bound"] == ""  # no claim without the broker's figure
    assert not math.isnan(row["client_cpu_pct"])
