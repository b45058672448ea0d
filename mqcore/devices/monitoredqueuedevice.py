"""Monitored queue devices (pyzmq's ``zmq.devices.monitoredqueuedevice``): ``monitored_queue`` run by a
device, as plain, Thread and Process variants."""

from __future__ import annotations

from mqcore.constants import SocketType
from mqcore.devices.basedevice import ProcessDevice, ThreadDevice
from mqcore.devices.monitoredqueue import monitored_queue
from mqcore.devices.proxydevice import ProxyBase

__all__ = ["MonitoredQueueBase", "MonitoredQueue", "ThreadMonitoredQueue", "ProcessMonitoredQueue"]


class MonitoredQueueBase(ProxyBase):
    """A proxy device that runs ``monitored_queue``: the monitor's copies carry the prefix of their direction."""

    def __init__(self, in_type: int, out_type: int, mon_type: int = SocketType.PUB,
                 in_prefix: bytes = b"in", out_prefix: bytes = b"out") -> None:
        super().__init__(in_type, out_type, mon_type)
        self._prefixes = (in_prefix, out_prefix)

    def run_device(self) -> None:
        socks = self._setup_sockets()
        monitored_queue(socks["in"], socks["out"], socks["mon"], *self._prefixes)


class MonitoredQueue(MonitoredQueueBase):
    """``monitored_queue`` run by ``start()``; unlike ``proxy`` it allows ROUTER on both sides."""


class ThreadMonitoredQueue(MonitoredQueueBase, ThreadDevice):
    """A MonitoredQueue in a background thread."""


class ProcessMonitoredQueue(MonitoredQueueBase, ProcessDevice):
    """A MonitoredQueue in a child process."""
