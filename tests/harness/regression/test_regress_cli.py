"""`mqbench baseline` and `mqbench regress` end to end on synthetic run folders in tmp dirs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from harness.cli import build_parser
from harness.cli import main as mqbench
from harness.commands import baseline, regress
from harness.regression import prepare, read_run_data
from tests.harness.regression.test_regress_synthetic import manifest, scenario_dicts, summary_frame, write_run


@pytest.fixture(scope="module")
def baseline_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("results")
    run = write_run(root, summary_frame(0, run_id="run-base"), manifest("run-base", hostname="builder"))
    out = root / "baseline"
    assert mqbench(["baseline", str(run), "--out", str(out)]) == 0
    return out


def regress_run(
    tmp_path: Path, baseline_dir: Path, frame: pd.DataFrame, *args: str, **manifest_kwargs: object
) -> int:
    run = write_run(tmp_path, frame, manifest(str(frame["run_id"].iloc[0]), **manifest_kwargs))  # type: ignore[arg-type]
    return mqbench(["regress", str(run), "--baseline", str(baseline_dir), *args])


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def assert_one_sentence_error(err: str, *fragments: str) -> None:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("mqbench: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# --- baseline ---------------------------------------------------------------------------------------


def test_baseline_folder_holds_rows_ratios_and_environment(baseline_dir: Path) -> None:
    names = sorted(p.name for p in baseline_dir.iterdir())
    assert names == ["baseline.json", "ratios.csv", "summary.csv"]  # no temporary files left behind
    env = json.loads((baseline_dir / "baseline.json").read_text())
    assert env["run_id"] == "run-base" and env["reference"] == "zmq" and env["format"] == 1
    assert env["host"]["hostname"] == "builder"
    assert env["git_revision"].startswith("0123456789")
    assert env["systems"]["zmq"]["versions"]["libzmq"] == "4.3.5"
    assert [s["name"] for s in env["scenarios"]] == ["regress-queue", "regress-reqrep"]
    rows = pd.read_csv(baseline_dir / "summary.csv")
    assert len(rows) == 2 * 4 * 6  # systems x cases x repetitions
    assert "receiver_msgs_per_s" in rows.columns and "lost" not in rows.columns
    ratios = pd.read_csv(baseline_dir / "ratios.csv")
    assert set(ratios["system"]) == {"mqcore"} and len(ratios) == 8 * 6


def test_baseline_refuses_too_few_repetitions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, summary_frame(0, repetitions=4), manifest(repetitions=4))
    assert mqbench(["baseline", str(run), "--out", str(tmp_path / "b")]) == 2
    assert_one_sentence_error(capsys.readouterr().err, "at least 5 repetitions", "has 4")
    assert not (tmp_path / "b").exists()


def test_baseline_refuses_an_incomplete_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, summary_frame(0), manifest(complete=False))
    assert mqbench(["baseline", str(run), "--out", str(tmp_path / "b")]) == 2
    assert_one_sentence_error(capsys.readouterr().err, "incomplete")


def test_baseline_pools_several_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = [
        write_run(tmp_path, summary_frame(seed, run_id=f"run-{seed}"), manifest(f"run-{seed}"))
        for seed in (10, 11, 12)
    ]
    out = tmp_path / "pooled"
    assert mqbench(["baseline", *map(str, runs), "--out", str(out)]) == 0
    assert "run-10, run-11, run-12" in capsys.readouterr().out
    env = json.loads((out / "baseline.json").read_text())
    assert env["runs"] == ["run-10", "run-11", "run-12"] and env["run_id"] == "run-10"
    ratios = pd.read_csv(out / "ratios.csv")
    # Every run's repetitions kept, renumbered: 8 metrics x 3 runs x 6 repetitions, none paired across runs.
    assert len(ratios) == 8 * 18 and sorted(ratios["repetition"].unique()) == list(range(18))
    direct = pd.concat(
        [prepare(read_run_data(r), "zmq") for r in runs], ignore_index=True
    )["ratio"].sort_values(ignore_index=True)
    assert ratios["ratio"].sort_values(ignore_index=True).to_numpy() == pytest.approx(direct.to_numpy())
    # The check reads a pooled baseline like any other: unchanged code passes, a 2x slowdown fails.
    assert regress_run(tmp_path / "same", out, summary_frame(13, run_id="run-13")) == 0
    assert "3 pooled runs" in capsys.readouterr().out
    assert regress_run(tmp_path / "slow", out, summary_frame(14, slowdown=2.0, run_id="run-14")) == 1


def test_a_baseline_is_extended_with_new_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second, third = (
        write_run(tmp_path, summary_frame(seed, run_id=f"run-{seed}"), manifest(f"run-{seed}")) for seed in (20, 21, 22)
    )
    out = tmp_path / "baseline"
    assert mqbench(["baseline", str(first), str(second), "--out", str(out)]) == 0
    before = pd.read_csv(out / "summary.csv")
    capsys.readouterr()
    # The baseline folder itself is a source: read first, then rewritten in place with the new run's rows.
    assert mqbench(["baseline", str(out), str(third), "--out", str(out)]) == 0
    assert "run-20, run-21, run-22" in capsys.readouterr().out
    env = json.loads((out / "baseline.json").read_text())
    assert env["runs"] == ["run-20", "run-21", "run-22"] and env["run_id"] == "run-20"
    after = pd.read_csv(out / "summary.csv")
    assert len(after) == len(before) * 3 // 2 and sorted(after["repetition"].unique()) == list(range(18))
    kept = after[after["repetition"] < 12].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, before, check_like=True)  # the old repetitions, unchanged
    ratios = pd.read_csv(out / "ratios.csv")
    direct = pd.concat([prepare(read_run_data(r), "zmq") for r in (first, second, third)])
    assert ratios["ratio"].sort_values(ignore_index=True).to_numpy() == pytest.approx(
        direct["ratio"].sort_values(ignore_index=True).to_numpy())
    assert regress_run(tmp_path / "same", out, summary_frame(23, run_id="run-23")) == 0
    assert "3 pooled runs" in capsys.readouterr().out


def test_a_baseline_made_against_another_reference_is_not_pooled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path, summary_frame(30, run_id="run-30"), manifest("run-30"))
    out = tmp_path / "baseline"
    assert mqbench(["baseline", str(run), "--out", str(out)]) == 0
    capsys.readouterr()
    assert mqbench(["baseline", str(out), str(run), "--reference", "mqcore", "--out", str(tmp_path / "other")]) == 2
    assert_one_sentence_error(capsys.readouterr().err, "a baseline made against 'zmq'", "--reference zmq")
    assert not (tmp_path / "other").exists()


def test_baseline_refuses_to_pool_different_scenarios(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_run(tmp_path, summary_frame(1, run_id="run-a"), manifest("run-a"))
    changed = scenario_dicts(6)
    changed[0]["warmup"] = 50
    b = write_run(tmp_path, summary_frame(2, run_id="run-b"), manifest("run-b", scenarios=changed))
    assert mqbench(["baseline", str(a), str(b), "--out", str(tmp_path / "b")]) == 2
    assert_one_sentence_error(capsys.readouterr().err, "run-b", "only runs of one scenario can be pooled")
    assert not (tmp_path / "b").exists()


# --- regress: verdicts ------------------------------------------------------------------------------


def test_same_performance_passes(
    tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert regress_run(tmp_path, baseline_dir, summary_frame(1)) == 0
    out = capsys.readouterr().out
    assert "baseline ratio" in out and "p-value" in out
    assert last_line(out).startswith("No regression: 8 metric(s) of mqcore checked")
    assert "different hosts" in out  # built on "builder", checked on "ci-runner"


def test_the_run_a_baseline_came_from_reads_no_change_on_every_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Random floats: pandas' default CSV parser reads about one in four a unit in the last place off, which
    # once made a run compared with itself read -0.0 %.
    run = write_run(tmp_path, summary_frame(7, run_id="run-self"), manifest("run-self"))
    assert mqbench(["baseline", str(run), "--out", str(tmp_path / "baseline")]) == 0
    capsys.readouterr()
    assert mqbench(["regress", str(run), "--baseline", str(tmp_path / "baseline")]) == 0
    out = capsys.readouterr().out
    changes = re.findall(r"[+-]\d+\.\d%", out)
    assert len(changes) == 8 and set(changes) == {"+0.0%"}, out


def test_a_2x_slowdown_fails_naming_system_and_metric(
    tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = summary_frame(2, slowdown=2.0, slow_metrics={"receiver_msgs_per_s"})
    assert regress_run(tmp_path, baseline_dir, frame) == 1
    line = last_line(capsys.readouterr().out)
    assert line.startswith("REGRESSION: mqcore receiver throughput at 100 B (regress-queue) fell 5")
    assert "relative to zmq" in line and "64 KiB" in line and "sender" not in line


def test_latency_regression_and_per_metric_threshold(
    tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = summary_frame(3, slowdown=1.4, slow_metrics={"lat_p99_us"})
    assert regress_run(tmp_path / "a", baseline_dir, frame) == 1
    assert "mqcore RTT p99 at 100 B (regress-reqrep) rose" in last_line(capsys.readouterr().out)
    assert regress_run(tmp_path / "b", baseline_dir, frame, "--metric-threshold", "lat_p99_us=0.6") == 0


def test_an_improvement_passes(
    tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert regress_run(tmp_path, baseline_dir, summary_frame(4, slowdown=0.5)) == 0
    assert "(8 improved)" in last_line(capsys.readouterr().out)


def test_a_test_build_can_stand_in_for_the_baseline_system(
    tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = summary_frame(5, slowdown=2.0).replace({"system": {"mqcore": "mqcore-delayed"}})
    assert regress_run(tmp_path, baseline_dir, frame, "--baseline-system", "mqcore-delayed=mqcore") == 1
    assert last_line(capsys.readouterr().out).startswith("REGRESSION: mqcore-delayed ")


def test_a_reported_system_is_judged_and_shown_but_never_fails(
    tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = summary_frame(7, slowdown=1.4, slow_metrics={"lat_p99_us"})
    assert regress_run(tmp_path / "a", baseline_dir, frame, "--report-only", "mqcore") == 0
    out = capsys.readouterr().out
    assert "Reported, not gated: mqcore RTT p99 at 100 B (regress-reqrep)" in out
    assert last_line(out).startswith("No regression")
    # naming another variant reports nothing of the default one: the regression fails the check again
    assert regress_run(tmp_path / "b", baseline_dir, frame, "--report-only", "mqcore:busy-poll") == 1
    assert "mqcore RTT p99 at 100 B (regress-reqrep) rose" in last_line(capsys.readouterr().out)


def test_a_reported_system_with_too_few_repetitions_is_left_out_with_a_note(
    tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under load a busy-polling variant can lose whole repetitions: reported only, it must not end the check."""
    frame = summary_frame(9)
    lost = (frame["system"] == "mqcore") & (frame["pattern"] == "reqrep") & (frame["repetition"] < 2)
    frame = frame[~lost]
    assert regress_run(tmp_path / "a", baseline_dir, frame, "--report-only", "mqcore") == 0
    out = capsys.readouterr().out
    assert "Reported only, too few repetitions measured to report (fewer than 5): mqcore RTT p50" in out
    assert last_line(out).startswith("No regression")
    # gated, the same run cannot be judged: one sentence, not a pass
    assert regress_run(tmp_path / "b", baseline_dir, frame) not in (0, 1)
    assert_one_sentence_error(capsys.readouterr().err, "at least 5 repetitions", "has 4")


