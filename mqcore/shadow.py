"""Shadows: a second Python object for a live socket or context (pyzmq's ``Socket.shadow`` and
``Context.shadow``, ``copy.copy(socket)``).

pyzmq shadows a libzmq pointer; mqcore's sockets and contexts are Python objects, so ``underlying``
is the object's ``id`` (looked up in a weak registry) and a shadow is an instance of a subclass of the
original's class whose attribute reads and writes all go to the original: both objects drive one
socket. Closing through either closes it; dropping a shadow never does.
"""

from __future__ import annotations

import weakref
from typing import Any, TypeVar

T = TypeVar("T")
S = TypeVar("S", bound="Shadowable")

_live: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_shadow_classes: dict[type, type] = {}


def register(obj: object) -> None:
    """Make ``obj`` findable by its ``underlying`` address."""
    _live[id(obj)] = obj


def resolve(address: Any, kind: type[T]) -> T:
    """The live ``kind`` object that ``address`` (an object or its ``underlying`` int) names."""
    if isinstance(address, kind):
        return getattr(address, "_shadow_obj", None) or address  # a shadow of a shadow: the original
    found = _live.get(address) if isinstance(address, int) else None
    if not isinstance(found, kind):
        raise ValueError(f"{address!r} is not the underlying address of a live mqcore {kind.__name__}")
    return found


def _forward_get(self: Any, name: str) -> Any:
    return getattr(object.__getattribute__(self, "_shadow_obj"), name)


def _forward_set(self: Any, name: str, value: Any) -> None:
    setattr(object.__getattribute__(self, "_shadow_obj"), name, value)


def _keep(self: Any) -> None:
    """A shadow going away leaves the original open."""


def make_shadow(cls: type[T], target: Any) -> T:
    """A ``cls`` instance that acts on ``target`` (see module comment); its ``__init__`` is skipped."""
    sub = _shadow_classes.get(cls)
    if sub is None:
        sub = _shadow_classes[cls] = type(cls.__name__, (cls,), {
            "__getattr__": _forward_get, "__setattr__": _forward_set, "__del__": _keep,
            "_shadow": True, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
        })
    obj: T = object.__new__(sub)
    object.__setattr__(obj, "_shadow_obj", target)
    return obj


class Shadowable:
    """What Context and Socket share: ``shadow``, ``underlying`` and copying (a copy is a shadow).
    ``_shadow_kind`` is the class an ``underlying`` address must name."""

    _shadow = False
    _shadow_obj: Any = None
    _shadow_kind: type = object

    @classmethod
    def shadow(cls: type[S], address: Any) -> S:
        """A second object of this class for ``address`` (an object or its ``underlying``).
        ValueError if ``address`` names no live object of the right kind."""
        return make_shadow(cls, resolve(address, cls._shadow_kind))

    @property
    def underlying(self) -> int:
        """An address for ``shadow`` (mqcore: the original object's id)."""
        return id(self._shadow_obj or self)

    def __copy__(self: S) -> S:
        return self.shadow(self)

    def __deepcopy__(self: S, memo: Any) -> S:
        return self.shadow(self)
