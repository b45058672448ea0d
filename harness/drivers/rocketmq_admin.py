"""RocketMQ's remoting protocol for the admin requests the harness needs (what ``mqadmin`` does): create and
delete topics, read the NameServers' cluster info (broker groups, their masters), a broker's runtime info
(release, boot time), a master's replication (HA) status and a consumer group's connected clients.

A frame is: total length (4 bytes), header length with the serialisation type in its high byte (4 bytes,
0 = JSON), the JSON header, the body. One request per connection; every call is bounded by ``timeout``.
NameServers are given as ``host:port``, or several as ``host:port;host:port`` (RocketMQ's list syntax).
"""

from __future__ import annotations

import json
import re
import socket
import struct
import time
from collections.abc import Iterator, Mapping
from typing import Any

# Remoting request codes (RocketMQ's RequestCode).
UPDATE_AND_CREATE_TOPIC = 17
GET_BROKER_RUNTIME_INFO = 28
GET_ROUTEINFO_BY_TOPIC = 105
GET_BROKER_CLUSTER_INFO = 106
GET_CONSUMER_CONNECTION_LIST = 203
DELETE_TOPIC_IN_BROKER = 215
DELETE_TOPIC_IN_NAMESRV = 216
GET_BROKER_HA_STATUS = 907
# Response codes (RocketMQ's ResponseCode).
CONSUMER_NOT_ONLINE = 206  # the consumer group has no client connected


