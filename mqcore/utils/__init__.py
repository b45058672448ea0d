"""Small helpers with pyzmq's names (``zmq.utils``): ``z85``, ``monitor``, ``jsonapi``."""
