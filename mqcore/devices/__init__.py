"""Devices: proxies that create and run their own sockets in the background (pyzmq's ``zmq.devices``)."""

from __future__ import annotations

from mqcore.devices.base import FORWARDER, QUEUE, STREAMER, Device, ProcessDevice, ThreadDevice, device
from mqcore.devices.proxy import (
    MonitoredQueue,
    ProcessMonitoredQueue,
    ProcessProxy,
    ProcessProxySteerable,
    Proxy,
    ProxySteerable,
    ThreadMonitoredQueue,
    ThreadProxy,
    ThreadProxySteerable,
    monitored_queue,
)

__all__ = [
    "Device", "ThreadDevice", "ProcessDevice", "device", "QUEUE", "FORWARDER", "STREAMER",
    "Proxy", "ThreadProxy", "ProcessProxy",
    "ProxySteerable", "ThreadProxySteerable", "ProcessProxySteerable",
    "MonitoredQueue", "ThreadMonitoredQueue", "ProcessMonitoredQueue", "monitored_queue",
]
