"""Logging handlers that publish records on a PUB socket (pyzmq's ``zmq.log.handlers``).

``PUBHandler`` sends each record as two frames, ``[topic, formatted message]``, UTF-8 encoded. The topic
is ``root_topic.LEVELNAME``, without the leading ``root_topic.`` when the root topic is empty, and with
``.subtopic`` appended when the message reads ``"subtopic::text"`` (only ``text`` is then formatted).
``TopicLogger`` is a ``logging.Logger`` whose methods take that subtopic as their first argument.

Threading: ``logging.Handler.handle`` holds the handler's lock around ``emit``, so records logged from
several threads reach the socket one at a time.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from mqcore.constants import SocketType
from mqcore.context import Context
from mqcore.socket import Socket

__all__ = ["PUBHandler", "TopicLogger", "TOPIC_DELIM"]

TOPIC_DELIM = "::"  # separates a subtopic from the text in a record's message

_LOCATED = "%(levelname)s %(filename)s:%(lineno)d - %(message)s\n"


def _default_formatters() -> dict[int, logging.Formatter | None]:
    # The per-level layouts subscribers of pyzmq's handler see.
    return {
        logging.DEBUG: logging.Formatter(_LOCATED),
        logging.INFO: logging.Formatter("%(message)s\n"),
        logging.WARNING: logging.Formatter(_LOCATED),
        logging.ERROR: logging.Formatter("%(levelname)s %(filename)s:%(lineno)d - %(message)s - %(exc_info)s\n"),
        logging.CRITICAL: logging.Formatter(_LOCATED),
    }


class PUBHandler(logging.Handler):
    """A ``logging.Handler`` that publishes each record on a PUB socket.

    ``interface_or_socket`` is either a socket to publish on (its context becomes ``ctx``) or an
    address that a new PUB socket binds; that socket is made in ``context``, or in a new Context when
    none is given. Binding errors (``ZMQError``) propagate from the constructor. The handler does not
    close the socket or terminate the context: their owner does.

    ``formatters`` maps a level number to the formatter for records of that level; a level it lacks,
    or maps to None, uses the handler's ``formatter`` (logging's default ``%(message)s`` if unset).
    """

    formatters: dict[int, logging.Formatter | None]
    ctx: Context
    socket: Socket

    def __init__(self, interface_or_socket: str | Socket, context: Context | None = None,
                 root_topic: str = "") -> None:
        super().__init__()
        self.root_topic = root_topic
        self.formatters = _default_formatters()
        if isinstance(interface_or_socket, Socket):
            self.socket = interface_or_socket
            self.ctx = interface_or_socket.context
        else:
            self.ctx = context if context is not None else Context()
            self.socket = self.ctx.socket(SocketType.PUB)
            self.socket.bind(interface_or_socket)

    @property
    def root_topic(self) -> str:
        """The first part of every topic this handler publishes ('' for none)."""
        return self._root_topic

    @root_topic.setter
    def root_topic(self, value: str | bytes) -> None:
        self.setRootTopic(value)

    def setRootTopic(self, root_topic: str | bytes) -> None:
        """Set ``root_topic``; bytes are decoded as UTF-8.

        Subscribers must subscribe to a prefix of it (or to b'') to receive anything; with the empty
        root topic, topics start with the level name (``INFO``, ``DEBUG`` ...).
        """
        self._root_topic = root_topic.decode("utf8") if isinstance(root_topic, bytes) else root_topic

    def setFormatter(self, fmt: logging.Formatter | None, level: int = logging.NOTSET) -> None:
        """Use ``fmt`` for records of ``level``; with no level, for every level (replacing the
        per-level formatters set so far)."""
        if level == logging.NOTSET:
            self.formatter = fmt
            for known in self.formatters:
                self.formatters[known] = fmt
        else:
            self.formatters[level] = fmt

    def format(self, record: logging.LogRecord) -> str:
        """The record formatted by the formatter for its level."""
        formatter = self.formatters.get(record.levelno)
        if formatter is None:
            return super().format(record)
        return formatter.format(record)

    def emit(self, record: logging.LogRecord) -> None:
        """Publish ``record`` as ``[topic, message]``; a failure goes to ``handleError``, as in every
        logging handler, rather than to the code that logged."""
        subtopic, delim, text = str(record.msg).partition(TOPIC_DELIM)
        if delim:
            record = copy.copy(record)  # other handlers still see the message as logged
            record.msg = text
        else:
            subtopic = ""
        try:
            message = self.format(record).encode("utf8")
            parts = [self.root_topic, record.levelname, subtopic]
            topic = ".".join(part for part in parts if part).encode("utf8", "replace")
            self.socket.send_multipart([topic, message])
        except Exception:
            self.handleError(record)


class TopicLogger(logging.Logger):
    """A ``logging.Logger`` whose logging methods take a topic before the message.

    ``logger.info("db.pool", "opened %d", n)`` logs ``"db.pool::opened %d"``, which a ``PUBHandler``
    publishes under the topic ``<root>.INFO.db.pool``. Records report the caller's file and line.
    """

    def log(self, level: int, topic: str, msg: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Log ``msg % args`` under ``topic`` at ``level``; keyword arguments as for ``Logger.log``."""
        self._log_topic(level, topic, msg, args, kwargs)

    def debug(self, topic: str, msg: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self._log_topic(logging.DEBUG, topic, msg, args, kwargs)

    def info(self, topic: str, msg: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self._log_topic(logging.INFO, topic, msg, args, kwargs)

    def warning(self, topic: str, msg: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self._log_topic(logging.WARNING, topic, msg, args, kwargs)

    def error(self, topic: str, msg: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self._log_topic(logging.ERROR, topic, msg, args, kwargs)

    def exception(self, topic: str, msg: str, *args: Any, exc_info: Any = True,  # type: ignore[override]
                  **kwargs: Any) -> None:
        """Log at ERROR with the exception being handled."""
        self._log_topic(logging.ERROR, topic, msg, args, dict(kwargs, exc_info=exc_info))

    def critical(self, topic: str, msg: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self._log_topic(logging.CRITICAL, topic, msg, args, kwargs)

    fatal = critical  # type: ignore[assignment]

    def _log_topic(self, level: int, topic: str, msg: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        # Two frames of ours (the public method and this one) sit between the caller and Logger.log.
        kwargs["stacklevel"] = kwargs.get("stacklevel", 1) + 2
        logging.Logger.log(self, level, f"{topic}{TOPIC_DELIM}{msg}", *args, **kwargs)


# Logger.warn, deprecated, is gone from Python 3.13: TopicLogger has it where Logger does.
if hasattr(logging.Logger, "warn"):
    TopicLogger.warn = TopicLogger.warning  # type: ignore[assignment, method-assign]
