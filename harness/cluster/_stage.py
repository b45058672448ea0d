"""One case's roles as one Spark barrier stage: a task per role, started together, clocks measured.

Spark places barrier tasks itself (one per free executor core), so roles are given to tasks *after*
placement: every task announces its host through ``allGather`` and all of them compute the same
assignment (:func:`assign`): a role that names a host goes to a task on that host, the others are spread
over the executors in turn. Each task then measures its clock offset to the coordinator
(:mod:`harness.cluster._clock`), waits in ``barrier()`` — the start barrier —, runs its role, measures
the offset again and returns what the role returned with its host, executor and the two offsets.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness._spark_calls import failure_reason, interruptible
from harness.cluster._clock import ClockServer, Offset, measure, over_case

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


#: Names the host a Spark worker stands for when its machine name does not (a network namespace on one
#: machine): set it in the worker's environment; the raw rows and ``Role.host`` use this name.
HOST_VARIABLE = "MQBENCH_HOST"


#: ``prepare(role, where)``: ``where`` maps each role's name to the ``(host, executor)`` of its task.
Prepare = Callable[["Role", dict[str, tuple[str, str]]], Any]


class StageError(Exception):
    """The cluster cannot run the stage (too few executor cores, a role's host absent) or the stage failed
    (a task's error, a lost executor); one sentence."""


@dataclass(frozen=True)
class Role:
    """What one task does: ``name`` (``producer-0``), an optional ``host`` it must run on, and ``spec``,
    handed to the stage's body as is (picklable)."""

    name: str
    spec: Any = None
    host: str | None = None


@dataclass(frozen=True)
class RoleResult:
    """What came back from one role: the body's ``value``, where it ran and its clock offset over the case
    (coordinator minus this host, with its uncertainty)."""

    role: str
    value: Any
    host: str
    executor: str
    offset: Offset


def assign(roles: Sequence[Role], places: Sequence[tuple[str, str]]) -> list[int]:
    """For each task (its ``(host, executor)`` in ``places``), the index of the role it runs.

    Roles with a ``host`` take a task on that host first; the rest go round the executors in turn, so
    two roles share an executor only when there are more roles than executors. Deterministic: every task
    computes the same answer. Raises :class:`StageError` when a role's host has no free task."""
    if len(roles) != len(places):
        raise StageError(f"{len(roles)} roles but {len(places)} tasks")
    free = list(range(len(places)))
    chosen: dict[int, int] = {}
    for r, role in enumerate(roles):
        if role.host is not None:
            task = next((t for t in free if places[t][0] == role.host), None)
            if task is None:
                hosts = sorted({h for h, _ in places})
                raise StageError(f"role {role.name} wants host {role.host!r}, but the stage's free tasks run on "
                                 f"{', '.join(hosts)}; add a worker there or change the scenario's hosts:")
            free.remove(task)
            chosen[task] = r
    # round the executors: each executor's first free task, then each one's second, ...
    by_executor: dict[str, list[int]] = {}
    for t in free:
        by_executor.setdefault(places[t][1], []).append(t)
    rotation = sorted(free, key=lambda t: (by_executor[places[t][1]].index(t), places[t][1]))
    rest = [r for r in range(len(roles)) if r not in chosen.values()]
    for task, r in zip(rotation, rest, strict=True):
        chosen[task] = r
    return [chosen[t] for t in range(len(places))]


def run_stage(
    spark: SparkSession,
    roles: Sequence[Role],
    body: Callable[..., Any],
    coordinator: str = "127.0.0.1",
    prepare: Prepare | None = None,
) -> list[RoleResult]:
    """Run ``body(role)`` for every role, one barrier task each, all released together; results in the
    order of ``roles``. ``coordinator`` is the address the tasks reach this process at for the clock
    exchange (on a real cluster the driver host's address; a host namespace's on one machine).

    With ``prepare``, each task runs ``prepare(role, where)`` before the start barrier (a worker connects and
    gets ready; ``where`` maps every role's name to its task's ``(host, executor)``) and
    ``body(role, prepared)`` after it; a task that ends before ``body`` calls ``prepared.close()`` if it
    has one."""
    roles = list(roles)
    with ClockServer(bind=coordinator) as clock:
        task = _task(roles, body, clock.address, prepare)
        rdd = spark.sparkContext.parallelize(range(len(roles)), len(roles)).barrier().mapPartitions(task)
        try:
            rows = _collect(spark, rdd)
        except Exception as exc:  # py4j surfaces Spark's refusal and a task's failure as a generic Java exception
            text = str(exc)
            if "Barrier execution mode" in text or "slots" in text:
                raise StageError(f"the cluster has fewer free executor cores than the case's {len(roles)} roles; "
                                 "start more workers or give them more cores") from None
            raise StageError(f"the stage failed on the cluster: {failure_reason(text)}") from None
    by_role = {r.role: r for r in rows}
    return [by_role[r.name] for r in roles]


def _collect(spark: SparkSession, rdd: Any) -> list[RoleResult]:
    """``rdd.collect()``; a Ctrl-C cancels the stage (its tasks stop, and their workers with them)."""
    return list(interruptible(rdd.collect, on_interrupt=spark.sparkContext.cancelAllJobs))


def _task(
    roles: list[Role], body: Callable[..., Any], clock: tuple[str, int], prepare: Prepare | None
) -> Callable[[Iterable[int]], Iterator[RoleResult]]:
    def run(_: Iterable[int]) -> Iterator[RoleResult]:
        from pyspark import BarrierTaskContext

        ctx = BarrierTaskContext.get()
        host = os.environ.get(HOST_VARIABLE) or socket.gethostname()
        executor = ctx.getTaskInfos()[ctx.partitionId()].address
        places: list[tuple[str, str]] = [tuple(json.loads(x)) for x in ctx.allGather(json.dumps([host, executor]))]
        chosen = assign(roles, places)
        role = roles[chosen[ctx.partitionId()]]
        where = {roles[r].name: places[t] for t, r in enumerate(chosen)}
        prepared = prepare(role, where) if prepare is not None else None
        try:
            before = measure(clock)
            ctx.barrier()  # the start barrier: every role is placed, connected and measured
        except BaseException:  # the stage ends here (another task failed): what prepare started, stopped
            if prepared is not None and hasattr(prepared, "close"):
                prepared.close()
            raise
        value = body(role) if prepare is None else body(role, prepared)
        after = measure(clock)
        yield RoleResult(role.name, value, host, executor, over_case(before, after))

    return run
