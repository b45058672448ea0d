"""mqcore.log.handlers: PUBHandler's topics and per-level formats as a SUB sees them, and TopicLogger."""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import mqcore
from mqcore.log.handlers import PUBHandler, TopicLogger
from tests.mqcore.conftest import TIMEOUT_MS, endpoint

Pair = Callable[..., tuple[Any, Any]]
HERE = "test_log_handlers.py"


class Recording(logging.Handler):
    """Keeps the records it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class FailureRecordingPUBHandler(PUBHandler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failed: list[logging.LogRecord] = []

    def handleError(self, record: logging.LogRecord) -> None:
        self.failed.append(record)


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    # A logger outside logging's registry: nothing global to undo, and nothing propagates to root.
    log = logging.Logger(f"mqtest.{uuid.uuid4().hex[:8]}", logging.DEBUG)
    yield log
    for handler in list(log.handlers):
        log.removeHandler(handler)


def _line() -> int:
    """The caller's line number, for the ``filename:lineno`` the DEBUG/WARNING formats show."""
    return sys._getframe(1).f_lineno


def _sync(info: Callable[[str], object], sub: Any) -> None:
    """Log INFO probes with ``info`` until ``sub`` receives one (its subscription reaches the PUB
    asynchronously), then a last probe, and read up to it so no probe is left queued."""
    sub.rcvtimeo = 100
    for _ in range(100):
        info("probe")
        try:
            sub.recv_multipart()
            break
        except mqcore.Again:
            continue
    else:
        raise AssertionError("the subscription never reached the publisher")
    sub.rcvtimeo = TIMEOUT_MS
    info("last probe")
    while sub.recv_multipart()[1] != b"last probe\n":
        pass


def _published(make_pair: Pair, log: logging.Logger, root: str = "app",
               subscribe: bytes | None = None) -> tuple[PUBHandler, Any]:
    pub, sub = make_pair(mqcore.PUB, mqcore.SUB)
    handler = PUBHandler(pub, root_topic=root)
    log.addHandler(handler)
    sub.subscribe(root.encode() if subscribe is None else subscribe)
    _sync(log.info, sub)
    return handler, sub


def test_info_is_published_as_root_level_and_message(make_pair: Pair, logger: logging.Logger) -> None:
    handler, sub = _published(make_pair, logger)
    assert handler.root_topic == "app"
    logger.info("hello %s", "world")
    assert sub.recv_multipart() == [b"app.INFO", b"hello world\n"]


def test_levels_have_their_own_formats(make_pair: Pair, logger: logging.Logger) -> None:
    _, sub = _published(make_pair, logger)
    line = _line() + 1
    logger.debug("d")
    assert sub.recv_multipart() == [b"app.DEBUG", f"DEBUG {HERE}:{line} - d\n".encode()]
    line = _line() + 1
    logger.warning("w")
    assert sub.recv_multipart() == [b"app.WARNING", f"WARNING {HERE}:{line} - w\n".encode()]
    line = _line() + 1
    logger.error("e")
    assert sub.recv_multipart() == [b"app.ERROR", f"ERROR {HERE}:{line} - e - None\n".encode()]
    line = _line() + 1
    logger.critical("c")
    assert sub.recv_multipart() == [b"app.CRITICAL", f"CRITICAL {HERE}:{line} - c\n".encode()]


def test_subtopic_before_delimiter_extends_the_topic(make_pair: Pair, logger: logging.Logger) -> None:
    _, sub = _published(make_pair, logger)
    others = Recording()
    logger.addHandler(others)
    logger.info("db.pool::full at %d", 10)
    assert sub.recv_multipart() == [b"app.INFO.db.pool", b"full at 10\n"]
    assert others.records[0].getMessage() == "db.pool::full at 10"  # the record itself is not changed
    logger.info("::no subtopic")
    assert sub.recv_multipart() == [b"app.INFO", b"no subtopic\n"]
    logger.info("tøpic::héllo")
    assert sub.recv_multipart() == ["app.INFO.tøpic".encode(), "héllo\n".encode()]


def test_message_object_is_formatted_with_str(make_pair: Pair, logger: logging.Logger) -> None:
    class Event:
        def __str__(self) -> str:
            return "job::done"

    _, sub = _published(make_pair, logger)
    logger.info(Event())
    assert sub.recv_multipart() == [b"app.INFO.job", b"done\n"]


def test_empty_root_topic_starts_topics_with_the_level(make_pair: Pair, logger: logging.Logger) -> None:
    handler, sub = _published(make_pair, logger, root="", subscribe=b"INFO")
    logger.debug("not subscribed")
    logger.info("subscribed")
    assert sub.recv_multipart() == [b"INFO", b"subscribed\n"]  # the DEBUG record was filtered out
    handler.root_topic = b"bytes"
    assert handler.root_topic == "bytes"
    handler.setRootTopic("text")
    assert handler.root_topic == "text"