def test_wired_into_mqbench(tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, summary_frame(6), manifest())
    assert mqbench(["regress", str(run), "--baseline", str(baseline_dir), "--threshold", "0.2"]) == 0
    assert "No regression" in capsys.readouterr().out
    assert mqbench(["baseline", str(run), "--out", str(tmp_path / "b2")]) == 0
    assert (tmp_path / "b2" / "baseline.json").is_file()
    assert mqbench(["regress", str(tmp_path / "missing"), "--baseline", str(baseline_dir)]) == 2


def test_the_parser_routes_both_subcommands_to_their_modules() -> None:
    parser = build_parser()
    args = parser.parse_args(["regress", "run", "--metric-threshold", "lat_p99_us=0.25"])
    assert args.run is regress.run and args.metric_threshold == ["lat_p99_us=0.25"]
    assert args.reference == "zmq" and args.baseline == "results/baseline"
    args = parser.parse_args(["baseline", "a", "b", "--reference", "zmq:tuned"])
    assert args.run is baseline.run and args.run_dirs == ["a", "b"] and args.reference == "zmq:tuned"


# --- regress: unusable input -> exit 2 and one sentence -------------------------------------------


def test_missing_run_folder(baseline_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert mqbench(["regress", str(tmp_path / "nope"), "--baseline", str(baseline_dir)]) == 2
    assert_one_sentence_error(capsys.readouterr().err, "no such run folder")


def test_missing_summary_or_manifest(
    tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path, summary_frame(1), manifest())
    (run / "manifest.json").unlink()
    assert mqbench(["regress", str(run), "--baseline", str(baseline_dir)]) == 2
    assert_one_sentence_error(capsys.readouterr().err, "manifest.json: missing")
    (run / "summary.parquet").unlink()
    assert mqbench(["regress", str(run), "--baseline", str(baseline_dir)]) == 2
    assert_one_sentence_error(capsys.readouterr().err, "summary.parquet: missing")


def test_missing_or_damaged_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, summary_frame(1), manifest())
    assert mqbench(["regress", str(run), "--baseline", str(tmp_path / "none")]) == 2
    assert_one_sentence_error(capsys.readouterr().err, "no such baseline folder", "mqbench baseline")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "baseline.json").write_text("{not json")
    assert mqbench(["regress", str(run), "--baseline", str(broken)]) == 2
    assert_one_sentence_error(capsys.readouterr().err, "not readable JSON")


