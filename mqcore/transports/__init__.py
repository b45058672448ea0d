"""Transports: tcp and ipc share the stream listener/engine; inproc joins two sockets' pipes directly."""
