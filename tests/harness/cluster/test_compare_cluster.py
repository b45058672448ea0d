"""`mqbench compare --spark-master` on a standalone master and two workers, each worker in its own host
namespace, a Redis broker on a third host: the producer runs on one worker host, the consumer on the
other, the pipeline on the same cluster. A Ctrl-C and a broker killed mid-case leave no process of the run
on the worker hosts, and the cluster the test started stays up. Everything started here is stopped by pid
(namespaces by name) at the end, also when a test fails. These tests also cover the barrier stage itself
(roles on their hosts, one executor each, clock offsets bracketing 0 on one kernel)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import redis

from harness.cluster._case import WORKER_COMM
from harness.network import Network, leftovers, network
from harness.pipeline import PER_REPETITION_COLUMNS, run_folders
from harness.runfolder.schema import HOST_COLUMNS
from tests.harness.cluster.standalone import Cluster, standalone
from tests.harness.network.support import require_root
from tests.harness.runner.test_jvm_worker import _within

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]
MQBENCH = Path(sys.executable).parent / "mqbench"
WORKER_HOSTS = ("prod", "cons")
SCENARIO = """
name: cluster-queue
description: one producer and one consumer on two hosts of a Spark cluster, through Redis on a third
pattern: queue
systems: [redis]
message_sizes: [100]
messages: 2000
warmup: 200
rate: 2000
repetitions: 1
hosts: {producers: prod, consumers: cons}
"""
# Long enough to be interrupted mid-case; the tests end it long before its minute is up.
LONG = """
name: cluster-long
pattern: queue
systems: [redis]
message_sizes: [100]
duration: 60s
rate: 1000
hosts: {producers: prod, consumers: cons}
"""
# Brokerless: the producer (queue) and the replier (reqrep) listen on their host's address, the other side
# connects there; one run, so one Spark session for both.
BROKERLESS = """
name: cluster-zmq-queue
pattern: queue
systems: [zmq]
message_sizes: [100]
messages: 2000
warmup: 200
rate: 2000
hosts: {producers: prod, consumers: cons}
---
name: cluster-zmq-reqrep
pattern: reqrep
systems: [zmq]
message_sizes: [100]
messages: 500
warmup: 50
rate: 500
hosts: {producers: prod, consumers: cons}
"""
REDIS_PORT = 6391
DOOMED_PORT = 6392  # the failure test's own Redis, killed mid-case


@dataclass
class Site:
    """The module's cluster: the hosts' network, the standalone Spark cluster, and Redis on host ``brk``."""

    net: Network
    cluster: Cluster
    redis_pid: int

    def broker(self, port: int = REDIS_PORT) -> str:
        return f"redis://{self.net.address('brk')}:{port}"

    def redis(self, port: int) -> redis.Redis:
        return redis.Redis(host=self.net.address("brk"), port=port, socket_timeout=5)

    def executor_side(self) -> dict[int, str]:
        """Every process on the worker hosts besides the Spark workers the test started (executors, their
        Python workers, our workers), with its name."""
        found = {}
        for host in WORKER_HOSTS:
            listed = subprocess.run(["ip", "netns", "pids", str(self.net.namespace(host))], capture_output=True,
                                    text=True, check=True).stdout.split()
            found.update({int(p): _comm(int(p)) for p in listed if int(p) not in self.cluster.pids})
        return found

    def assert_clean(self) -> None:
        """Nothing of a finished run is left on the worker hosts: the stage's tasks and our workers end with
        the run, Spark's executors (and their Python workers) once its session is stopped."""
        assert _within(60, lambda: not self.executor_side()), f"left on the worker hosts: {self.executor_side()}"

    def workers(self) -> set[str]:
        """The names of our worker processes running on the worker hosts (mqb-producer-0, ...)."""
        return {name for name in self.executor_side().values() if name.startswith(WORKER_COMM)}


