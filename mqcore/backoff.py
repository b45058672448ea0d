"""Reconnect back-off (pure): RECONNECT_IVL doubling up to RECONNECT_IVL_MAX, plus jitter.

Each attempt waits the current interval plus a random jitter in [0, RECONNECT_IVL) so that many
peers that lost the same server do not come back in lock-step. With RECONNECT_IVL_MAX <= RECONNECT_IVL
(libzmq's default 0) the interval never grows.
"""

from __future__ import annotations

import random

from mqcore._random import RNG


def reconnect_delay(current_ms: int, ivl_ms: int, ivl_max_ms: int,
                    rng: random.Random | None = None) -> tuple[float, int]:
    """(seconds to wait now, interval for the next attempt) given the current interval in ms."""
    r = rng if rng is not None else RNG
    current = max(current_ms, 1)
    jitter = r.randrange(ivl_ms) if ivl_ms > 0 else 0
    delay_ms = current + jitter
    if ivl_max_ms > ivl_ms > 0:
        nxt = min(current * 2, ivl_max_ms)
    else:
        nxt = current
    return delay_ms / 1000.0, nxt
