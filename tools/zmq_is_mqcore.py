"""pytest plugin: ``import zmq`` gives mqcore in this process, as a user's one line would.

Loaded with ``-p zmq_is_mqcore`` by tools/pyzmq_suite.py before pyzmq's conftest imports ``zmq``. It
does what an application does to run pyzmq code on mqcore, and nothing more: ``sys.modules["zmq"] =
mqcore``. Every ``zmq.<sub>`` the tests reach (``zmq.backend``, ``zmq.asyncio``, ``zmq.auth.thread``
...) must then come from mqcore itself; one mqcore lacks fails to import, as it would for a user.
"""

from __future__ import annotations

import sys

import mqcore


def _alias_mqcore_as_zmq() -> None:
    if "zmq" in sys.modules and sys.modules["zmq"] is not mqcore:
        raise RuntimeError("pyzmq was imported before mqcore could stand in for it")
    sys.modules["zmq"] = mqcore


_alias_mqcore_as_zmq()
