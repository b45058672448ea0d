"""Apache RocketMQ through the remoting client on PyPI (``rocketmq``, whose wheel bundles librocketmq).

The URL names the NameServer (``rocketmq://HOST:PORT``), or several (``rocketmq://H1:P1;H2:P2;H3:P3``,
RocketMQ's own list syntax, which librocketmq and the Java client take as it is); clients learn the brokers'
addresses from them. The client cannot create topics, so ``plan`` does, with the remoting protocol's admin
requests (``rocketmq_admin``), each topic with ``queues`` queues, on every broker of each broker group (its
master serves it; a replicated group's slaves get it too, so that whichever is elected master next has it).
pubsub: every consumer is its own consumer group, so each reads every message; queue: a topic's consumers
share one group, which splits the queues among them (a queue has one reader at a time, so with ``queues: 1``
one consumer gets every message). Consumers start from the first offset of a queue their group has no stored
offset for (``CONSUME_FROM_FIRST_OFFSET``; the client's default, the last offset, skips a backlog): a new group
on a new topic starts at its first message, so nothing sent after ``start`` is missed, and a group whose
offsets a crashed broker had not yet flushed (it writes them to disk every 5 s) reads the queue again from its
start: duplicates, never a skipped backlog.

Consumers are push consumers with one consuming thread, each in a process of its own (``rocketmq_consumer``:
librocketmq aborts the process that shuts a client down at the wrong moment), which relays each message to the
driver's process through a pipe and acknowledges it once ``on_message`` returned there. librocketmq's push consumer stays idle without
an error for 30 s or more after its master was started again, after another broker became master, and after
its connection was reset; each consumer therefore checks once a second (in ``poll``, ``ServedCheck``) that its
group's master is the one it started with and still lists it, and raises otherwise, so that the runner makes
it again (a fresh client finds the master at once and reads on from the group's stored offset).

Producers send synchronously by default (``send: sync``: the broker stored it when ``send`` returns:
at-least-once; on a replicated group, the master and every slave of its SyncStateSet stored it),
asynchronously (``send: async``, as OpenMessaging Benchmark's RocketMQ driver: each send's answer comes to a
callback later, the same store as a sync send's, and is the send's outcome; at most ``ASYNC_WINDOW`` sends
unanswered, as RabbitMQ's confirm window; RocketMQ does not keep an async sender's order) or one-way
(``send: oneway``: at-most-once). A send the master stores without its slaves (``FLUSH_SLAVE_TIMEOUT``,
``SLAVE_NOT_AVAILABLE``) or that finds no master raises: it was not acknowledged. Each producer has its own
client instance (librocketmq shares one per process and instance name), so a producer made again after a
failed send never shares state with the one being shut down.

Bodies travel as raw bytes: the Python wrapper reads bodies as C strings (cut at the first NUL byte), so
the producer sends the length in a message property and the consumer reads exactly that many bytes.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from harness.drivers.base import (
    Consumer,
    DriverError,
    Guarantee,
    Pattern,
    Producer,
    Role,
    Topology,
    topology_from_plan,
)
from harness.drivers.broker import BrokerDriver
from harness.drivers.rocketmq_admin import (
    DELETE_TOPIC_IN_BROKER,
    DELETE_TOPIC_IN_NAMESRV,
    broker_boot_time,
    broker_groups,
    consumer_clients,
    create_topic,
    group_masters,
    remoting_call,
    unrouted,
)
from harness.drivers.rocketmq_consumer import (
    CACHE_MESSAGES,
    FAILED,
    FRAME,
    LENGTH_PROPERTY,
    READY,
    cache_messages,
)

SEND_MODES = ("sync", "async", "oneway")
ASYNC_WINDOW = 1000  # async sends a producer leaves unanswered at most (send: async)
ASYNC_WAIT = 30.0  # seconds a producer waits for room in its window, or at close for the last answers
CONSUMER_START_TIMEOUT = 60.0  # seconds for a consumer's process to start Python and its client (loaded machine)
CONSUMER_STOP_GRACE = 10.0  # seconds the process may take to save its offsets and exit before it is killed
CONSUMER_PROCESS = ("-m", "harness.drivers.rocketmq_consumer")  # run by this interpreter; its arguments follow
SERVED_CHECK_EVERY = 1.0  # seconds between a consumer's checks that its brokers still serve it (ServedCheck)
ROUTE_WAIT = 60.0  # seconds the NameServer may take to route every topic of the run after they were created
NOT_LISTED_CHECKS = 2  # a consumer its group's master does not list this many checks running is made again
# librocketmq aborts the process that shuts a client down while one of the client's timer threads waits for
# an answer: the shutdown interrupts that thread and boost::thread_interrupted reaches std::terminate (SIGABRT).
# Consumers therefore run in processes of their own (harness.drivers.rocketmq_consumer), never shut down. A
# producer is shut down in the process that measures, so only at a quiet moment: each client's timers fire at
# fixed times after its start (a heartbeat to its brokers at TIMERS[0] s, a route update from the NameServer at
# TIMERS[1] s, each again every TIMER_PERIOD s, without drift), and a shutdown right then aborted 2 of 6 tries
# here (none of 42 at other moments, brokers answering). A timer's request is in flight for TIMER_BUSY s at most
# while the brokers answer, for up to its 3 s timeout when one is gone (after a failed send). Two shutdowns in
# one process are also kept SHUTDOWN_GAP apart.
TIMERS = (0.01, 3.0)
TIMER_PERIOD = 30.0
TIMER_EARLY = 0.1  # seconds before a timer's time a shutdown already waits (the clocks of start() and ours)
TIMER_BUSY = 0.5
TIMER_BUSY_FAILING = 3.5
SHUTDOWN_GAP = 1.0
_shutdowns_lock = threading.Lock()
_last_shutdown = [-SHUTDOWN_GAP]  # time.monotonic() of this process's last client shutdown


@dataclass(frozen=True)
class RocketMQOptions:
    send: str = "sync"  # sync or async (at-least-once), or oneway (at-most-once)
    queues: int = 1

    def __post_init__(self) -> None:
        check_send(self.send)
        if self.queues < 1:
            raise DriverError("rocketmq option 'queues' must be positive")


def check_send(send: str) -> None:
    """The ``send`` option of either RocketMQ client: one of ``SEND_MODES``, else DriverError."""
    if send not in SEND_MODES:
        raise DriverError(f"rocketmq option 'send' must be sync, async or oneway, not {send!r}")


def send_parity(send: str, broker: Any) -> dict[str, str]:
    """What a RocketMQ send waits for, through either client: a sync send returns once the master stored
    the message and, in a replicated group, once every broker of its SyncStateSet has it too
    (``allAckInSyncStateSet``); an async send's callback is told the same answer later; the provisioned
    brokers flush asynchronously (``ASYNC_FLUSH``, RocketMQ's default), and a broker-wide setting cannot
    differ per variant."""
    fsync = "never per message (ASYNC_FLUSH: the OS page cache, flushed in the background)"
    if send == "oneway":
        return {"acks": "none (one-way send)", "fsync": fsync}
    how = "sync send" if send == "sync" else f"async send (answered to a callback, {ASYNC_WINDOW:,} unanswered at most)"
    shape = broker.shape if broker is not None else None
    if shape is not None and shape.replicas > 1:
        acks = (f"{how}: the master and every slave in its SyncStateSet, at least {shape.min_insync} of "
                f"{shape.replicas} replicas (allAckInSyncStateSet, minInSyncReplicas={shape.min_insync})")
    else:
        acks = f"{how}: the broker's write"
    return {"acks": acks, "fsync": fsync}


def wait_for_routes(namesrv: str, topics: list[str]) -> None:
    """Return once the NameServers ``namesrv`` route every one of ``topics`` (just created on the brokers), at
    most ``ROUTE_WAIT`` s later; a producer asking before then fails its send ("No route info of this
    topic"). Raises DriverError saying how many were not routed."""
    missing = unrouted(namesrv, topics, timeout=10.0, wait=ROUTE_WAIT)
    if missing:
        raise DriverError(f"the rocketmq NameServer at {namesrv} had no route for {len(missing)} of the run's "
                          f"{len(topics)} topics {ROUTE_WAIT:.0f} s after they were created (first: {missing[0]}); "
                          "the broker did not register them")


class RocketMQDriver(BrokerDriver):
    """Topics are made and removed over the remoting protocol (``plan``/``teardown`` below), not through an
    admin client."""

    name = "rocketmq"
    patterns = frozenset({Pattern.PUBSUB, Pattern.QUEUE})
    client_packages = ("rocketmq",)
    client = "rocketmq-python"
    client_module = "rocketmq.client"
    options_type = RocketMQOptions
    opts: RocketMQOptions

    def __init__(self, options: Mapping[str, Any], broker: Any = None) -> None:
        super().__init__(options, broker)
        self.namesrv = self.url.split("://", 1)[-1].rstrip("/")  # host:port, or several separated by ';'

    def guarantee(self) -> Guarantee:
        return Guarantee.AT_MOST_ONCE if self.opts.send == "oneway" else Guarantee.AT_LEAST_ONCE

    def parity(self) -> dict[str, str]:
        return send_parity(self.opts.send, self.broker)

    # -- parent ----------------------------------------------------------------------------------

    def plan(self, topology: Topology) -> dict[str, Any]:
        plan = super().plan(topology)
        try:
            groups = broker_groups(self.namesrv, timeout=10.0)
            # Masters first: the master serves the topic; its slaves get it too (they sync topics from it every
            # few seconds, and one of them may be master before that).
            brokers = [addr for group in groups.values() for _, addr in sorted(group.items())]
            if not brokers:
                raise DriverError(f"no rocketmq broker is registered with the NameServer at {self.namesrv}")
            topics = [topology.topic_name(i) for i in range(topology.topics)]
            for topic in topics:
                for addr in brokers:
                    create_topic(addr, topic, self.opts.queues, timeout=10.0)
            wait_for_routes(self.namesrv, topics)
        except OSError as exc:
            raise DriverError(f"rocketmq could not create the run's topics via {self.namesrv}: {exc}") from None
        plan["brokers"] = brokers
        return plan

    def teardown(self, plan: Mapping[str, Any]) -> None:
        topology = topology_from_plan(plan)
        for topic in (topology.topic_name(i) for i in range(topology.topics)):
            for addr in plan.get("brokers", []):
                with contextlib.suppress(OSError, ValueError):
                    remoting_call(addr, DELETE_TOPIC_IN_BROKER, {"topic": topic}, timeout=5.0)
            for namesrv in self.namesrv.split(";"):
                with contextlib.suppress(OSError, ValueError):
                    remoting_call(namesrv, DELETE_TOPIC_IN_NAMESRV, {"topic": topic}, timeout=5.0)

    # -- workers ---------------------------------------------------------------------------------

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        topology = topology_from_plan(plan)
        return _RocketMQProducer(self, topology.topic_name(role.topic), f"mqbench-{topology.run_tag}-p{role.index}")

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        topology = topology_from_plan(plan)
        if topology.pattern is Pattern.QUEUE:
            group = f"mqbench-{topology.run_tag}-t{role.topic}"
        else:
            group = f"mqbench-{topology.run_tag}-c{role.index}"
        return _RocketMQConsumer(self, topology.topic_name(role.topic), group, f"{group}-{role.index}",
                                 cache_messages(topology.message_size))


#: The folder under the temporary directory that the clients' log goes to (docs/brokers.md): kept across runs.
CLIENT_HOME = "mqbench-rocketmq-client"


def _client_home() -> str:
    """Where librocketmq writes its log ($HOME/logs/rocketmq-cpp/, opened when a process's first client is
    created): a temporary folder, so that runs do not fill the user's home."""
    home = os.path.join(tempfile.gettempdir(), CLIENT_HOME)
    os.makedirs(home, exist_ok=True)
    return home


@contextlib.contextmanager
def _home_for_clients() -> Iterator[None]:
    """HOME pointed at ``_client_home()`` meanwhile (for a client made in this process)."""
    saved = os.environ.get("HOME")
    os.environ["HOME"] = _client_home()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = saved


class _RocketMQProducer(Producer):
    """A librocketmq producer of its own. ``send: async`` hands each message to ``SendMessageAsync`` with a
    pair of callbacks of its own (the C API passes a callback nothing that names the message), which settle
    that send: its outcome to ``watch_outcomes``'s report, or, unwatched, a failure raised by the next send or
    the flush."""

    acks_synchronously = True  # overridden for asynchronous and one-way sends below

    def __init__(self, driver: RocketMQDriver, topic: str, group: str) -> None:
        from rocketmq import client, ffi

        # the client's names, looked up once here, not in every send
        self.dll, self.topic, self.message, self.status = ffi.dll, topic.encode(), client.Message, client.SendStatus
        self.stored_callback, self.failed_callback = ffi.SEND_SUCCESS_CALLBACK, ffi.SEND_EXCEPTION_CALLBACK
        self.mode = driver.opts.send
        self.acks_synchronously = self.mode == "sync"
        self.sent = 0  # async: sends so far, the next one's number in its outcome
        self.window = threading.Semaphore(ASYNC_WINDOW)
        self.lock = threading.Lock()
        self.unanswered: dict[int, tuple[Any, ...]] = {}  # async: each send's message and callbacks, by number
        self.answered: list[tuple[Any, ...]] = []  # ... kept a while after their answer (freed by the sender)
        self.report: Callable[[int, int, bool], None] | None = None
        self.error = ""  # async, unwatched: the first failure an answer told
        try:
            with _home_for_clients():
                self.producer = client.Producer(group)
                self.dll.SetProducerInstanceName(self.producer._handle, f"{group}-{os.getpid()}-{id(self):x}".encode())
                self.producer.set_namesrv_addr(driver.namesrv)
                begun = time.monotonic()
                self.producer.start()
                self.started = (begun, time.monotonic())  # the client's timers count from within start()
        except Exception as exc:
            raise DriverError(f"cannot start a rocketmq producer against {driver.namesrv}: {exc}") from None
        self.failing = False  # a send raised: a timer's request may wait out its timeout

    def watch_outcomes(self, report: Callable[[int, int, bool], None]) -> bool:
        if self.mode != "async":
            return False  # sync: the outcome is send returning; oneway: the broker never answers
        self.report = report
        return True

    def send(self, payload: bytearray) -> None:
        body = bytes(payload)
        msg = self.message(self.topic)
        self.dll.SetByteMessageBody(msg._handle, body, len(body))
        self.dll.SetMessageProperty(msg._handle, LENGTH_PROPERTY, str(len(body)).encode())
        if self.mode == "async":
            self._send_async(msg)
            return
        try:
            if self.mode == "oneway":
                self.producer.send_oneway(msg)
                return
            result = self.producer.send_sync(msg)
        except Exception as exc:
            self.failing = True
            raise DriverError(f"rocketmq failed to send a message: {exc}") from None
        if result.status != self.status.OK:
            raise DriverError(f"rocketmq stored a message with status {result.status.name}")

    def _send_async(self, msg: Any) -> None:
        if self.error:
            raise DriverError(self.error)
        if not self.window.acquire(timeout=ASYNC_WAIT):
            self.failing = True
            raise DriverError(f"rocketmq answered none of {ASYNC_WINDOW:,} async sends within {ASYNC_WAIT:.0f} s")
        index = self.sent
        self.sent += 1

        def stored(result: Any) -> None:
            status = self.status(result.contents.sendStatus)
            self._settle(index, status is self.status.OK, f"rocketmq stored a message with status {status.name}")

        def failed(exc: Any) -> None:
            self._settle(index, False, f"rocketmq failed to send a message: {exc.msg.decode(errors='replace')}")

        callbacks = (msg, self.stored_callback(stored), self.failed_callback(failed))
        with self.lock:
            self.unanswered[index] = callbacks
            if len(self.answered) > 2 * ASYNC_WINDOW:  # long answered: no callback of theirs still runs
                del self.answered[:ASYNC_WINDOW]
        status = self.dll.SendMessageAsync(self.producer._handle, msg._handle, callbacks[1], callbacks[2])
        if status != 0:  # refused at once: a failed send, unless its exception callback told it already
            self.failing = True
            if self._settle(index, False, "", tell=False):
                raise DriverError(f"rocketmq failed to send a message (status {status})")

    def _settle(self, index: int, accepted: bool, why: str, tell: bool = True) -> bool:
        """Send ``index`` answered (on a client thread), or refused at once (``tell`` False: ``send`` raises
        instead): once only; False when it was settled before."""
        with self.lock:
            callbacks = self.unanswered.pop(index, None)
            if callbacks is None:
                return False
            self.answered.append(callbacks)  # not freed here: this may be one of them, still running
        self.window.release()
        if tell and self.report is not None:
            self.report(index, 1, accepted)
        elif tell and not accepted and not self.error:
            self.error = why
        return True

    def flush(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.unanswered and time.monotonic() < deadline:
            time.sleep(0.005)
        if self.error:
            raise DriverError(self.error)
        if self.unanswered:
            raise DriverError(f"rocketmq answered {len(self.unanswered):,} async sends not within {timeout:.0f} s")

    def close(self) -> None:
        if self.unanswered:
            with contextlib.suppress(DriverError):
                self.flush(ASYNC_WAIT)
        with self.lock:  # callbacks the client may still call (it never answered them): never freed
            _UNANSWERED.extend(self.unanswered.values())
        _shut_down(self.producer, self.started, TIMER_BUSY_FAILING if self.failing else TIMER_BUSY)


#: Async sends' messages and callbacks that a closed producer's client never answered: a callback freed while
#: the client may still call it would crash the process, so they stay for its life (none when brokers answer).
_UNANSWERED: list[tuple[Any, ...]] = []


class _RocketMQConsumer(Consumer):
    """A push consumer whose librocketmq client runs in a process of its own (``rocketmq_consumer``), which
    relays each message through a pipe and acknowledges it once ``poll`` handed it to ``on_message`` (one byte
    back per message). ``poll`` also checks once a second that the brokers still serve the client
    (``ServedCheck``). ``close`` ends the process, which saves the group's offsets of what it acknowledged; a
    message it had relayed but not yet had acknowledged comes again to whoever reads the queue next."""

    def __init__(self, driver: RocketMQDriver, topic: str, group: str, instance: str,
                 cache: int = CACHE_MESSAGES[0]) -> None:
        self.driver, self.topic, self.group, self.cache = driver, topic, group, cache
        # The client allows one consumer per group and instance name in a process; the runner's consumers
        # (and a test's) each have their own.
        self.instance = f"{instance}-{os.getpid()}-{id(self):x}"
        self.served = ServedCheck(driver.namesrv, group, self.instance)
        self.next_check = 0.0
        self.process: subprocess.Popen[bytes] | None = None
        self.data = self.acks = -1
        self.buffer = bytearray()
        self.on_message: Callable[[bytes], None] | None = None

    def start(self, on_message: Callable[[bytes], None]) -> None:
        data_read, data_write = os.pipe()
        acks_read, acks_write = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, *CONSUMER_PROCESS, str(data_write), str(acks_read), self.driver.namesrv,
                 self.group, self.instance, self.topic, str(self.cache)],
                stdin=subprocess.PIPE, pass_fds=(data_write, acks_read), env={**os.environ, "HOME": _client_home()},
            )
        except OSError:
            os.close(data_read)
            os.close(acks_write)
            raise
        finally:
            os.close(data_write)
            os.close(acks_read)
        self.data, self.acks = data_read, acks_write
        self.client_pid = self.process.pid
        deadline = time.monotonic() + CONSUMER_START_TIMEOUT
        while (said := self._said()) is None and time.monotonic() < deadline:
            if not self._read(min(1.0, max(0.0, deadline - time.monotonic()))):
                said = self._said() or "its process ended"
                break
        if said != "":
            reason = said or f"it did not start within {CONSUMER_START_TIMEOUT:.0f} s"
            self.close()
            raise DriverError(f"cannot start a rocketmq consumer against {self.driver.namesrv}: {reason}")
        self.on_message = on_message
        self.served.begin()
        self.next_check = time.monotonic() + SERVED_CHECK_EVERY

    def _said(self) -> str | None:
        """What the process said first: "" that its client started, a sentence why not, None: nothing yet."""
        if len(self.buffer) < 4:
            return None
        (length,) = FRAME.unpack_from(self.buffer)
        if length == READY:
            del self.buffer[:4]
            return ""
        if length == FAILED and len(self.buffer) >= 8:
            (size,) = FRAME.unpack_from(self.buffer, 4)
            if len(self.buffer) >= 8 + size:
                return bytes(self.buffer[8 : 8 + size]).decode(errors="replace") or "it failed"
        return None

    def _read(self, timeout: float) -> bool:
        """Read what the pipe holds, waiting at most ``timeout`` for something; False once it is closed."""
        if not select.select([self.data], [], [], timeout)[0]:
            return True
        data = os.read(self.data, 1 << 16)
        self.buffer += data
        return bool(data)

    def _deliver(self) -> None:
        """Hand every complete message read so far to ``on_message``, acknowledging each after it returned."""
        assert self.on_message is not None
        while len(self.buffer) >= 4:
            (length,) = FRAME.unpack_from(self.buffer)
            if len(self.buffer) < 4 + length:
                return
            payload = bytes(self.buffer[4 : 4 + length])
            del self.buffer[: 4 + length]
            self.on_message(payload)
            with contextlib.suppress(BrokenPipeError):  # the process died: the next read says so
                os.write(self.acks, b"\x01")

    def poll(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:  # the process sends the next message only once this one was acknowledged
            open_ = self._read(max(0.0, deadline - time.monotonic()))
            self._deliver()
            if not open_:
                status = self.process.wait() if self.process is not None else None
                raise DriverError(f"the rocketmq consumer's process ended (status {status}); it is made again")
            if time.monotonic() >= deadline:
                break
        if time.monotonic() >= self.next_check:
            self.served.check()
            self.next_check = time.monotonic() + SERVED_CHECK_EVERY

    def close(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        os.close(self.acks)  # a message in flight is never acknowledged
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()  # the process saves the offsets of what was acknowledged and exits
        try:
            process.wait(CONSUMER_STOP_GRACE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        os.close(self.data)


class ServedCheck:
    """Whether the brokers still serve one push consumer as when it started. librocketmq's push consumer stays
    idle, without an error, when:

    - its broker group's master was started again: the client forgets a broker that went away and looks it up
      again only every 30 s;
    - another broker became the group's master (controller mode's failover): the client keeps pulling from
      the old one until its next route update, every 30 s;
    - its connection to the master was reset: the pull request in flight is lost with it and is sent again
      only when it times out (30 s), and the broker, which dropped the consumer with the connection, learns of
      it again only from its next heartbeat (every 30 s), so the group has no consumer meanwhile.

    ``check`` raises DriverError in each case (the last one after ``NOT_LISTED_CHECKS`` checks in a row), and the
    runner then makes the consumer again: a fresh client finds the master at once, registers with it and reads
    on from the group's stored offset. Brokers or NameServers that do not answer are left to the client (a
    partition heals by itself; a master being elected is not there to move to yet)."""

    def __init__(self, namesrv: str, group: str, instance: str) -> None:
        self.namesrv, self.group, self.instance = namesrv, group, instance
        self.masters: dict[str, tuple[str, str] | None] = {}  # broker group -> (master, its boot time) at start
        self.not_listed = 0

    def begin(self) -> None:
        """Note each group's master and its boot time as the consumer starts (None: the group has no master);
        a group not learnt now (nothing answered) is noted at the first check that learns it."""
        with contextlib.suppress(OSError, ValueError):
            for name, master in group_masters(self.namesrv, 5.0).items():
                with contextlib.suppress(OSError, ValueError):
                    self.masters[name] = None if master is None else (master, broker_boot_time(master, timeout=1.0))

    def check(self) -> None:
        try:
            masters = group_masters(self.namesrv, 1.0)
        except (OSError, ValueError):
            return
        for name, master in masters.items():
            if master is None:
                continue
            try:
                booted = broker_boot_time(master, timeout=1.0)
            except (OSError, ValueError):
                continue
            if name not in self.masters:
                self.masters[name] = (master, booted)
            elif self.masters[name] != (master, booted):
                raise DriverError(f"rocketmq broker group {name}'s master is now {master} (started at {booted}), "
                                  f"not {self.masters.get(name)}; the consumer is made again")
            self._check_listed(master)

    def _check_listed(self, master: str) -> None:
        try:
            clients = consumer_clients(master, self.group, timeout=1.0)
        except (OSError, ValueError):
            return
        if any(c.endswith("@" + self.instance) for c in clients):
            self.not_listed = 0
            return
        self.not_listed += 1
        if self.not_listed >= NOT_LISTED_CHECKS:
            raise DriverError(f"the rocketmq master {master} no longer lists this consumer in group {self.group} "
                              "(its connection was reset); the consumer is made again")


def quiet_delay(started: tuple[float, float], now: float, busy: float) -> float:
    """Seconds from ``now`` until none of the timers of a client whose ``start()`` ran from ``started[0]`` to
    ``started[1]`` can be waiting for an answer, if each waits at most ``busy`` s (0: now is such a moment)."""
    at = now
    moved = True
    while moved:
        moved = False
        periods = max(0, int((at - started[1]) // TIMER_PERIOD))
        for k in (periods - 1, periods, periods + 1):
            for timer in TIMERS:
                low = started[0] + timer + k * TIMER_PERIOD - TIMER_EARLY
                high = started[1] + timer + k * TIMER_PERIOD + busy
                if k >= 0 and low <= at < high:
                    at, moved = high, True
    return at - now


def _shut_down(client: Any, started: tuple[float, float], busy: float) -> None:
    """``client.shutdown()`` at a moment none of its timers waits for an answer (``quiet_delay``) and at least
    ``SHUTDOWN_GAP`` after the process's previous client shutdown."""
    with _shutdowns_lock:
        pause = _last_shutdown[0] + SHUTDOWN_GAP - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        time.sleep(quiet_delay(started, time.monotonic(), busy))
        with contextlib.suppress(Exception):
            client.shutdown()
        _last_shutdown[0] = time.monotonic()
