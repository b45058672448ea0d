"""mqcore under another name: after ``sys.modules["zmq"] = mqcore``, ``import zmq.<sub>`` is ``mqcore.<sub>``.

pyzmq code runs on mqcore when an application puts mqcore in ``sys.modules`` under pyzmq's name. On
its own, Python's import system would then load a second copy of every submodule that code imports by
the alias (``zmq.constants``, ``zmq.asyncio``, ``zmq.auth.thread`` ...) from mqcore's files, with
classes and enums of its own, and bind the copy over mqcore's attribute (``mqcore.constants`` would
no longer be the module mqcore uses). ``AliasFinder``, first on ``sys.meta_path`` from ``import
mqcore`` on, answers for a name whose top package is mqcore by another name with mqcore's own module,
so each submodule is one module object whatever name reached it. Names mqcore has no module for are
left to the other finders, which report them missing under the name asked for.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

PACKAGE = "mqcore"


class _Existing(importlib.abc.Loader):
    """Loads an alias name as the module already imported under mqcore's own name."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.spec = module.__spec__

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        # Imported already, under its own name; the import system set the alias's spec on it, which
        # would make a reload look for the alias: the module keeps its own.
        module.__spec__ = self.spec


class AliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``ALIAS.sub`` as ``mqcore.sub`` while ``sys.modules[ALIAS]`` is mqcore."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        top, dot, rest = fullname.partition(".")
        package = sys.modules.get(PACKAGE)
        if not dot or top == PACKAGE or package is None or sys.modules.get(top) is not package:
            return None
        own = f"{PACKAGE}.{rest}"
        try:
            if importlib.util.find_spec(own) is None:
                return None
        except ModuleNotFoundError:  # a parent is no package
            return None
        return importlib.machinery.ModuleSpec(fullname, _Existing(importlib.import_module(own)))


def install() -> None:
    """Put one AliasFinder first on ``sys.meta_path`` (again a no-op)."""
    if not any(isinstance(finder, AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, AliasFinder())
