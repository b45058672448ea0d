"""Time the pipeline's engines on one run folder: Spark (session start apart) and pandas, same run.

    python tools/pipeline_scale.py RUN_DIR [--master local[2]] [--repeat 2] [--pandas]

Prints, per summary: wall seconds, CPU seconds of this process and its children (the JVM, Python workers),
and the load average when it started, so that a figure from a shared machine says what it ran beside. The
Spark session is started once, its start printed apart; the first Spark summary warms the JVM's compiler.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import psutil

from harness.pipeline import spark_session, summarize
from harness.runfolder import RunFolder, count_raw_rows


def cpu_seconds() -> float:
    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:
            pass
    return total


def timed(label: str, call: object) -> None:
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), cpu_seconds()
    call()  # type: ignore[operator]
    print(f"{label}: wall {time.perf_counter() - wall:.1f} s, cpu {cpu_seconds() - cpu:.1f} s, "
          f"load average {load:.1f} at start", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--pandas", action="store_true", help="also time the pandas engine")
    args = parser.parse_args()
    rows = count_raw_rows(RunFolder.open(args.run).raw_files())
    print(f"{args.run}: {rows:,} raw rows; {os.cpu_count()} cores", flush=True)
    session: list[object] = []
    timed(f"Spark session start ({args.master})", lambda: session.append(spark_session(args.master)))
    for i in range(args.repeat):
        timed(f"Spark summary #{i + 1}", lambda: summarize(args.run, engine="spark", spark=session[0]))
    if args.pandas:
        timed("pandas summary", lambda: summarize(args.run, engine="pandas"))


if __name__ == "__main__":
    main()
