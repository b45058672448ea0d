"""The CPU-based client-bound label (harness.metrics.bound) and the summary's CPU columns built from a CPU
table (harness.pipeline._cpu), on synthetic rows."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.metrics.bound import BROKER_IDLE_PCT, CLIENT_BUSY_PCT, NO_BROKER, client_bound
from harness.pipeline._cpu import NOT_RECORDED, cpu_columns
from harness.runfolder.schema import CPU_SUMMARY_COLUMNS, CPU_TABLE_COLUMNS


@pytest.mark.parametrize(
    ("client", "broker", "bound"),
    [
        (CLIENT_BUSY_PCT, BROKER_IDLE_PCT - 1, True),  # both thresholds inclusive as documented
        (99.0, 41.0, True),
        (CLIENT_BUSY_PCT - 1, 10.0, False),  # the client was not saturated
        (99.0, BROKER_IDLE_PCT, False),  # the broker was busy too
        (180.0, 150.0, False),  # a multi-threaded broker over one core is never called idle
        (99.0, math.nan, False),  # broker not measured (external): no claim
        (math.nan, 10.0, False),
    ],
)
def test_client_bound_with_a_broker(client: float, broker: float, bound: bool) -> None:
    label = client_bound(client, broker, "consumer-0")
    assert (label is not None) == bound
    if bound:
        assert label is not None and label.startswith("client-bound: consumer-0 used")
        assert f"{client:.0f}%" in label and f"{broker:.0f}%" in label  # the two figures behind it


@pytest.mark.parametrize(
    ("role", "side"),
    [("producer-0", "sender"), ("consumer-1", "receiver"), ("requester-0", "requester"), ("replier-0", "replier")],
)
def test_brokerless_rows_are_bound_by_their_side(role: str, side: str) -> None:
    label = client_bound(95.0, math.nan, role, brokerless=True)
    assert label is not None and label.startswith(f"{side}-bound: {role} used 95%") and NO_BROKER in label
    assert client_bound(50.0, math.nan, role, brokerless=True) is None


def _cpu(system: str, rep: int, roles: dict[str, float], note: dict[str, str] | None = None) -> list[dict]:
    base = {"run_id": "r", "scenario": "s", "pattern": "queue", "system": system, "variant": "default",
            "size": 100, "rate": math.nan, "repetition": rep, "case": f"{system}-{rep}"}
    return [{**base, "role": role, "cpu_s": pct / 100 * 2.0, "wall_s": 2.0, "core_pct": pct,
             "note": (note or {}).get(role, "")} for role, pct in roles.items()]


def test_summary_cpu_columns_from_the_cpu_table() -> None:
    rows = [
        *_cpu("redis", 0, {"harness": 3.0, "broker": 35.0, "producer-0": 97.0, "consumer-0": 60.0}),
        *_cpu("zmq", 0, {"harness": 2.0, "producer-0": 80.0, "consumer-0": 92.0}),
        *_cpu("rabbitmq", 0, {"harness": 2.0, "broker": math.nan, "producer-0": 99.0},
              {"broker": "not measured: it runs outside this harness (external)"}),
    ]
    cpu = pd.DataFrame(rows, columns=list(CPU_TABLE_COLUMNS))
    cases = pd.DataFrame({"run_id": "r", "scenario": "s", "system": ["redis", "zmq", "rabbitmq", "nats"],
                          "variant": "default", "size": 100, "rate": math.nan, "repetition": 0})
    out = cpu_columns(cases, cpu).set_index(cases["system"])
    assert list(out.columns) == list(CPU_SUMMARY_COLUMNS)
    redis, zmq, rabbit, nats = (out.loc[s] for s in ("redis", "zmq", "rabbitmq", "nats"))
    assert (redis["broker_cpu_pct"], redis["client_cpu_pct"], redis["client_cpu_role"]) == (35.0, 97.0, "producer-0")
    assert redis["harness_cpu_pct"] == 3.0
    assert redis["cpu_total_s"] == pytest.approx((3 + 35 + 97 + 60) / 100 * 2.0)
    assert redis["client_bound"].startswith("client-bound: producer-0")
    assert math.isnan(zmq["broker_cpu_pct"]) and zmq["cpu_note"] == NO_BROKER
    assert zmq["client_bound"].startswith("receiver-bound: consumer-0 used 92%")
    assert rabbit["client_bound"] == "" and rabbit["cpu_note"].startswith("not measured")
    assert nats["cpu_note"] == NOT_RECORDED and math.isnan(nats["client_cpu_pct"]) and nats["client_bound"] == ""


def test_notes_of_a_case_with_faults_keep_a_brokerless_row_labelled() -> None:
    note = "a case with faults: a process restarted by a fault is not counted after its restart"
    rows = _cpu("zmq", 0, {"harness": 1.0, "producer-0": 96.0}, {"harness": note, "producer-0": note})
    cases = pd.DataFrame({"run_id": ["r"], "scenario": "s", "system": "zmq", "variant": "default", "size": 100,
                          "rate": math.nan, "repetition": 0})
    out = cpu_columns(cases, pd.DataFrame(rows, columns=list(CPU_TABLE_COLUMNS))).iloc[0]
    assert out["cpu_note"] == f"{NO_BROKER}; {note}"  # once, however many roles carry it
    assert out["client_bound"].startswith("sender-bound")


def test_clients_that_together_fill_the_machine_bound_the_row() -> None:
    """A hundred topics' clients played in sixteen processes, none of them busy, that together left the
    broker (1 % of a core) nothing to work with on a two-core machine: client-bound, by the second rule; not
    on a machine with cores to spare, nor when the cores are not recorded, nor for a brokerless row."""
    roles = {"harness": 1.0, "broker": 1.4, **{f"consumers-{i}": 8.2 for i in range(8)},
             **{f"producers-{i}": 16.4 for i in range(8)}}
    rows = [*_cpu("kafka", 0, roles), *_cpu("zmq", 0, {k: v for k, v in roles.items() if k != "broker"})]
    cpu = pd.DataFrame(rows, columns=list(CPU_TABLE_COLUMNS))
    cases = pd.DataFrame({"run_id": "r", "scenario": "s", "system": ["kafka", "kafka", "kafka", "zmq"],
                          "variant": "default", "size": 100, "rate": math.nan, "repetition": 0})
    out = cpu_columns(cases, cpu, cores=[2, 8, None, 2])
    two, eight, unknown, brokerless = (out.iloc[i] for i in range(4))
    assert two["clients_cpu_pct"] == pytest.approx(8 * 8.2 + 8 * 16.4) and two["cpu_cores"] == 2.0
    assert two["client_bound"] == ("client-bound: the client processes together used 197% of a core, the broker "
                                   "1%, all processes 199% of the machine's 2 cores")
    assert eight["client_bound"] == "" and unknown["client_bound"] == "" and math.isnan(unknown["cpu_cores"])
    assert brokerless["client_bound"] == ""
    assert client_bound(50.0, BROKER_IDLE_PCT, clients_pct=120.0, total_pct=200.0, cores=2) is None  # busy broker
    assert client_bound(50.0, 10.0, clients_pct=160.0, total_pct=175.0, cores=2) is None  # the machine had room
