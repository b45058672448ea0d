"""Test-only drivers (registered by tests, imported by workers through their class path)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from harness.drivers.base import DriverError, Producer, Role
from harness.drivers.zmq_driver import ZmqDriver


class _Wrapping(Producer):
    """A real producer with something done around each send (subclasses override ``send``)."""

    def __init__(self, inner: Producer) -> None:
        self._inner = inner

    def close(self) -> None:
        self._inner.close()


class StallingDriver(ZmqDriver):
    """pyzmq, except that each producer's send blocks forever after ``block_after`` messages."""

    name: ClassVar[str] = "stalling"

    @classmethod
    def option_names(cls) -> frozenset[str]:
        return super().option_names() | {"block_after"}

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        inner = super().create_producer(plan, role)
        return _Stalling(inner, int(self.options.get("block_after", 100)))


class _Stalling(_Wrapping):
    def __init__(self, inner: Producer, block_after: int) -> None:
        super().__init__(inner)
        self._left = block_after

    def send(self, payload: bytearray) -> None:
        if self._left == 0:
            while True:  # a broker that stopped accepting: only the runner's interrupt ends this
                time.sleep(3600)
        self._left -= 1
        self._inner.send(payload)


class CrashingDriver(ZmqDriver):
    """pyzmq, except that each producer's process aborts (SIGABRT, as a crashing client library would)
    after ``crash_after`` messages."""

    name: ClassVar[str] = "crashing"

    @classmethod
    def option_names(cls) -> frozenset[str]:
        return super().option_names() | {"crash_after"}

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        return _Crashing(super().create_producer(plan, role), int(self.options.get("crash_after", 100)))


class _Crashing(_Wrapping):
    def __init__(self, inner: Producer, crash_after: int) -> None:
        super().__init__(inner)
        self._left = crash_after

    def send(self, payload: bytearray) -> None:
        if self._left == 0:
            os.abort()
        self._left -= 1
        self._inner.send(payload)


class DelayedMqcoreDriver(ZmqDriver):
    """mqcore with ``delay_us`` of busy work added to every send: a real slowdown of mqcore's send path,
    for proving that `mqbench regress` catches one."""

    name: ClassVar[str] = "mqcore-delayed"

    @classmethod
    def module(cls) -> Any:
        from harness.drivers.mqcore_driver import MqcoreDriver

        return MqcoreDriver.module()

    @classmethod
    def option_names(cls) -> frozenset[str]:
        return super().option_names() | {"delay_us"}

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        return _Delayed(super().create_producer(plan, role), int(self.options.get("delay_us", 25)))


class _Delayed(_Wrapping):
    def __init__(self, inner: Producer, delay_us: int) -> None:
        super().__init__(inner)
        self._delay_ns = delay_us * 1000

    def send(self, payload: bytearray) -> None:
        until = time.perf_counter_ns() + self._delay_ns
        while time.perf_counter_ns() < until:  # sleep() cannot wait microseconds
            pass
        self._inner.send(payload)


class LateSubscriptionDriver(ZmqDriver):
    """pyzmq, except that each producer drops what it is handed during its first ``late_ms`` (counted from
    its creation, which is before it reports ready), the way a PUB drops what it sends before a
    subscription has reached it: a subscription that arrives late, made deterministic."""

    name: ClassVar[str] = "late-subscription"

    @classmethod
    def option_names(cls) -> frozenset[str]:
        return super().option_names() | {"late_ms"}

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        return _Late(super().create_producer(plan, role), int(self.options.get("late_ms", 1000)))


class _Late(_Wrapping):
    def __init__(self, inner: Producer, late_ms: int) -> None:
        super().__init__(inner)
        self._from = time.monotonic_ns() + late_ms * 1_000_000

    def send(self, payload: Any) -> None:
        if time.monotonic_ns() >= self._from:
            self._inner.send(payload)


class HangingCloseDriver(ZmqDriver):
    """pyzmq, except that each producer's close never returns: a client that hangs in its close after the
    case (kafka-python's producers at a hundred topics on two cores did)."""

    name: ClassVar[str] = "hanging-close"

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        return _HangingClose(super().create_producer(plan, role))


class _HangingClose(_Wrapping):
    def send(self, payload: bytearray) -> None:
        self._inner.send(payload)

    def close(self) -> None:
        self._inner.close()
        while True:  # only the runner's interrupt or kill ends this
            time.sleep(3600)


class SlowSetupDriver(ZmqDriver):
    """pyzmq, except that making a producer or consumer takes ``setup_ms`` and each worker process writes,
    to ``<record>.<pid>``, the most of its roles that were setting up their clients at the same time."""

    name: ClassVar[str] = "slow-setup"
    _lock = threading.Lock()
    _now = 0
    _most = 0

    @classmethod
    def option_names(cls) -> frozenset[str]:
        return super().option_names() | {"setup_ms", "record"}

    def _setting_up(self, make: Any) -> Any:
        cls = type(self)
        with cls._lock:
            cls._now += 1
            cls._most = max(cls._most, cls._now)
            with open(f"{self.options['record']}.{os.getpid()}", "w") as out:
                out.write(str(cls._most))
        try:
            time.sleep(int(self.options.get("setup_ms", 50)) / 1000)
            return make()
        finally:
            with cls._lock:
                cls._now -= 1

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        return self._setting_up(lambda: super(SlowSetupDriver, self).create_producer(plan, role))

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Any:
        return self._setting_up(lambda: super(SlowSetupDriver, self).create_consumer(plan, role))


class RefusingDriver(ZmqDriver):
    """pyzmq, except that a producer cannot be made: the driver refuses with a message that has brackets in it,
    as a client library's often do (RocketMQ's "BrokersSent: [broker-a, broker-a]")."""

    name: ClassVar[str] = "refusing"

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        raise DriverError("the broker refused every send (BrokersSent: [broker-a, broker-a, broker-a])")
