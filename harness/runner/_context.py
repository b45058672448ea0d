"""What a worker process is given: its spec (what to do) and the context it shares with the parent.

Protocol with the parent (all objects of ``WorkerContext`` come from one multiprocessing context):
  status.put(("ready", name)) -> parent sets ``start`` once every worker is ready and writes the common
  start stamp into ``start_ns`` -> producers pace from it -> status.put(("done", name, count, error)) ->
  parent sets ``stop`` when consumers have what they should get (or the run stalled) -> workers close.
A backlog case: the parent writes ``release_ns`` once the producers have built the backlog; consumers
receive only from then on, producers switch to their drain rate. Besides: ("subscribed", name) from a consumer that heard every producer's probe (the slow-joiner
handshake), ("error", name, text) from a worker that failed. ``progress[spec.slot]`` is the worker's count
so far (sent, received or served), read by the parent while the case runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.drivers.base import BrokerEndpoint, Role
from harness.scenario import Scenario, Variant

if TYPE_CHECKING:  # worker processes need no network code (nor the run folder's)
    from harness.network import Network
    from harness.runfolder import CaseKey


@dataclass(frozen=True)
class WorkerSpec:
    kind: str  # "producer" | "consumer" | "requester" | "replier"
    name: str  # e.g. "producer-0"
    slot: int  # index into the shared progress array
    system: str
    driver: str  # "module:Class", imported as is in the worker (no registry lookup there)
    options: dict[str, Any]
    broker: BrokerEndpoint | None
    plan: dict[str, Any]
    role: Role
    size: int
    payload: str  # "random" | "fixed"
    total: int | None  # messages to send including warmup (None: until the deadline)
    duration_ns: int | None
    rate: float | None  # this producer's msgs/s; None = as fast as possible
    capacity: int  # records to preallocate
    out: str  # path prefix of the records file
    request_timeout: float = 5.0
    consumer_rate: float | None = None  # a slow consumer: msgs/s it handles at most (pause after the stamp)
    resilient: bool = False  # runs with faults: mapped records, reconnects (harness.runner._resilient)
    kills: bool = False  # a fault of the case kills or restarts a process (not only network actions)
    # Slow-joiner handshake (Capabilities.slow_joiner, pub/sub): a producer sends probes until the start; a
    # consumer reports ("subscribed", name) once it has heard one from each producer listed here.
    probe: bool = False
    probe_from: tuple[int, ...] = ()
    # The network namespace of the worker's host (``hosts:``), entered before any socket exists; None: the
    # root namespace. Child processes (the JVM a relay starts) inherit it.
    namespace: str | None = None
    # Workloads (harness.scenario._workload): the body (``payload`` "file" / "compressible"), a key per
    # message, the producer's share of a rate profile ((msgs/s, seconds) steps in turn), and a backlog case:
    # consumers hold back until ``WorkerContext.release_ns`` is set, producers then go on at ``drain_rate`` x
    # their rate.
    payload_file: str = ""
    compressible: float = 0.0
    keys: str = "none"
    key_count: int = 64
    rate_profile: tuple[tuple[float, float], ...] = ()
    backlog: bool = False
    drain_rate: float = 1.0
    # A paced producer's first send, in ns after the common start: producer p of a case at R msgs/s in all
    # starts at p / R s, so that the case's producers take turns at an even R instead of all sending at
    # once every 1 / (R / producers) s (a thousand producers at 2 msg/s each: a thousand sends together
    # twice a second, which RocketMQ's broker met with flow control). 0 for a rate profile.
    phase_ns: int = 0


@dataclass(frozen=True)
class WorkerContext:
    """The objects one case's workers share with the parent (see the module docstring)."""

    status: Any  # multiprocessing Queue of status tuples
    start: Any  # Event: the parent released the start barrier
    stop: Any  # Event: the case is over
    start_ns: Any  # Value("q"): the common start stamp (monotonic_ns)
    progress: Any  # Array("q"): one count per worker slot
    release_ns: Any = None  # Value("q"): when a backlog case released its consumers (0: not yet)

    def released(self) -> bool:
        """Whether a backlog case's consumers have been released (only asked in backlog cases)."""
        return self.release_ns is None or bool(self.release_ns.value)

    def wait_start(self) -> bool:
        """Block until the start; False when the case was stopped first."""
        while not self.start.wait(0.1):
            if self.stop.is_set():
                return False
        return not self.stop.is_set()

    def hold_until_stop(self) -> None:
        """Keep the connection open until the consumers are done: closing now could drop queued messages."""
        try:
            while not self.stop.wait(0.2):
                pass
        except Interrupted:
            pass


class Interrupted(BaseException):
    """Raised in a worker by SIGUSR1: the parent wants it to save what it has and stop, even mid-send."""


class Ended(Exception):
    """Raised by a strategy of the send or receive loop: nothing more can be sent or received (the run
    stopped before a reconnect worked)."""


@dataclass(frozen=True)
class Case:
    """One case: a system variant x message size x offered rate x repetition of a scenario."""

    scenario: Scenario
    variant: Variant
    size: int
    rate: float | None
    repetition: int
    run_id: str
    broker: BrokerEndpoint | None
    network: Network | None = None  # the run's hosts, when scenarios place parts on them

    @property
    def key(self) -> CaseKey:
        from harness.runfolder import CaseKey

        return CaseKey(self.scenario.name, self.variant.system, self.variant.name, self.size, self.rate,
                       self.repetition)
