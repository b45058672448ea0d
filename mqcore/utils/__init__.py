"""Small helpers with pyzmq's names (``zmq.utils``): ``z85``, ``monitor``, ``strtypes``, ``jsonapi`` (jsonapi
imported with the package, as pyzmq's ``import zmq`` does)."""

from mqcore.utils import jsonapi

__all__ = ["jsonapi"]