def _redis_server(net: Network, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*net.prefix_for("brk"), "redis-server", "--bind", net.address("brk"), "--port", str(port), "--save", "",
         "--appendonly", "no", "--protected-mode", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _alive(pid: int, group: bool = False) -> bool:
    """Whether process ``pid`` (with ``group``: any process of group ``pid``) still runs."""
    try:
        (os.killpg if group else os.kill)(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    require_root()
    tmp = tmp_path_factory.mktemp("cluster")
    with network(["prod", "cons", "brk"]) as net:
        assert net is not None
        prefix = net.prefix
        broker = _redis_server(net, REDIS_PORT)
        try:
            with standalone(tmp, hosts=WORKER_HOSTS, net=net) as cluster:
                yield Site(net, cluster, broker.pid)
        finally:
            _stop(broker)
    # the Spark master and workers ended on SIGTERM (by pid), nothing else of theirs is left
    assert cluster.killed == [], f"had to SIGKILL {cluster.killed}"
    assert not [pid for pid in [*cluster.pids, broker.pid] if _alive(pid)]
    assert leftovers(prefix) == []


def _command(site: Site, tmp_path: Path, scenario: str, port: int | None = REDIS_PORT) -> list[str]:
    """`mqbench compare` of ``scenario`` on the cluster; with ``port``, against the Redis there."""
    (tmp_path / "s.yaml").write_text(scenario)
    broker = [] if port is None else ["--systems", "redis", "--broker", f"redis={site.broker(port)}"]
    return [str(MQBENCH), "compare", str(tmp_path / "s.yaml"), *broker, "--no-report", "--out", str(tmp_path / "res"),
            "--spark-master", site.cluster.master]


def _env(site: Site) -> dict[str, str]:
    return {**os.environ, "SPARK_LOCAL_IP": site.net.address(None)}


@pytest.fixture(scope="module")
def finished(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One `mqbench compare` of the Redis queue and the two brokerless scenarios on the cluster (one Spark
    session, as a user's run of several scenarios has), run to its end; its run folder."""
    tmp_path = tmp_path_factory.mktemp("finished")
    command = _command(site, tmp_path, SCENARIO + "---" + BROKERLESS, port=None)
    done = subprocess.run([*command, "--broker", f"redis={site.broker()}"], cwd=ROOT, env=_env(site),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    site.assert_clean()
    (run,) = run_folders(tmp_path / "res")
    return run


def _raw(run: Path, scenario: str) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(p) for p in (run / "raw").iterdir() if p.name.split("__")[0] == scenario])


def test_compare_places_producer_and_consumer_on_two_worker_hosts(site: Site, finished: Path) -> None:
    net, run = site.net, finished
    raw = _raw(run, "cluster-queue")
    assert set(raw["send_host"]) == {"prod"} and set(raw["recv_host"]) == {"cons"}
    assert raw["send_executor"].iloc[0].startswith(net.address("prod"))
    assert raw["recv_executor"].iloc[0].startswith(net.address("cons"))
    clocks = pd.read_parquet(run / "clocks.parquet")
    assert set(clocks["host"]) == {"prod", "cons"}
    for r in clocks.itertuples():  # one kernel: the true offset is 0, within the measured bound
        assert abs(r.offset_ns) <= r.uncertainty_ns
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["summary"]["engine"] == "spark" and manifest["complete"]
    summary = pd.read_parquet(run / "summary.parquet")
    assert list(summary.columns) == list(PER_REPETITION_COLUMNS)  # the columns of a run on one machine
    summary = summary.set_index("scenario")
    redis_row = summary.loc["cluster-queue"]
    assert redis_row["system"] == "redis" and redis_row["lost"] == 0 and pd.notna(redis_row["lat_p50_us"])
    clock = clocks[clocks["scenario"] == "cluster-queue"]["latency_uncertainty_ns"].max()
    assert redis_row["clock_uncertainty_us"] == pytest.approx(clock / 1e3)
    assert set(HOST_COLUMNS) <= set(raw.columns)


def _mid_case(
    site: Site, tmp_path: Path, port: int, then: Callable[[subprocess.Popen[bytes]], None]
) -> tuple[int, str]:
    """Start `mqbench compare` of the long scenario against the Redis on ``port`` as a user would (its own
    process group), call ``then(proc)`` once both workers run on their hosts and messages reach Redis, and
    return its exit status and output once it has exited. Asserts that the run is marked incomplete and that
    nothing of it is left: no process of its group (the driver's JVM included), none on the worker hosts
    besides the Spark workers, no namespace or link of its own; and that the cluster's master and workers
    still run."""
    broker = site.redis(port)
    broker.config_resetstat()
    status, output = _until(site, tmp_path, port, lambda _: (
        site.workers() == {f"{WORKER_COMM}producer-0", f"{WORKER_COMM}consumer-0"}
        and broker.info("commandstats").get("cmdstat_xadd", {}).get("calls", 0) > 0), then)
    (run,) = run_folders(tmp_path / "res")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["complete"] is False
    # the run's own namespaces and links (none on a cluster; other runs on the machine may come and go)
    made = {h["namespace"].split("-")[0] for h in manifest.get("network", {}).get("hosts", {}).values()}
    assert [n for p in made for n in leftovers(p)] == []
    assert set(leftovers(site.net.prefix)) >= {str(site.net.namespace(h)) for h in ("prod", "cons", "brk")}
    assert all(_alive(pid) for pid in site.cluster.pids), "the Spark cluster did not survive the run's end"
    assert "Traceback" not in output, output[-3000:]
    return status, output


def _until(
    site: Site, tmp_path: Path, port: int, ready: Callable[[subprocess.Popen[bytes]], bool],
    then: Callable[[subprocess.Popen[bytes]], None],
) -> tuple[int, str]:
    """`mqbench compare` of the long scenario as a user starts it (its own process group); ``then(proc)``
    once ``ready(proc)``; its exit status and output. Asserts that no process of its group (the driver's
    JVM included) outlives it and that nothing is left on the worker hosts."""
    out = tmp_path / "output.txt"
    with open(out, "wb") as sink:
        proc = subprocess.Popen(_command(site, tmp_path, LONG, port), cwd=ROOT, env=_env(site), stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        reached = _within(600, lambda: proc.poll() is not None or ready(proc))
        assert reached and proc.poll() is None, out.read_text()[-3000:]
        then(proc)
        proc.wait(180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert _within(10, lambda: not _alive(proc.pid, group=True)), (
        f"a process of `mqbench compare` outlived it: {_group_listing(proc.pid)}")
    site.assert_clean()
    return proc.returncode, out.read_text()


def test_ctrl_c_mid_case_leaves_nothing_on_the_cluster(site: Site, tmp_path: Path) -> None:
    def interrupt(proc: subprocess.Popen[bytes]) -> None:
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group

    status, output = _mid_case(site, tmp_path, REDIS_PORT, interrupt)
    assert status == 130, output[-3000:]
    assert output.count("interrupted") == 1, output[-3000:]


def test_ctrl_c_while_the_session_starts_says_one_line_and_leaves_nothing(site: Site, tmp_path: Path) -> None:
    # once the driver's JVM is starting: a java process in the run's group
    status, output = _until(site, tmp_path, REDIS_PORT, lambda proc: "java" in _group_names(proc.pid),
                            lambda proc: os.killpg(proc.pid, signal.SIGINT))
    assert status == 130, output[-3000:]
    assert output.count("interrupted") == 1 and "Traceback" not in output, output[-3000:]


def _group_listing(pgid: int) -> str:
    """pid, state, age and command line of every process of group ``pgid``."""
    return subprocess.run(["ps", "-o", "pid=,stat=,etime=,args=", "-g", str(pgid)], capture_output=True,
                          text=True).stdout.strip()


def _group_names(pgid: int) -> list[str]:
    listed = subprocess.run(["ps", "-o", "comm=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return listed.split()


def test_a_broker_killed_mid_case_leaves_nothing_and_says_so(site: Site, tmp_path: Path) -> None:
    doomed = _redis_server(site.net, DOOMED_PORT)
    try:
        assert _within(30, lambda: _answers(site.redis(DOOMED_PORT))), "the second Redis did not start"
        status, output = _mid_case(site, tmp_path, DOOMED_PORT, lambda _: doomed.kill())
    finally:
        _stop(doomed)
    assert status == 1, output[-3000:]  # the run ends, incomplete, naming the worker that lost its broker
    assert "a worker failed; the case was stopped" in output
    assert re.search(r"rep 1: (producer|consumer)-0: ", output), output[-3000:]  # which worker, and why


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def test_brokerless_binders_listen_on_their_hosts_address(site: Site, finished: Path) -> None:
    run = finished
    queue, reqrep = _raw(run, "cluster-zmq-queue"), _raw(run, "cluster-zmq-reqrep")
    assert set(queue["send_host"]) == {"prod"} and set(queue["recv_host"]) == {"cons"}
    assert set(reqrep["send_host"]) == {"prod"}
    summary = pd.read_parquet(run / "summary.parquet").set_index("scenario")
    summary = summary[summary["system"] == "zmq"]
    assert summary["lost"].to_dict() == {"cluster-zmq-queue": 0, "cluster-zmq-reqrep": 0}
    assert summary["lat_p50_us"].notna().all()
    clocks = pd.read_parquet(run / "clocks.parquet")
    assert set(clocks["host"]) == {"prod", "cons"}
