"""Which side bounded a row, judged from CPU figures: the CPU-based client-bound label. Pure, no IO.

Every figure is percent of one core over the case's measured interval (100 = one core busy all along), so
a reader can check a label from the two figures the report prints beside it:

* a row with a broker is **client-bound** when its busiest client process (a producer, consumer, requester
  or replier, with its JVM when the client runs there) used at least ``CLIENT_BUSY_PCT`` (90 %) of a core
  while the broker, all its processes together, used less than ``BROKER_IDLE_PCT`` (70 %) of one core;
* a row with a broker is also **client-bound** when the machine was full — every process measured (the
  client processes, the broker, the harness) used at least 90 % of the machine's cores together — while the
  broker used less than 70 % of one: many roles played in several processes (a hundred topics' producers and
  consumers), none of them busy, left the broker nothing to work with;
* a brokerless row (mqcore, zmq, jeromq) has no broker to compare with: it is **sender-bound** or
  **receiver-bound** (requester-/replier-bound for request/reply) when its busiest process used at least
  90 % of a core.

The broker threshold is 70 % of *one* core whatever number of cores the broker could use, so that the rule
needs no third figure: a multi-threaded broker spread over several cores is called idle only when all of
it used less than 0.7 of a core. The label therefore errs on the side of not claiming. No label when a
figure is missing (a broker outside this harness, a run from before CPU was measured).
"""

from __future__ import annotations

import math

CLIENT_BUSY_PCT = 90.0
BROKER_IDLE_PCT = 70.0
#: How the summary's ``cpu_note`` of a system without a broker begins.
NO_BROKER = "no broker"
#: The short mark a label puts on a row or bar (tables, charts, the terminal).
MARK = "†"

_SIDE = {"producer": "sender", "consumer": "receiver", "requester": "requester", "replier": "replier"}

#: The rule in one sentence, for legends and captions.
RULE = (
    f"{MARK} client-bound: the busiest client process used ≥ {CLIENT_BUSY_PCT:.0f}% of a core, or all processes "
    f"together ≥ {CLIENT_BUSY_PCT:.0f}% of the machine's cores, while the broker used < "
    f"{BROKER_IDLE_PCT:.0f}% of one (brokerless: sender/receiver-bound, its busiest process ≥ "
    f"{CLIENT_BUSY_PCT:.0f}%)"
)

#: The rule in a line short enough for a chart's axis label.
RULE_SHORT = (f"{MARK}: client-bound (busiest client ≥ {CLIENT_BUSY_PCT:.0f}% of a core, broker < "
              f"{BROKER_IDLE_PCT:.0f}%)")


def _missing(value: float | None) -> bool:
    return value is None or math.isnan(value)


def client_bound(client_pct: float | None, broker_pct: float | None, client_role: str = "",
                 *, brokerless: bool = False, clients_pct: float | None = None, total_pct: float | None = None,
                 cores: float | None = None) -> str | None:
    """The label and its reason in words (``"client-bound: consumer-0 used 97% of a core, the broker
    41%"``), or None when the row is not bound by its client by the rules above. For the second rule:
    ``clients_pct``, every client process together; ``total_pct``, every process measured; ``cores``, the
    machine's."""
    if _missing(client_pct) or client_pct < CLIENT_BUSY_PCT:  # type: ignore[operator]
        if brokerless or any(_missing(v) for v in (clients_pct, total_pct, cores, broker_pct)):
            return None
        if broker_pct >= BROKER_IDLE_PCT or total_pct < CLIENT_BUSY_PCT * cores:  # type: ignore[operator]
            return None
        return (f"client-bound: the client processes together used {clients_pct:.0f}% of a core, the broker "
                f"{broker_pct:.0f}%, all processes {total_pct:.0f}% of the machine's {cores:.0f} cores")
    who = client_role or "the busiest client process"
    if brokerless:
        side = _SIDE.get(client_role.split("-")[0], "client")
        return f"{side}-bound: {who} used {client_pct:.0f}% of a core ({NO_BROKER})"
    if _missing(broker_pct) or broker_pct >= BROKER_IDLE_PCT:  # type: ignore[operator]
        return None
    return f"client-bound: {who} used {client_pct:.0f}% of a core, the broker {broker_pct:.0f}%"


def cpu_text(client_pct: float, broker_pct: float) -> str:
    """``"client 97% · broker 41%"`` (the two figures behind a label; the broker only when it was measured)."""
    parts = [] if _missing(client_pct) else [f"client {client_pct:.0f}%"]
    parts += [] if _missing(broker_pct) else [f"broker {broker_pct:.0f}%"]
    return " · ".join(parts)
