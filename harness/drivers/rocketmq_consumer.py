"""A librocketmq push consumer in a process of its own (``python -m harness.drivers.rocketmq_consumer``), relaying
what it receives to the driver's consumer through a pipe.

Why a process: librocketmq aborts the process that shuts a client down while one of the client's timer
threads waits for an answer (a route update, a heartbeat, a rebalance: its shutdown interrupts that thread, and
``boost::thread_interrupted`` reaches ``std::terminate``). That happens in CI now and then, and always when a
consumer must be replaced after its connections were reset (their next request waits out a 3 s timeout). Here
an abort ends only this process, and a client that must go is shut down, or killed, without touching the
process that measures; the driver's process never loads librocketmq for a consumer.

The pipe (this process -> the driver): frames of a 4-byte big-endian length and the payload. Two lengths are
signals: ``READY`` once the consumer started, ``FAILED`` followed by one frame holding a UTF-8 sentence.
A message is acknowledged to the broker when the callback returns, after its frame was written: the driver reads
every frame, also after this process ended. Standard input (from the driver): its end (the driver closed it,
or died) makes this process shut its consumer down and exit.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from typing import Any

FRAME = struct.Struct(">I")
READY = 0xFFFFFFFF
FAILED = 0xFFFFFFFE
LENGTH_PROPERTY = b"mqbench_len"  # the producer sends the body's length (the wrapper reads bodies as C strings)
# The C API has no setter for where a consumer starts; the push consumer handle is the C++ object, whose
# (non-virtual) setter takes the enum ConsumeFromWhere, in which CONSUME_FROM_FIRST_OFFSET is 4.
SET_CONSUME_FROM_WHERE = "_ZN8rocketmq21DefaultMQPushConsumer19setConsumeFromWhereENS_16ConsumeFromWhereE"
CONSUME_FROM_FIRST_OFFSET = 4
NO_SETTER = ("this librocketmq has no DefaultMQPushConsumer::setConsumeFromWhere, so its consumers would skip a "
             "backlog after a broker crash; install the rocketmq wheel 0.4.4 (pip install rocketmq==0.4.4)")


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def push_consumer(namesrv: str, group: str, instance: str) -> tuple[Any, Any]:
    """A librocketmq push consumer of ``group`` (not started) with one consuming thread, the given instance name,
    starting from a queue's first offset when the group has none stored; and the library with raw getters."""
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
    # The client allows one consumer per group and instance name in a process; each has its own anyway.
    consumer.set_instance_name(instance)
    try:
        setter = getattr(raw, SET_CONSUME_FROM_WHERE)
    except AttributeError:
        raise RuntimeError(NO_SETTER) from None
    setter.restype = None
    setter.argtypes = [ctypes.c_void_p, ctypes.c_int]
    setter(consumer._handle, CONSUME_FROM_FIRST_OFFSET)
    return consumer, raw


def main(argv: list[str]) -> int:
    fd, namesrv, group, instance, topic = int(argv[0]), *argv[1:5]
    try:
        consumer, raw = push_consumer(namesrv, group, instance)

        def deliver(message: Any) -> None:
            handle = message._handle
            length = raw.GetMessageProperty(handle, LENGTH_PROPERTY)
            address = raw.GetMessageBody(handle)
            body = ctypes.string_at(address, int(length)) if length and address else b""
            write_all(fd, FRAME.pack(len(body)) + body)

        consumer.subscribe(topic, deliver)
        consumer.start()
    except Exception as exc:  # noqa: BLE001 - told to the driver in one sentence
        text = str(exc).encode()
        write_all(fd, FRAME.pack(FAILED) + FRAME.pack(len(text)) + text)
        return 2
    write_all(fd, FRAME.pack(READY))
    while sys.stdin.buffer.read(4096):  # until the driver closes it (or dies)
        pass
    consumer.shutdown()
    return 0


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))  # librocketmq's threads would keep the interpreter from exiting
