"""pytest plugin: ``import zmq`` (and every ``zmq.<sub>``) resolves to mqcore in this process.

Loaded with ``-p zmq_is_mqcore`` by tools/pyzmq_suite.py before pyzmq's conftest imports ``zmq``.
Each ``mqcore.<sub>`` module is registered under ``zmq.<sub>`` in ``sys.modules``, so the tests get
mqcore's own module objects; a ``zmq`` submodule mqcore lacks fails to import, as it would for a
user (no stand-ins are made here).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import mqcore


def _alias_mqcore_as_zmq() -> None:
    if "zmq" in sys.modules and sys.modules["zmq"] is not mqcore:
        raise RuntimeError("pyzmq was imported before mqcore could stand in for it")
    sys.modules["zmq"] = mqcore
    for info in pkgutil.walk_packages(mqcore.__path__, "mqcore."):
        module = importlib.import_module(info.name)
        sys.modules["zmq" + info.name[len("mqcore"):]] = module


_alias_mqcore_as_zmq()
