"""A librocketmq push consumer in a process of its own (``python -m harness.drivers.rocketmq_consumer``), relaying
each message to the driver's consumer through a pipe and acknowledging it only once the driver took it.

Why a process: librocketmq aborts the process that shuts a client down while one of the client's timer
threads waits for an answer (a route update, a heartbeat, a rebalance: its shutdown interrupts that thread, and
``boost::thread_interrupted`` reaches ``std::terminate``). That happened in CI now and then, and to a consumer replaced
after its connections were reset (its next request waits out a 3 s timeout) in a net-reset run. Here the
client is never shut down: when the driver is done with it, this process saves the group's offsets and exits,
so no abort can reach the process that measures, which never loads librocketmq for a consumer.

Pipes: ``data`` (this process -> the driver): frames of a 4-byte big-endian length and the payload; two lengths
are signals: ``READY`` once the consumer started, ``FAILED`` followed by a length and a UTF-8 sentence.
``acks`` (the driver -> this process): one byte per message once ``on_message`` returned; the message's
callback returns (and the broker counts the message consumed) only then, so a message is never acknowledged
before the run recorded it, as in the driver's contract. Standard input: its end (the driver closed it, or
died) makes this process save the offsets of what was acknowledged and exit.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import threading
import time
from typing import Any

FRAME = struct.Struct(">I")
READY = 0xFFFFFFFF
FAILED = 0xFFFFFFFE
LENGTH_PROPERTY = b"mqbench_len"  # the producer sends the body's length (the wrapper reads bodies as C strings)
# The C API has no setter for where a consumer starts, nor a way to save its offsets; the push consumer handle
# is the C++ object, whose (non-virtual) methods are called by symbol. In the enum ConsumeFromWhere,
# CONSUME_FROM_FIRST_OFFSET is 4.
SET_CONSUME_FROM_WHERE = "_ZN8rocketmq21DefaultMQPushConsumer19setConsumeFromWhereENS_16ConsumeFromWhereE"
PERSIST_CONSUMER_OFFSET = "_ZN8rocketmq21DefaultMQPushConsumer21persistConsumerOffsetEv"
CONSUME_FROM_FIRST_OFFSET = 4
# librocketmq pauses a queue's pulls for a whole second whenever its consumer holds more than this many of its
# messages unconsumed (1,000 by default; the Java client pauses 50 ms): a consumer behind by more than it can
# read in a second then idles most of each second (1.7k msg/s here, the consumer and the broker using 11 % and
# 29 % of a core, behind an async producer of 4.9k msg/s). It may hold up to the Java client's
# pullThresholdSizeForQueue in bytes, between 1,000 and 20,000 messages (cache_messages).
SET_MAX_CACHE = "_ZN8rocketmq21DefaultMQPushConsumer26setMaxCacheMsgSizePerQueueEi"
CACHE_BYTES = 100 << 20
CACHE_MESSAGES = (1000, 20_000)
OFFSETS_SENT = 0.3  # seconds the client's network thread gets to send the saved offsets before the process exits
NO_SETTER = ("this librocketmq has no DefaultMQPushConsumer::setConsumeFromWhere or setMaxCacheMsgSizePerQueue, so "
             "its consumers would skip a backlog after a broker crash or idle behind a fast producer; install the "
             "rocketmq wheel 0.4.4 (pip install rocketmq==0.4.4)")


def write_all(fd: int, data: bytes) -> None:
    """Write ``data`` to the driver; if the driver is gone (stopped, interrupted, killed) the process ends
    quietly, as it does when its standard input ends: nothing is acknowledged that the driver did not take."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except BrokenPipeError:
        os._exit(0)


def cache_messages(message_size: int) -> int:
    """How many messages of ``message_size`` bytes a consumer may hold per queue (see ``SET_MAX_CACHE``)."""
    return max(CACHE_MESSAGES[0], min(CACHE_MESSAGES[1], CACHE_BYTES // max(1, message_size)))


def push_consumer(namesrv: str, group: str, instance: str, cache: int = CACHE_MESSAGES[0]) -> tuple[Any, Any]:
    """A librocketmq push consumer of ``group`` (not started) with one consuming thread, the given instance name,
    starting from a queue's first offset when the group has none stored, holding up to ``cache`` messages per
    queue; and the library with raw getters."""
    from rocketmq.client import PushConsumer
    from rocketmq.ffi import dll

    raw = ctypes.CDLL(dll._name)  # our own view, whose body getter returns the address, not a C string
    raw.GetMessageBody.restype = ctypes.c_void_p
    raw.GetMessageBody.argtypes = [ctypes.c_void_p]
    raw.GetMessageProperty.restype = ctypes.c_char_p
    raw.GetMessageProperty.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    consumer = PushConsumer(group)
    consumer.set_namesrv_addr(namesrv)
    consumer.set_thread_count(1)  # one message at a time, in order per queue
    consumer.set_instance_name(instance)
    try:
        setter, cache_setter = getattr(raw, SET_CONSUME_FROM_WHERE), getattr(raw, SET_MAX_CACHE)
    except AttributeError:
        raise RuntimeError(NO_SETTER) from None
    for method, value in ((setter, CONSUME_FROM_FIRST_OFFSET), (cache_setter, cache)):
        method.restype = None
        method.argtypes = [ctypes.c_void_p, ctypes.c_int]
        method(consumer._handle, value)
    return consumer, raw


def main(argv: list[str]) -> None:
    data, acks, namesrv, group, instance, topic = int(argv[0]), int(argv[1]), *argv[2:6]
    cache = int(argv[6]) if len(argv) > 6 else CACHE_MESSAGES[0]
    try:
        consumer, raw = push_consumer(namesrv, group, instance, cache)

        def deliver(message: Any) -> None:
            handle = message._handle
            length = raw.GetMessageProperty(handle, LENGTH_PROPERTY)
            address = raw.GetMessageBody(handle)
            body = ctypes.string_at(address, int(length)) if length and address else b""
            write_all(data, FRAME.pack(len(body)) + body)
            if not os.read(acks, 1):  # the driver is gone: never acknowledge what it did not take
                threading.Event().wait()  # until main() ends the process

        consumer.subscribe(topic, deliver)
        consumer.start()
    except Exception as exc:  # noqa: BLE001 - told to the driver in one sentence
        text = str(exc).encode()
        write_all(data, FRAME.pack(FAILED) + FRAME.pack(len(text)) + text)
        os._exit(2)
    write_all(data, FRAME.pack(READY))
    while sys.stdin.buffer.read(4096):  # until the driver closes it (or dies)
        pass
    persist = getattr(raw, PERSIST_CONSUMER_OFFSET, None)
    if persist is not None:  # the group's offsets of what the driver took, so a successor reads on from there
        persist.restype, persist.argtypes = None, [ctypes.c_void_p]
        persist(consumer._handle)
        time.sleep(OFFSETS_SENT)  # one-way requests, written by the client's own network thread
    os._exit(0)  # without the client's shutdown (see above); the broker drops it with its connections


if __name__ == "__main__":
    main(sys.argv[1:])
