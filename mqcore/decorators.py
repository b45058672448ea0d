"""Decorators that give a function its own Context or Socket for the length of a call (pyzmq's
``zmq.decorators``).

``@context()`` makes a new Context for each call and destroys it on return; ``@socket(zmq.PUSH)`` makes a
socket for each call, in a Context found among the call's arguments (else ``Context.instance()``), and
closes it on return. Stacked, each call gets objects of its own, so a decorated function may run in
several threads at once::

    @context()
    @socket(zmq.PUSH)
    def work(ctx, push): ...

The object is passed as the keyword argument named by the decorator's first positional string or its
``name=`` keyword; with no name, it is appended to the positional arguments. Other decorator arguments go
to ``Context(...)`` or ``ctx.socket(...)``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from mqcore.context import Context

__all__ = ["context", "socket"]

R = TypeVar("R")
Decorator = Callable[[Callable[..., R]], Callable[..., R]]
# Makes the object for one call, given that call's positional and keyword arguments.
Factory = Callable[[tuple[Any, ...], dict[str, Any]], AbstractContextManager[Any]]


def context(*args: Any, **kwargs: Any) -> Decorator[Any]:
    """Decorator: each call of the function gets a new Context, destroyed when the call returns.

    ``@context("ctx")`` or ``@context(name="ctx")`` passes it as keyword ``ctx``; other arguments go to
    ``Context(...)`` (e.g. ``io_threads=2``). A call that already passes that keyword raises TypeError.
    """
    name, ctx_args, ctx_kwargs = _take_name(args, kwargs)
    return _providing(name, lambda call_args, call_kwargs: Context(*ctx_args, **ctx_kwargs))


def socket(*args: Any, **kwargs: Any) -> Decorator[Any]:
    """Decorator: each call of the function gets a new socket, closed when the call returns.

    ``@socket(zmq.PUB)``, ``@socket("pub", zmq.PUB)`` or ``@socket(zmq.PUB, name="pub")``; other arguments
    go to ``ctx.socket(...)``, so a missing socket type raises TypeError at call time. The socket's
    Context is the call's keyword argument named ``context_name`` (default ``"context"``) if that is a
    Context, else its first positional Context, else ``Context.instance()``.
    """
    name, sock_args, sock_kwargs = _take_name(args, kwargs)
    context_name = sock_kwargs.pop("context_name", "context")

    def make(call_args: tuple[Any, ...], call_kwargs: dict[str, Any]) -> AbstractContextManager[Any]:
        return _find_context(context_name, call_args, call_kwargs).socket(*sock_args, **sock_kwargs)

    return _providing(name, make)


def _take_name(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str | None, tuple[Any, ...], dict[str, Any]]:
    """Split the decorator's arguments into the argument name and what is left for the factory."""
    rest = dict(kwargs)
    if isinstance(rest.get("name"), str):
        return rest.pop("name"), args, rest
    if args and isinstance(args[0], str):
        return args[0], args[1:], rest
    return None, args, rest


def _find_context(context_name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Context:
    named = kwargs.get(context_name)
    if isinstance(named, Context):
        return named
    for arg in args:
        if isinstance(arg, Context):
            return arg
    return Context.instance()


def _providing(name: str | None, make: Factory) -> Decorator[Any]:
    """A decorator calling the function with the object ``make`` gives, as keyword ``name`` or last
    positional argument, inside that object's ``with`` block."""

    def decorate(func: Callable[..., R]) -> Callable[..., R]:
        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> R:
            if name and name in kwargs:
                raise TypeError(f"{func.__name__}() got multiple values for argument '{name}'")
            with make(args, kwargs) as provided:
                if not name:  # None, or '' as pyzmq treats it
                    return func(*args, provided, **kwargs)
                return func(*args, **kwargs, **{name: provided})

        return call

    return decorate
