"""The two Kafka protocol requests the provisioner makes itself, over one blocking socket each: ApiVersions
(is the broker there) and Metadata (which brokers are registered, and who leads a partition).

Encoding and decoding are pure functions (tested on bytes, without a broker); ``exchange`` is the only IO.
Only non-flexible versions are used (plain int16-length strings, int32-count arrays): ApiVersions v0, which
every release answers, and Metadata v7, the last non-flexible version that gives each partition's leader
epoch (Kafka 4 answers Metadata v4 and later, KIP-896).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from harness.brokers._base import ProbeError
from harness.brokers._wire import connect, recv_exact

API_VERSIONS, METADATA = 18, 3
METADATA_VERSION = 7
CLIENT_ID = b"mqbench-probe"


def request(api_key: int, version: int, correlation: int, body: bytes = b"") -> bytes:
    """A size-prefixed request: header v1 (api key, version, correlation id, client id) and ``body``."""
    header = struct.pack(">hhih", api_key, version, correlation, len(CLIENT_ID)) + CLIENT_ID
    return struct.pack(">i", len(header) + len(body)) + header + body


def exchange(host: str, port: int, message: bytes, timeout: float) -> bytes:
    """Send one request and return the answer after its size prefix (correlation id first)."""
    with connect(host, port, timeout) as sock:
        sock.sendall(message)
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        return recv_exact(sock, size)


def metadata_request(correlation: int, topics: list[str]) -> bytes:
    """Metadata v7 for ``topics`` (none: brokers and controller only), never creating a topic."""
    body = struct.pack(">i", len(topics))
    for name in topics:
        encoded = name.encode()
        body += struct.pack(">h", len(encoded)) + encoded
    body += b"\x00"  # allow_auto_topic_creation = false
    return request(METADATA, METADATA_VERSION, correlation, body)


@dataclass(frozen=True)
class Partition:
    error: int
    leader: int  # broker id, -1 when none
    epoch: int  # leader epoch: raised at every change of leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True)
class Metadata:
    """What one broker knows: the registered (unfenced) brokers, the controller it names, the partitions."""

    brokers: dict[int, tuple[str, int]]
    controller: int
    topic_errors: dict[str, int] = field(default_factory=dict)
    partitions: dict[tuple[str, int], Partition] = field(default_factory=dict)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.at + size > len(self.data):
            raise ProbeError("the broker's Metadata answer ended early")
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += size
        return int(value)

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        text = self.data[self.at : self.at + n].decode(errors="replace")
        self.at += n
        return text

    def ints(self) -> tuple[int, ...]:
        return tuple(self.take(">i") for _ in range(max(0, self.take(">i"))))


def parse_metadata(answer: bytes, correlation: int) -> Metadata:
    """Decode a Metadata v7 answer (after its size prefix); ProbeError when it is not one."""
    r = _Reader(answer)
    if r.take(">i") != correlation:
        raise ProbeError("the broker answered another request")
    r.take(">i")  # throttle_time_ms
    brokers: dict[int, tuple[str, int]] = {}
    for _ in range(max(0, r.take(">i"))):
        node, host, port = r.take(">i"), r.string() or "", r.take(">i")
        r.string()  # rack
        brokers[node] = (host, port)
    r.string()  # cluster id
    meta = Metadata(brokers=brokers, controller=r.take(">i"))
    for _ in range(max(0, r.take(">i"))):
        error, name = r.take(">h"), r.string() or ""
        r.take(">b")  # is_internal
        meta.topic_errors[name] = error
        for _ in range(max(0, r.take(">i"))):
            p_error, index, leader, epoch = r.take(">h"), r.take(">i"), r.take(">i"), r.take(">i")
            replicas, isr = r.ints(), r.ints()
            r.ints()  # offline replicas
            meta.partitions[(name, index)] = Partition(p_error, leader, epoch, replicas, isr)
    return meta


def metadata(host: str, port: int, topics: list[str], timeout: float) -> Metadata:
    """Ask the broker at ``host:port`` for its metadata (of ``topics``); OSError or ProbeError on failure."""
    return parse_metadata(exchange(host, port, metadata_request(1, topics), timeout), 1)


def api_versions(host: str, port: int, timeout: float) -> None:
    """ApiVersions v0: returns when the broker answers it without an error code, else ProbeError."""
    answer = exchange(host, port, request(API_VERSIONS, 0, 1), timeout)
    correlation, error = struct.unpack(">ih", answer[:6])
    if correlation != 1 or error != 0:
        raise ProbeError(f"ApiVersions answered with error code {error}")