def test_no_reference_system(tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert regress_run(tmp_path, baseline_dir, summary_frame(1), "--reference", "nats") == 2
    assert_one_sentence_error(capsys.readouterr().err, "'nats' was not measured")


def test_too_few_repetitions(tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    frame = summary_frame(1, repetitions=3)
    assert regress_run(tmp_path, baseline_dir, frame, repetitions=3) == 2
    assert_one_sentence_error(capsys.readouterr().err, "at least 5 repetitions", "has 3", "repetitions: 5")


def test_baseline_for_a_different_scenario(
    tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = summary_frame(1, scenario_names={"regress-queue": "smoke-queue", "regress-reqrep": "smoke-rr"})
    other_manifest = [{**s, "name": "smoke-" + s["pattern"]} for s in scenario_dicts(6)]
    assert regress_run(tmp_path / "a", baseline_dir, other, scenarios=other_manifest) == 2
    assert_one_sentence_error(capsys.readouterr().err, "baseline is for scenario(s) regress-queue")
    # Same name, other sizes: caught from the manifest's scenario definition.
    frame = summary_frame(1, sizes=(100, 1000, 65536))
    changed = scenario_dicts(6, sizes=(100, 1000, 65536))
    changed[0]["warmup"] = 50
    assert regress_run(tmp_path / "b", baseline_dir, frame, scenarios=changed) == 2
    assert_one_sentence_error(capsys.readouterr().err, "different scenario", "warmup is 1000 in the baseline")


def test_incomplete_run(tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert regress_run(tmp_path, baseline_dir, summary_frame(1), complete=False) == 2
    assert_one_sentence_error(capsys.readouterr().err, "marked incomplete")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--metric-threshold", "lat_p95_us=0.2"], "unknown metric 'lat_p95_us'"),
        (["--metric-threshold", "lat_p99_us"], "expected NAME=VALUE"),
        (["--metric-threshold", "lat_p99_us=20"], "fraction between 0 and 1"),
        (["--threshold", "0"], "--threshold must be a fraction"),
        (["--alpha", "1.5"], "--alpha must be a fraction"),
    ],
)
def test_bad_options(
    tmp_path: Path, baseline_dir: Path, capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    assert regress_run(tmp_path, baseline_dir, summary_frame(1), *args) == 2
    assert_one_sentence_error(capsys.readouterr().err, fragment)


def test_the_regression_scenario_file_is_usable() -> None:
    from harness.regression import MIN_REPETITIONS
    from harness.scenario import load_scenarios

    scenarios = load_scenarios(Path(__file__).parents[3] / "scenarios" / "regress.yaml")
    assert {s.pattern.value for s in scenarios} == {"queue", "reqrep"}
    for s in scenarios:
        assert s.systems == ("mqcore", "zmq")
        assert s.repetitions >= MIN_REPETITIONS
    # the round trip gates on mqcore without busy polling (load-proof) and reports it as shipped
    reqrep = next(s for s in scenarios if s.pattern.value == "reqrep")
    variants = {v.name: v.options for v in reqrep.variants_for("mqcore")}
    assert variants == {"busy-poll": {}, "no-busy-poll": {"busy_poll": 0}}
    makefile = (Path(__file__).parents[3] / "Makefile").read_text()
    assert "--report-only mqcore:busy-poll" in makefile
