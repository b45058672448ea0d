"""The `mqcore` driver: our own pure-Python library, driven through its pyzmq-compatible API.

Everything is the `zmq` driver's: only the module differs, which is also a standing check that code written
for pyzmq runs on mqcore by changing the import. That includes the `curve` option: its keys come from
`mqcore.curve_keypair()` and the sockets are configured through the same pyzmq option names. The library's
defaults stay as they are, BUSY_POLL included (a waiting recv polls up to 100 us before it sleeps); the
run records it beside the version.
"""

from __future__ import annotations

from types import ModuleType
from typing import ClassVar

from harness.drivers.zmq_driver import ZmqDriver


class MqcoreDriver(ZmqDriver):
    name: ClassVar[str] = "mqcore"
    client_packages: ClassVar[tuple[str, ...]] = ("mqbench",)
    client: ClassVar[str] = ""  # measured through its own API

    @classmethod
    def module(cls) -> ModuleType:
        import mqcore

        return mqcore

    def versions(self) -> dict[str, str]:
        import mqcore
        from mqcore.options import BUSY_POLL_DEFAULT_US

        out = super().versions()
        out["mqcore"] = mqcore.__version__
        # What the library does while a recv waits, recorded beside its version: it polls up to this
        # many microseconds before sleeping (libzmq's BUSY_POLL is 0). See docs/pyzmq-suite.md.
        out["BUSY_POLL"] = f"{BUSY_POLL_DEFAULT_US} us"
        return out
