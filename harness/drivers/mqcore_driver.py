"""The `mqcore` driver: our own pure-Python library, driven through its pyzmq-compatible API.

Everything is the `zmq` driver's: only the module differs, which is also a standing check that code written
for pyzmq runs on mqcore by changing the import. That includes the `curve` option: its keys come from
`mqcore.curve_keypair()` and the sockets are configured through the same pyzmq option names. One option is
mqcore's own: `busy_poll`, the microseconds a waiting recv polls before it sleeps (the library's BUSY_POLL,
100 by default; 0 sleeps at once, as libzmq does), so that a scenario can show what that wait is worth
beside the default. The run records the value in force beside mqcore's version.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, ClassVar

from harness.drivers.base import Capabilities
from harness.drivers.options import option
from harness.drivers.zmq_driver import ZmqDriver, ZmqOptions


@dataclass(frozen=True)
class MqcoreOptions(ZmqOptions):
    busy_poll: int | None = option(None, minimum=0, exact=True)  # None: mqcore's default


class MqcoreDriver(ZmqDriver):
    name: ClassVar[str] = "mqcore"
    client_packages: ClassVar[tuple[str, ...]] = ("mqbench",)
    client: ClassVar[str] = ""  # measured through its own API
    # mqcore's send turns any buffer but bytes into bytes first, a Python call per message (docs/harness-cost.md)
    capabilities: ClassVar[Capabilities] = replace(ZmqDriver.capabilities, send_bytes=True)
    options_type = MqcoreOptions
    opts: MqcoreOptions

    @classmethod
    def module(cls) -> ModuleType:
        import mqcore

        return mqcore

    def _busy_poll(self) -> int:
        from mqcore.options import BUSY_POLL_DEFAULT_US

        return BUSY_POLL_DEFAULT_US if self.opts.busy_poll is None else self.opts.busy_poll

    def versions(self) -> dict[str, str]:
        import mqcore

        out = super().versions()
        out["mqcore"] = mqcore.MQCORE_VERSION
        out["BUSY_POLL"] = f"{self._busy_poll()} us"  # how its recv waits (libzmq's is 0); docs/pyzmq-suite.md
        return out

    def _socket(self, kind: int) -> Any:
        s = super()._socket(kind)
        if self.opts.busy_poll is not None:
            s.setsockopt(self.module().BUSY_POLL, self.opts.busy_poll)
        return s
