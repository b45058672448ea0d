"""Socket types and which pairs may talk to each other (the table of RFC 37)."""

from __future__ import annotations

_PEERS: dict[str, frozenset[str]] = {
    "REQ": frozenset({"REP", "ROUTER"}),
    "REP": frozenset({"REQ", "DEALER"}),
    "DEALER": frozenset({"REP", "DEALER", "ROUTER"}),
    "ROUTER": frozenset({"REQ", "DEALER", "ROUTER"}),
    "PUB": frozenset({"SUB", "XSUB"}),
    "XPUB": frozenset({"SUB", "XSUB"}),
    "SUB": frozenset({"PUB", "XPUB"}),
    "XSUB": frozenset({"PUB", "XPUB"}),
    "PUSH": frozenset({"PULL"}),
    "PULL": frozenset({"PUSH"}),
    "PAIR": frozenset({"PAIR"}),
    "CLIENT": frozenset({"SERVER"}),
    "SERVER": frozenset({"CLIENT"}),
    "RADIO": frozenset({"DISH"}),
    "DISH": frozenset({"RADIO"}),
    "SCATTER": frozenset({"GATHER"}),
    "GATHER": frozenset({"SCATTER"}),
    "PEER": frozenset({"PEER"}),
    "CHANNEL": frozenset({"CHANNEL"}),
}

SOCKET_TYPES = frozenset(_PEERS)

# Sockets that receive subscriptions; from them, 0x01/0x00-prefixed messages are subscriptions.
PUBLISHERS = frozenset({"PUB", "XPUB"})


def compatible(ours: str, theirs: str) -> bool:
    """Whether a socket of type ``ours`` may talk to a peer announcing ``theirs`` (exact names)."""
    return theirs in _PEERS.get(ours, frozenset())
