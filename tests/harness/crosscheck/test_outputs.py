"""The crosscheck table as the terminal and the report show it."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
from rich.console import Console

from harness.commands.crosscheck import TABLE_WIDTH, capacity, crosscheck_table, not_measured
from harness.crosscheck._tool import CrossCase, ToolResult
from harness.crosscheck.ratio import HarnessSide, row
from harness.report import crosscheck as report_section
from harness.runfolder import RunFolder
from harness.runfolder.schema import CROSSCHECK


def _rows() -> pd.DataFrame:
    side = HarnessSide("default", "redis-py", "redis (redis-py)", "at-least-once", 0, 30000.0)
    case = CrossCase("redis", 100, 1000, window=100)
    return pd.DataFrame([
        row(case, side, "redis-benchmark -P 1", ToolResult("rb", ["rb"], sender_rate=10000.0)),
        row(case, side, "redis-benchmark -P window", ToolResult("rb", ["rb"], sender_rate=100000.0,
                                                                latency_p50_us=250.0, latency_kind="round trip")),
        row(case, side, "redis-benchmark -P window", ToolResult("rb", ["rb"], sender_rate=300000.0,
                                                                settings="50 clients, pipeline 100"),
            reference="best"),
        row(CrossCase("nats", 100, 1000), side, "nats bench", None, "missing", "run make brokers"),
    ])


def test_terminal_table_fits_and_labels_client_bound_rows() -> None:
    out = io.StringIO()
    Console(file=out, width=TABLE_WIDTH).print(crosscheck_table(_rows()), width=TABLE_WIDTH)
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= TABLE_WIDTH
    pipelined = next(line for line in lines if "-P w" in line and " row " in line)
    unpipelined = next(line for line in lines if "-P 1" in line)
    best = next(line for line in lines if "-P w" in line and " best " in line)
    assert "0.30" in pipelined and pipelined.rstrip().endswith("client") and "rtt" in pipelined
    assert "3.00" in unpipelined and not unpipelined.rstrip().endswith("client")
    assert "0.10" in best and not best.rstrip().endswith("client")  # a fraction of capacity, not a label
    assert not_measured(_rows()) == ["nats: nats bench: missing: run make brokers"]
    (said,) = capacity(_rows())
    assert said.startswith("redis (redis-py), 100 B: 0.10 of what the broker carries here") and "R = 3.00" in said


def test_report_section_reads_the_run_folder_table(tmp_path: Path) -> None:
    run = RunFolder.create(tmp_path, "cc")
    summary = SimpleNamespace(runs=[SimpleNamespace(path=run.path)])
    assert report_section.render(summary) is None  # type: ignore[arg-type]
    run.write_table(CROSSCHECK, _rows(), csv=True)
    section = report_section.render(summary)  # type: ignore[arg-type]
    assert section is not None
    html, md = section
    assert "Client-bound rows: redis (against redis-benchmark -P window)." in md
    assert "<table" in html and "run make brokers" in md
    assert "- redis (redis-py), 100 B: 0.10 of what the broker carries here" in md and "at its best" in html


def test_a_missing_tool_is_a_row_and_in_ci_a_failure(tmp_path: Path, monkeypatch) -> None:
    """No broker is started for a system none of whose tools can run; the row says why in one sentence."""
    from harness.crosscheck import run as run_module
    from harness.crosscheck import tools
    from harness.scenario import load_scenarios

    monkeypatch.setattr(tools, "TOOLS", {"nats": "harness.crosscheck.tools.not_written_yet:Ghost"})
    monkeypatch.setattr(run_module, "provision", lambda *a, **k: (_ for _ in ()).throw(AssertionError("started")))
    scenario = tmp_path / "cc.yaml"
    scenario.write_text("name: cc\npattern: queue\nsystems: [nats]\nmessage_sizes: [100]\nmessages: 10\n")
    quiet = Console(file=io.StringIO())
    for strict in (False, True):
        outcome = run_module.crosscheck(load_scenarios(str(scenario)), systems=["nats"], out_root=tmp_path / f"r{strict}",
                                        backend="process", console=quiet, strict=strict, write_report=False)
        (only,) = outcome.rows.to_dict("records")
        assert only["status"] == "missing" and "not built yet" in only["note"]
        assert outcome.complete is not strict


def test_a_ctrl_c_keeps_the_rows_measured_before_it(tmp_path: Path, monkeypatch) -> None:
    """Interrupted during the second system (NATS runs before Redis), the run folder keeps the first system's
    rows and says it was interrupted (a Ctrl-C during Kafka once lost every finished system's rows)."""
    import json

    import pytest

    from harness.crosscheck import run as run_module
    from harness.scenario import load_scenarios

    ready = {name: SimpleNamespace(system=name, ready=True, backend="process", reason="") for name in ("redis", "nats")}
    monkeypatch.setattr(run_module, "resolve_systems", lambda *a, **k: ready)
    side = HarnessSide("default", "redis-py", "redis (redis-py)", "at-least-once", 0, 30000.0)

    def measure(sc, system, variants, backend, brokers, run, console, problems, strict, out) -> None:
        if system == "redis":
            raise KeyboardInterrupt
        out.append(run_module._Pending(sc.name, CrossCase(system, 100, 10), side, "nats bench",
                                       ToolResult("nats", ["nats", "bench"], sender_rate=10000.0)))

    monkeypatch.setattr(run_module, "_system", measure)
    scenario = tmp_path / "cc.yaml"
    scenario.write_text("name: cc\npattern: queue\nsystems: [redis, nats]\nmessage_sizes: [100]\nmessages: 10\n")
    with pytest.raises(KeyboardInterrupt):
        run_module.crosscheck(load_scenarios(str(scenario)), out_root=tmp_path, backend="process",
                              console=Console(file=io.StringIO()), write_report=False)
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    kept = RunFolder.open(folder).read_table(CROSSCHECK)
    assert list(kept["system"]) == ["nats"] and list(kept["tool"]) == ["nats bench"]
    manifest = json.loads((folder / "manifest.json").read_text())
    assert any("interrupted" in p for p in manifest["problems"])