def test_changing_root_topic_moves_records_off_a_subscription(make_pair: Pair, logger: logging.Logger) -> None:
    handler, sub = _published(make_pair, logger)
    handler.root_topic = "elsewhere"
    logger.info("unseen")
    handler.root_topic = "app"
    logger.info("seen")
    # one publisher to one subscriber keeps order: had "unseen" been delivered, it would come first
    assert sub.recv_multipart() == [b"app.INFO", b"seen\n"]


def test_set_formatter_for_one_level_or_all(make_pair: Pair, logger: logging.Logger) -> None:
    handler, sub = _published(make_pair, logger)
    handler.setFormatter(logging.Formatter("D %(message)s"), logging.DEBUG)
    logger.debug("one")
    assert sub.recv_multipart() == [b"app.DEBUG", b"D one"]
    logger.info("two")
    assert sub.recv_multipart() == [b"app.INFO", b"two\n"]
    handler.formatters[logging.INFO] = logging.Formatter("I %(message)s")
    logger.info("three")
    assert sub.recv_multipart() == [b"app.INFO", b"I three"]
    handler.setFormatter(logging.Formatter("all %(levelname)s %(message)s"))
    logger.debug("four")
    logger.error("five")
    assert sub.recv_multipart() == [b"app.DEBUG", b"all DEBUG four"]
    assert sub.recv_multipart() == [b"app.ERROR", b"all ERROR five"]


def test_level_without_formatter_uses_the_handler_formatter(make_pair: Pair, logger: logging.Logger) -> None:
    handler, sub = _published(make_pair, logger)
    logger.log(25, "custom level")
    assert sub.recv_multipart() == [b"app.Level 25", b"custom level"]
    handler.setFormatter(logging.Formatter("<%(message)s>"))
    logger.log(25, "again")
    assert sub.recv_multipart() == [b"app.Level 25", b"<again>"]


def test_handler_binds_its_own_pub_socket(ctx: mqcore.Context, logger: logging.Logger) -> None:
    address = endpoint("inproc")
    handler = PUBHandler(address, ctx, root_topic="own")
    assert handler.ctx is ctx
    assert handler.socket.socket_type == mqcore.PUB
    handler.socket.linger = 0
    logger.addHandler(handler)
    sub = ctx.socket(mqcore.SUB)
    sub.linger = 0
    sub.connect(address)
    sub.subscribe(b"own")
    _sync(logger.info, sub)
    logger.info("bound")
    assert sub.recv_multipart() == [b"own.INFO", b"bound\n"]


def test_handler_without_context_makes_a_new_one() -> None:
    handler = PUBHandler("tcp://127.0.0.1:*")
    try:
        assert isinstance(handler.ctx, mqcore.Context)
        assert handler.socket.context is handler.ctx
        assert handler.socket.last_endpoint.startswith(b"tcp://127.0.0.1:")
    finally:
        handler.socket.close(linger=0)
        handler.ctx.term()


def test_handler_on_a_given_socket_uses_its_context(make_pair: Pair, ctx: mqcore.Context) -> None:
    pub, _ = make_pair(mqcore.PUB, mqcore.SUB)
    handler = PUBHandler(pub)
    assert handler.socket is pub and handler.ctx is ctx
    assert handler.root_topic == ""


def test_failures_go_to_handle_error(make_pair: Pair, logger: logging.Logger) -> None:
    pub, _ = make_pair(mqcore.PUB, mqcore.SUB)
    handler = FailureRecordingPUBHandler(pub)
    logger.addHandler(handler)
    logger.info("%d", "not a number")  # formatting fails
    pub.close()
    logger.info("socket closed")  # sending fails
    assert [r.msg for r in handler.failed] == ["%d", "socket closed"]


def test_topic_logger_puts_the_topic_first(make_pair: Pair) -> None:
    log = TopicLogger(f"mqtest.{uuid.uuid4().hex[:8]}", logging.DEBUG)
    pub, sub = make_pair(mqcore.PUB, mqcore.SUB)
    log.addHandler(PUBHandler(pub, root_topic="app"))
    sub.subscribe(b"app")
    _sync(lambda text: log.info("", text), sub)  # an empty topic adds nothing to the root
    log.info("db", "opened %d", 3)
    assert sub.recv_multipart() == [b"app.INFO.db", b"opened 3\n"]
    log.log(logging.INFO, "net", "up")
    assert sub.recv_multipart() == [b"app.INFO.net", b"up\n"]
    line = _line() + 1
    log.debug("db", "query")  # the record names the caller, not TopicLogger
    assert sub.recv_multipart() == [b"app.DEBUG.db", f"DEBUG {HERE}:{line} - query\n".encode()]
    log.warning("db", "slow")
    assert sub.recv_multipart()[0] == b"app.WARNING.db"
    log.critical("db", "down")
    log.fatal("db", "gone")
    assert [sub.recv_multipart()[0] for _ in range(2)] == [b"app.CRITICAL.db"] * 2
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("db", "failed")
    topic, message = sub.recv_multipart()
    assert topic == b"app.ERROR.db"
    assert message.startswith(f"ERROR {HERE}:".encode()) and b"ValueError" in message
