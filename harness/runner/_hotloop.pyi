"""Types of the C extension built from _hotloop.c (see there and worker.py)."""

from collections.abc import Callable
from typing import Any

def send_stamped(
    send: Callable[[Any], object], slots: list[Any], block: Any, size: int, offset: int, n: int, deadline: int,
    as_bytes: bool = False, pool: list[Any] | None = None, first: int = 0, /
) -> int: ...
def recv_headers(
    recv: Callable[[], Any], timed_out: type[BaseException], headers: Any, lengths: Any, stamps: Any, n: int,
    hsize: int, /
) -> int: ...
