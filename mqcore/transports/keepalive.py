"""TCP keepalive options (TCP_KEEPALIVE, _IDLE, _INTVL, _CNT) applied to a TCP socket, as libzmq does.

-1 leaves the system default; TCP_KEEPALIVE 1/0 turns SO_KEEPALIVE on/off; idle and interval are in
seconds. Options a platform lacks are skipped.
"""

from __future__ import annotations

import contextlib
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mqcore.options import Options


def apply_tcp_keepalive(sock: socket.socket, options: Options) -> None:
    """Set the keepalive options of ``sock`` from ``options`` (errors are ignored)."""
    with contextlib.suppress(OSError):
        if options.tcp_keepalive >= 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1 if options.tcp_keepalive else 0)
        if options.tcp_keepalive == 1:
            for name, value in (("TCP_KEEPIDLE", options.tcp_keepalive_idle),
                                ("TCP_KEEPINTVL", options.tcp_keepalive_intvl),
                                ("TCP_KEEPCNT", options.tcp_keepalive_cnt)):
                opt = getattr(socket, name, None)
                if opt is not None and value > 0:
                    sock.setsockopt(socket.IPPROTO_TCP, opt, value)
