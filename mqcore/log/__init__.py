"""Logging over mqcore sockets (pyzmq's ``zmq.log``): the handlers live in ``mqcore.log.handlers``.

As in pyzmq, importing this package does not import ``handlers``.
"""