class RemotingRefusal(OSError):
    """The server answered a remoting request with an error ``code`` (RocketMQ's ResponseCode)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def remoting_call(
    addr: str, code: int, fields: Mapping[str, str] | None = None, timeout: float = 5.0
) -> tuple[dict[str, Any], bytes]:
    """Send one request to ``addr`` (``host:port``) and return the answer's header and body.
    Raises OSError when the connection fails, RemotingRefusal when the answer says the request failed."""
    host, _, port = addr.rpartition(":")
    header = json.dumps(
        {"code": code, "language": "PYTHON", "version": 0, "opaque": 1, "flag": 0, "extFields": dict(fields or {})}
    ).encode()
    frame = struct.pack(">I", len(header)) + header
    with socket.create_connection((host, int(port)), timeout=timeout) as sock, sock.makefile("rb") as answer_in:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">I", len(frame)) + frame)
        (size,) = struct.unpack(">I", answer_in.read(4).rjust(4, b"\0"))
        data = answer_in.read(size)
    if len(data) < max(size, 4):
        raise OSError("the connection closed mid-answer")
    header_len = struct.unpack(">I", data[:4])[0] & 0xFFFFFF
    answer = json.loads(data[4 : 4 + header_len])
    if answer.get("code", -1) != 0:
        raise RemotingRefusal(answer.get("code", -1), f"request {code} answered code {answer.get('code')}: "
                                                      f"{answer.get('remark', '')}")
    return answer, data[4 + header_len :]


# -- the NameServers: broker groups and their masters ---------------------------------------------------


def _cluster_infos(namesrv: str, timeout: float) -> Iterator[dict[str, dict[int, str]]]:
    """The broker groups each of the NameServers ``namesrv`` knows, in turn, skipping those that do not
    answer; OSError when none answers."""
    answered = False
    for addr in filter(None, namesrv.split(";")):
        try:
            _, body = remoting_call(addr, GET_BROKER_CLUSTER_INFO, timeout=timeout)
        except OSError:
            continue
        answered = True
        # The body is fastjson with integer map keys ({0:"127.0.0.1:10911"}), not JSON: quote them first.
        info = json.loads(re.sub(r'([{,])(-?\d+):"', r'\1"\2":"', body.decode(errors="replace")))
        yield {name: {int(k): v for k, v in (group.get("brokerAddrs") or {}).items()}
               for name, group in (info.get("brokerAddrTable") or {}).items()}
    if not answered:
        raise OSError(f"no rocketmq NameServer of {namesrv} answers")


def broker_groups(namesrv: str, timeout: float) -> dict[str, dict[int, str]]:
    """Each broker group as the first of the NameServers ``namesrv`` that knows any says: broker id ->
    ``host:port``, the master under id 0 (a NameServer started again knows a broker only once it registered
    again). OSError when no NameServer answers."""
    groups: dict[str, dict[int, str]] = {}
    for groups in _cluster_infos(namesrv, timeout):
        if groups:
            break
    return groups


def broker_addresses(namesrv: str, timeout: float) -> list[str]:
    """``host:port`` of every broker registered with the NameServers ``namesrv``."""
    return sorted({addr for group in broker_groups(namesrv, timeout).values() for addr in group.values()})


def group_masters(namesrv: str, timeout: float) -> dict[str, str | None]:
    """Each broker group's master (broker id 0), as the first of the NameServers ``namesrv`` that names one
    says; None for a group none names a master of (an election is under way). OSError when no NameServer
    answers."""
    masters: dict[str, str | None] = {}
    for groups in _cluster_infos(namesrv, timeout):
        for name, group in groups.items():
            if masters.get(name) is None:
                masters[name] = group.get(0)
        if masters and all(masters.values()):
            break
    return masters


# -- brokers ----------------------------------------------------------------------------------------


def broker_version(addr: str, timeout: float) -> str:
    """The broker's release, e.g. ``5.5.0`` (from its runtime info's ``V5_5_0``); "" if it does not say."""
    _, body = remoting_call(addr, GET_BROKER_RUNTIME_INFO, timeout=timeout)
    match = re.search(r'"brokerVersionDesc":"V(\d+)_(\d+)_(\d+)', body.decode(errors="replace"))
    return ".".join(match.groups()) if match else ""


def broker_boot_time(addr: str, timeout: float) -> str:
    """When the broker at ``addr`` started (its runtime info's ``bootTimestamp``, ms since the epoch)."""
    _, body = remoting_call(addr, GET_BROKER_RUNTIME_INFO, timeout=timeout)
    match = re.search(r'"bootTimestamp":"(\d+)"', body.decode(errors="replace"))
    if match is None:
        raise ValueError(f"the rocketmq broker at {addr} does not say when it started")
    return match.group(1)


def replication_status(addr: str, timeout: float) -> int:
    """How many slaves the master at ``addr`` counts in sync (its HA status); 0 when it is not a master."""
    _, body = remoting_call(addr, GET_BROKER_HA_STATUS, timeout=timeout)
    status = json.loads(body)
    return int(status.get("inSyncSlaveNums", 0)) if status.get("master") else 0


def consumer_clients(addr: str, group: str, timeout: float) -> list[str]:
    """The client ids (``<pid>-<ip>@<instance name>``) of the consumers of ``group`` connected to the broker at
    ``addr`` (none: an empty list)."""
    try:
        _, body = remoting_call(addr, GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group}, timeout=timeout)
    except RemotingRefusal as exc:
        if exc.code == CONSUMER_NOT_ONLINE:
            return []
        raise
    return re.findall(r'"clientId":"([^"]*)"', body.decode(errors="replace"))


def create_topic(addr: str, topic: str, queues: int, timeout: float) -> None:
    fields = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(queues),
        "writeQueueNums": str(queues),
        "perm": "6",  # read and write
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    remoting_call(addr, UPDATE_AND_CREATE_TOPIC, fields, timeout=timeout)


def unrouted(namesrv: str, topics: list[str], timeout: float, wait: float) -> list[str]:
    """Of ``topics`` (just created on the brokers), those for which a NameServer of ``namesrv`` still had no
    route after ``wait`` s (asked again every half second). A broker registers a new topic with the NameServers
    by itself, but not at once when a thousand are created together, and a producer that asks for a route
    before then fails its send ("No route info of this topic")."""
    addrs = [a for a in namesrv.split(";") if a]
    left = list(topics)
    deadline = time.monotonic() + wait
    while True:
        still = []
        for topic in left:
            for addr in addrs:
                try:
                    remoting_call(addr, GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, timeout=timeout)
                except RemotingRefusal:  # TOPIC_NOT_EXIST: not registered there yet
                    still.append(topic)
                    break
        left = still
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.5)
