"""Devices: proxies that create and run their own sockets in the background (pyzmq's ``zmq.devices``),
in pyzmq's submodules: ``basedevice``, ``proxydevice``, ``proxysteerabledevice``, ``monitoredqueue`` and
``monitoredqueuedevice``."""

from __future__ import annotations

from mqcore.devices import basedevice, monitoredqueue, monitoredqueuedevice, proxydevice, proxysteerabledevice
from mqcore.devices.basedevice import FORWARDER, QUEUE, STREAMER, Device, ProcessDevice, ThreadDevice, device
from mqcore.devices.monitoredqueue import monitored_queue
from mqcore.devices.monitoredqueuedevice import MonitoredQueue, ProcessMonitoredQueue, ThreadMonitoredQueue
from mqcore.devices.proxydevice import ProcessProxy, Proxy, ThreadProxy
from mqcore.devices.proxysteerabledevice import ProcessProxySteerable, ProxySteerable, ThreadProxySteerable

__all__ = [
    "Device", "ThreadDevice", "ProcessDevice", "device", "QUEUE", "FORWARDER", "STREAMER",
    "Proxy", "ThreadProxy", "ProcessProxy",
    "ProxySteerable", "ThreadProxySteerable", "ProcessProxySteerable",
    "MonitoredQueue", "ThreadMonitoredQueue", "ProcessMonitoredQueue", "monitored_queue",
    "basedevice", "proxydevice", "proxysteerabledevice", "monitoredqueue", "monitoredqueuedevice",
]
