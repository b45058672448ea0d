"""ActiveMQ Classic over STOMP through stomp.py.

queue: ``/queue/<topic>`` with competing consumers; pubsub: ``/topic/<topic>`` with one (non-durable)
subscription per consumer. Each producer/consumer is one STOMP connection whose receiver thread calls
``on_message`` (callback-style). Subscriptions are confirmed by a receipt before ``start`` returns.
Options: ``persistent`` (the STOMP ``persistent`` header); ``client_ack`` (ack mode client: one cumulative
ACK per ``ack_every`` messages, sent after ``on_message`` returned for them, and for the rest whenever the
worker polls); ``receipts`` (sends are confirmed: in transactions of ``tx_batch`` sends, each COMMIT
carrying a receipt that is awaited before the next COMMIT goes out; ``tx_batch: 1`` is a receipt per send
without transactions); ``prefetch``. A transaction ends early when the producer is paced (``SendBatch``):
its messages reach consumers only once committed.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from harness.drivers.base import Consumer, DriverError, Guarantee, Pattern, Producer, Role, topology_from_plan
from harness.drivers.broker import BrokerDriver, CallbackConsumer, SendBatch, address, connect, guarantee
from harness.drivers.options import option

RECEIPT_TIMEOUT = 30.0


@dataclass(frozen=True)
class ActiveMQOptions:
    persistent: bool = False
    client_ack: bool = False
    receipts: bool = False
    prefetch: int = option(1000, minimum=1)
    tx_batch: int = option(100, minimum=1)  # sends per transaction (one receipt each) with receipts
    # client_ack: one cumulative ACK per this many messages (ActiveMQ's own consumers ack at half the prefetch)
    ack_every: int = option(500, minimum=1)


class ActiveMQDriver(BrokerDriver):
    name = "activemq"
    patterns = frozenset({Pattern.QUEUE, Pattern.PUBSUB})
    client_packages = ("stomp.py",)
    client = "stomp.py"
    client_module = "stomp"
    options_type = ActiveMQOptions
    opts: ActiveMQOptions

    def __init__(self, options: Mapping[str, Any], broker: Any = None) -> None:
        super().__init__(options, broker)
        self.carry: list[bytes] = []  # what a lost producer left unconfirmed (see _StompProducer)
        if self.opts.client_ack and self.opts.ack_every > self.opts.prefetch:
            # The broker stops delivering at prefetch unacked messages: an ack would never come.
            raise DriverError(
                f"activemq option ack_every ({self.opts.ack_every}) must not exceed prefetch ({self.opts.prefetch})"
            )

    def guarantee(self) -> Guarantee:
        # Durable holds for queues; topic subscriptions here are non-durable.
        return guarantee(self.opts.client_ack and self.opts.receipts, self.opts.persistent)

    def parity(self) -> dict[str, str]:
        if not self.opts.receipts:
            acks = "none"
        elif self.opts.tx_batch > 1:
            acks = f"a receipt per transaction of {self.opts.tx_batch} sends"
        else:
            acks = "a receipt per send"
        fsync = ("KahaDB journal, synced at each commit or persistent send" if self.opts.persistent
                 else "none (non-persistent messages: memory only)")
        return {"acks": acks, "fsync": fsync}

    # Destinations are created on first use, and a throwaway broker takes them with it: no admin().

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        return _StompProducer(_Session(self), _destination(plan, role), self.opts, self.carry)

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        return _StompConsumer(_Session(self), _destination(plan, role), self.opts)


def _destination(plan: Mapping[str, Any], role: Role) -> str:
    topology = topology_from_plan(plan)
    kind = "topic" if topology.pattern is Pattern.PUBSUB else "queue"
    return f"/{kind}/{topology.topic_name(role.topic)}"


class _Session:
    """One STOMP connection with a listener that tracks receipts and errors."""

    def __init__(self, driver: ActiveMQDriver) -> None:
        import stomp

        url = urlsplit(driver.url)
        self.where = address(driver.url)
        self.conn = stomp.Connection(
            [(url.hostname or "localhost", url.port or 61613)], heartbeats=(0, 0), auto_decode=False
        )
        self.receipts: set[str] = set()
        self.cond = threading.Condition()
        self.error: str | None = None
        self.deliver: Callable[[Any], None] | None = None
        self.on_receipt: Callable[[str], None] | None = None  # called on the receiver thread per receipt
        self.conn.set_listener("mqbench", _listener(self))
        self.ids = itertools.count()
        login = unquote(url.username) if url.username else None
        passcode = unquote(url.password) if url.password else None
        connect("activemq", driver.url, lambda: self.conn.connect(login, passcode, wait=True))

    def receipt_id(self) -> str:
        return f"r{next(self.ids)}"

    def wait_receipt(self, receipt: str, timeout: float = RECEIPT_TIMEOUT) -> None:
        with self.cond:
            if not self.cond.wait_for(
                lambda: receipt in self.receipts or self.error is not None or not self.conn.is_connected(), timeout
            ):
                raise DriverError(f"activemq at {self.where} sent no receipt within {timeout:.0f} s")
            self.receipts.discard(receipt)
        self.check()

    def check(self) -> None:
        if self.error is not None:
            raise DriverError(f"activemq at {self.where} reported an error: {self.error}")
        if not self.conn.is_connected():  # e.g. the broker went away: say so instead of waiting forever
            raise DriverError(f"activemq at {self.where} closed the connection")

    def close(self) -> None:
        try:
            if self.conn.is_connected():
                self.conn.disconnect(receipt=self.receipt_id())
        except Exception:
            pass
        try:
            self.conn.transport.stop()  # joins nothing; makes sure the receiver thread ends
        except Exception:
            pass


def _listener(session: _Session) -> Any:
    """A stomp.py listener feeding ``session``: messages to its ``deliver``, receipts and errors to it."""
    import stomp

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            if session.deliver is not None:
                session.deliver(frame)

        def on_receipt(self, frame: Any) -> None:
            receipt = frame.headers.get("receipt-id", "")
            if session.on_receipt is not None:
                session.on_receipt(receipt)
            with session.cond:
                session.receipts.add(receipt)
                session.cond.notify_all()

        def on_error(self, frame: Any) -> None:
            with session.cond:
                session.error = frame.headers.get("message", "ERROR frame")
                session.cond.notify_all()

        def on_disconnected(self) -> None:
            # A sender waiting for a receipt must not wait out RECEIPT_TIMEOUT for a broker that is gone.
            with session.cond:
                session.cond.notify_all()

    return Listener()


class _StompProducer(Producer):
    """With transactions, at-least-once across a lost connection: the bodies of the open transaction and
    of the COMMIT in flight are left in ``carry`` (the driver's), and the producer the runner creates next
    on this driver sends them again first; a message may then arrive twice, never not at all.

    Outcomes (``watch_outcomes``, with transactions): the receipt of a COMMIT acknowledges every send of its
    transaction; it is reported from stomp.py's receiver thread as it arrives, not when the producer next
    waits for it."""

    def __init__(self, session: _Session, destination: str, opts: ActiveMQOptions, carry: list[bytes]) -> None:
        self.session, self.destination = session, destination
        self.headers = {"persistent": "true" if opts.persistent else "false"}
        self.receipts = opts.receipts
        self.transactions = opts.receipts and opts.tx_batch > 1
        self.acks_synchronously = opts.receipts and not self.transactions
        self.batch = SendBatch(opts.tx_batch)
        self.tx: str | None = None  # the open transaction
        self.committing: str | None = None  # receipt of the last COMMIT, not yet received
        self.open: list[bytes] = []  # bodies sent in the open transaction
        self.in_commit: list[bytes] = []  # bodies of the COMMIT in flight
        self.carry = carry
        self.report: Callable[[int, int, bool], None] | None = None
        self.count = 0  # sends so far (a predecessor's carried bodies are not this producer's sends)
        self.tx_first = 0  # the send number of the open transaction's first send
        self.commits: dict[str, tuple[int, int]] = {}  # COMMIT receipt -> (first send, sends), until it came
        if self.transactions and carry:  # carry stays until the broker confirmed it
            for body in carry:
                self._send_in_tx(body)
            self.flush(RECEIPT_TIMEOUT)
            carry.clear()

    def watch_outcomes(self, report: Callable[[int, int, bool], None]) -> bool:
        if not self.transactions:  # no receipts, or one per send, awaited in send (synchronous)
            return False
        self.report = report
        commits = self.commits

        def on_receipt(receipt: str) -> None:
            sends = commits.pop(receipt, None)
            if sends is not None and sends[1]:
                report(sends[0], sends[1], True)

        self.session.on_receipt = on_receipt
        return True

    def _send_in_tx(self, body: bytes) -> None:
        conn = self.session.conn
        if self.tx is None:
            self.tx = f"tx-{uuid.uuid4().hex[:8]}"
            conn.begin(self.tx)
        conn.send(self.destination, body, headers={**self.headers, "transaction": self.tx})
        self.open.append(body)

    def send(self, payload: bytearray) -> None:
        self.batch.begin()
        conn, headers = self.session.conn, self.headers
        try:
            if self.transactions:
                self._send_in_tx(bytes(payload))
                self.count += 1
                if self.batch.due():
                    self._commit()
                    self.batch.done()
            elif self.receipts:
                receipt = self.session.receipt_id()
                conn.send(self.destination, bytes(payload), headers={**headers, "receipt": receipt})
                self.session.wait_receipt(receipt)
            else:
                conn.send(self.destination, bytes(payload), headers=headers)
            self.session.check()
        except DriverError:
            self._leave_unconfirmed()
            raise
        except Exception as exc:
            self._leave_unconfirmed()
            raise DriverError(f"activemq refused a message: {exc!r}") from None

    def _leave_unconfirmed(self) -> None:
        if self.transactions:
            self.carry[:] = [*self.in_commit, *self.open]
            self.in_commit, self.open, self.tx, self.committing = [], [], None, None
            self.tx_first = self.count

    def _commit(self) -> None:
        """COMMIT the open transaction with a receipt, after the previous COMMIT's receipt came (one in
        flight: the broker works on this batch while the next one is sent)."""
        assert self.tx is not None
        receipt = self.session.receipt_id()
        if self.report is not None:  # before the COMMIT leaves: its receipt may come at once
            self.commits[receipt] = (self.tx_first, self.count - self.tx_first)
        self.tx_first = self.count
        self.session.conn.commit(self.tx, headers={"receipt": receipt})
        self.tx = None
        if self.committing is not None:
            self.session.wait_receipt(self.committing)
        self.committing, self.in_commit, self.open = receipt, self.open, []
        if self.batch.paced:  # time to spare: confirmed before send returns
            self.session.wait_receipt(receipt)
            self.committing, self.in_commit = None, []

    def flush(self, timeout: float) -> None:
        try:
            if self.tx is not None:
                self._commit()
            if self.committing is not None:
                self.session.wait_receipt(self.committing, timeout)
                self.committing, self.in_commit = None, []
                return
        except DriverError:
            self._leave_unconfirmed()
            raise
        # The broker handles a connection's frames in order: a receipt for an empty transaction's
        # ABORT comes after every SEND before it was processed.
        tx = f"flush-{uuid.uuid4().hex[:8]}"
        receipt = self.session.receipt_id()
        self.session.conn.begin(tx)
        self.session.conn.abort(tx, headers={"receipt": receipt})
        self.session.wait_receipt(receipt, timeout)

    def close(self) -> None:
        self.session.close()


class _StompConsumer(CallbackConsumer):
    def __init__(self, session: _Session, destination: str, opts: ActiveMQOptions) -> None:
        super().__init__(session)  # frames arrive in stomp.py's receiver thread
        self.session, self.destination, self.opts = session, destination, opts
        self.sub_id = f"sub-{uuid.uuid4().hex[:8]}"
        self.lock = threading.Lock()  # the receiver thread acks as messages come, the worker what is left
        self.last: str | None = None  # message-id of the last message handled and not acked
        self.pending = 0

    def start(self, on_message: Callable[[bytes], None]) -> None:
        conn, sub_id = self.session.conn, self.sub_id
        client_ack, every, lock = self.opts.client_ack, self.opts.ack_every, self.lock

        def deliver(frame: Any) -> None:
            on_message(frame.body)
            if client_ack:
                with lock:
                    self.last = frame.headers["message-id"]
                    self.pending += 1
                    if self.pending >= every:
                        self._ack()

        self.session.deliver = deliver
        receipt = self.session.receipt_id()
        conn.subscribe(
            self.destination,
            id=sub_id,
            ack="client" if client_ack else "auto",  # client: an ACK covers every message before it
            headers={"activemq.prefetchSize": str(self.opts.prefetch), "receipt": receipt},
        )
        self.session.wait_receipt(receipt)

    def _ack(self) -> None:
        """With ``lock`` held: acknowledge everything up to the last handled message."""
        if self.last is not None:
            self.session.conn.ack(self.last, self.sub_id)
            self.last, self.pending = None, 0

    def poll(self, timeout: float) -> None:
        super().poll(timeout)
        if self.pending:  # unlocked peek; the ack itself is taken under the lock
            with self.lock:
                self._ack()
