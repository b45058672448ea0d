"""A plain pika publish loop: the simplest program a pika user writes, as a reference row for RabbitMQ.

    python -m harness.crosscheck.tools._pika_loop URL QUEUE RAMP SECONDS SIZE

Declares ``QUEUE`` (non-durable) and publishes transient messages of SIZE bytes through one
BlockingConnection with ``basic_publish`` in a loop (no confirms, as pika's docs show it) for RAMP + SECONDS
seconds; the publishes after RAMP are its figure. Then it purges and deletes the queue. Prints one JSON
line: ``{"published_per_s": ..., "seconds": ..., "messages": ...}`` (the measured part).
"""

from __future__ import annotations

import json
import sys
import time

import pika


def main(argv: list[str]) -> int:
    url, queue, ramp, seconds, size = argv[0], argv[1], float(argv[2]), float(argv[3]), int(argv[4])
    body = b"x" * size
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        channel.queue_declare(queue=queue, durable=False, auto_delete=False)
        publish, clock = channel.basic_publish, time.monotonic
        start = clock()
        begin, end = start + ramp, start + ramp + seconds
        counted = 0
        t0 = t1 = begin
        while True:
            now = clock()
            if now >= end:
                break
            for _ in range(100):  # the clock every hundred messages
                publish(exchange="", routing_key=queue, body=body)
            if now >= begin:
                if not counted:
                    t0 = now
                counted += 100
                t1 = clock()
        channel.queue_purge(queue=queue)
        channel.queue_delete(queue=queue)
    finally:
        connection.close()
    span = t1 - t0
    print(json.dumps({"published_per_s": counted / span if span > 0 else 0.0, "seconds": span,
                      "messages": counted}))
    return 0 if counted else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
