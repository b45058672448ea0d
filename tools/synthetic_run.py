"""Write a synthetic run folder of N raw records, to measure the pipeline at scale.

    python tools/synthetic_run.py results/ --rows 10000000 [--cases 8] [--seed 1]
    mqbench report results/<run-id> --engine spark      # or: --engine pandas

The run has one queue scenario (2 producers -> 1 consumer) over two systems, ``cases / 4`` sizes and two
repetitions; half the sizes run open loop (``t_intended`` set). Every case has warmup rows and some of
everything the delivery accounting counts: lost messages (0.1 %), duplicates (0.05 %), sends the producer
was told failed (0.01 %) and messages out of order (latencies vary more than the gaps between sends, so
about half). Rows go through ``RunFolder``, so the files are exactly what the runner writes.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from harness.runfolder import CaseKey, RunFolder

SYSTEMS = ("mqcore", "zmq")
PRODUCERS = 2
WARMUP = 1000  # per producer


def case_rows(rng: np.random.Generator, n: int, open_loop: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """About ``n`` raw rows of one case and repetition (RAW_SCHEMA columns without the case keys) and the
    sends that failed at the producer (``producer``, ``seq``)."""
    per = n // PRODUCERS
    producer = np.repeat(np.arange(PRODUCERS, dtype=np.int32), per)
    seq = np.tile(np.arange(per, dtype=np.int64), PRODUCERS)
    gap = rng.integers(5_000, 15_000, size=len(seq))
    t_intended = 10**13 + np.tile(np.arange(per, dtype=np.int64) * 10_000, PRODUCERS)
    t_send = t_intended + gap if open_loop else 10**13 + np.cumsum(gap)
    latency = rng.lognormal(math.log(40_000), 0.7, size=len(seq)).astype(np.int64)
    t_recv = (t_send + latency).astype("float64")
    late = rng.random(len(seq)) < 0.0005
    t_recv[late] += 3_000_000  # arrives after later messages of its producer: out of order
    lost = rng.random(len(seq)) < 0.001
    t_recv[lost] = np.nan
    frame = pd.DataFrame(
        {
            "producer": producer,
            "consumer": np.where(lost, -1, 0).astype(np.int32),
            "seq": seq,
            "warmup": seq < WARMUP,
            "t_intended": pd.array(t_intended if open_loop else [pd.NA] * len(seq), dtype="Int64"),
            "t_send": t_send,
            "t_ack": pd.array([pd.NA] * len(seq), dtype="Int64"),
            "t_recv": pd.array(t_recv, dtype="Int64"),
        }
    )
    duplicate = frame[(rng.random(len(frame)) < 0.0005) & ~lost].copy()
    duplicate["t_recv"] = duplicate["t_recv"] + 500_000
    failed = frame.sample(frac=0.0001, random_state=int(rng.integers(1 << 31)))[["producer", "seq"]]
    return pd.concat([frame, duplicate], ignore_index=True), failed


def write_run(root: Path, rows: int, cases: int = 8, seed: int = 1) -> Path:
    """A run folder under ``root`` with about ``rows`` raw rows over ``cases`` case files; its path."""
    rng = np.random.default_rng(seed)
    sizes = [64 * 4**i for i in range(max(1, cases // 4))]
    scenario = {"name": "scale", "pattern": "queue", "producers": PRODUCERS, "consumers": 1,
                "sizes": sizes, "rates": ["max"], "repetitions": 2}
    run = RunFolder.create(root, "synthetic")
    run.manifest["scenarios"] = [scenario]
    run.manifest["systems"] = {s: {"label": s, "guarantee": "at-most-once", "backend": "embedded"}
                               for s in SYSTEMS}
    per_case = rows // (len(SYSTEMS) * len(sizes) * 2)
    for system in SYSTEMS:
        for i, size in enumerate(sizes):
            open_loop = i % 2 == 1
            rate = 2 * 100_000.0 if open_loop else None
            for rep in range(2):
                frame, failed = case_rows(rng, per_case, open_loop)
                keys = {"run_id": run.run_id, "scenario": "scale", "pattern": "queue", "system": system,
                        "variant": "default", "repetition": rep, "size": size,
                        "rate": math.nan if rate is None else rate, "send_failed": False}
                frame = frame.assign(**keys)  # write_raw orders the columns and adds the host ones
                key = CaseKey("scale", system, "default", size, rate, rep)
                run.write_raw(key.raw_name, frame, failed)
                run.manifest["cases"].append({**key.manifest_entry(), "complete": True})
    run.finish(complete=True)
    return run.path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="folder to create the run folder in (e.g. results/)")
    parser.add_argument("--rows", type=int, default=1_000_000, help="raw rows in all (default 1,000,000)")
    parser.add_argument("--cases", type=int, default=8, help="case files, a multiple of 4 (default 8)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(write_run(args.root, args.rows, args.cases, args.seed))


if __name__ == "__main__":
    main()
