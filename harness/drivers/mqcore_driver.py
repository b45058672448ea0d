"""The `mqcore` driver: our own pure-Python library, driven through its pyzmq-compatible API.

Everything is the `zmq` driver's: only the module differs, which is also a standing check that code written
for pyzmq runs on mqcore by changing the import. That includes the `curve` option: its keys come from
`mqcore.curve_keypair()` and the sockets are configured through the same pyzmq option names.
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

        out = super().versions()
        out["mqcore"] = mqcore.__version__
        return out
