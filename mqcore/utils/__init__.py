"""Small helpers with pyzmq's names (``zmq.utils``): ``mqcore.utils.z85``, ``mqcore.utils.monitor``."""
