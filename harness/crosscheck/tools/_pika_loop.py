"""A plain pika publish loop: the simplest program a pika user writes, as a reference row for RabbitMQ.

    python -m harness.crosscheck.tools._pika_loop URL QUEUE MESSAGES SIZE

Declares ``QUEUE`` (non-durable), publishes MESSAGES transient messages of SIZE bytes through one
BlockingConnection with ``basic_publish`` in a loop (no confirms, as pika's docs show it), then drains
them with ``basic_consume`` (auto-ack) and deletes the queue. Prints one JSON line:
``{"published_per_s": ..., "drained_per_s": ..., "messages": ...}``. The drain runs after publishing, not
beside it, so only the publish rate compares with a concurrent receiver.
"""

from __future__ import annotations

import json
import sys
import time

import pika


def main(argv: list[str]) -> int:
    url, queue, messages, size = argv[0], argv[1], int(argv[2]), int(argv[3])
    body = b"x" * size
    connection = pika.BlockingConnection(pika.URLParameters(url))
    try:
        channel = connection.channel()
        channel.queue_declare(queue=queue, durable=False, auto_delete=False)
        t0 = time.monotonic()
        for _ in range(messages):
            channel.basic_publish(exchange="", routing_key=queue, body=body)
        published = time.monotonic() - t0
        received = 0
        t1 = time.monotonic()
        for _method, _props, _body in channel.consume(queue, auto_ack=True, inactivity_timeout=10):
            if _method is None:
                break
            received += 1
            if received == messages:
                break
        drained = time.monotonic() - t1
        channel.cancel()
        channel.queue_delete(queue=queue)
    finally:
        connection.close()
    print(json.dumps({"published_per_s": messages / published, "drained_per_s": received / drained,
                      "messages": received}))
    return 0 if received == messages else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
