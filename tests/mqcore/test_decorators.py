"""mqcore.decorators: @context and @socket give each call its own Context/socket and close them after."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import mqcore
from mqcore.decorators import context, socket


@pytest.fixture
def shared_instance() -> Iterator[None]:
    """For tests whose sockets default to Context.instance(): destroy it afterwards."""
    yield
    mqcore.Context.instance().destroy(linger=0)


def test_context_is_appended_and_destroyed_after_the_call() -> None:
    seen: list[mqcore.Context] = []

    @context()
    def f(a: int, ctx: mqcore.Context, b: str = "") -> str:
        assert not ctx.closed
        seen.append(ctx)
        return f"{a}{b}"

    assert f(1, b="x") == "1x"
    assert f(2) == "2"
    assert len(seen) == 2 and seen[0] is not seen[1]
    assert all(c.closed for c in seen)
    assert f.__name__ == "f" and f.__wrapped__ is not None  # type: ignore[attr-defined]


@pytest.mark.parametrize("decorator", [context("mine", 2), context(name="mine", io_threads=2),
                                       context("mine", io_threads=2)])
def test_context_by_name_with_arguments_for_context(decorator: Any) -> None:
    @decorator
    def f(mine: mqcore.Context | None = None) -> int:
        assert mine is not None
        return int(mine.IO_THREADS)

    assert f() == 2


def test_context_name_given_by_the_caller_is_a_type_error() -> None:
    @context(name="ctx")
    def f(ctx: mqcore.Context) -> None:
        raise AssertionError("not called")

    with pytest.raises(TypeError, match=r"f\(\) got multiple values for argument 'ctx'"):
        f(ctx=None)
    with pytest.raises(TypeError):
        f("positional too")  # Python's own complaint: ctx both positional and keyword


def test_context_name_the_function_lacks_is_a_type_error() -> None:
    @context(name="ctx")
    def f(other: Any = None) -> None:
        raise AssertionError("not called")

    with pytest.raises(TypeError):
        f()


def test_sockets_work_in_the_call_and_are_closed_after() -> None:
    seen: list[Any] = []
    address = f"inproc://deco-{uuid.uuid4().hex[:8]}"

    @context()
    @socket(mqcore.PUSH)
    @socket("pull", mqcore.PULL)
    def f(ctx: mqcore.Context, push: Any, pull: Any) -> bytes:
        assert push.context is ctx and pull.context is ctx
        assert (push.socket_type, pull.socket_type) == (mqcore.PUSH, mqcore.PULL)
        seen.extend([ctx, push, pull])
        pull.rcvtimeo = 5000
        pull.bind(address)
        push.connect(address)
        push.send(b"through")
        return pull.recv()  # type: ignore[no-any-return]

    assert f() == b"through"
    assert all(obj.closed for obj in seen)


def test_socket_finds_the_named_context_argument(ctx: mqcore.Context) -> None:
    seen: list[Any] = []

    @socket("s", mqcore.PAIR, context_name="c")
    def f(c: mqcore.Context, s: Any) -> None:
        seen.append(s)
        assert s.context is c

    f(c=ctx)
    assert seen[0].closed and not ctx.closed


def test_socket_finds_a_positional_context(ctx: mqcore.Context) -> None:
    @socket(mqcore.PUB)
    def f(label: str, c: mqcore.Context, pub: Any) -> None:
        assert pub.context is c

    f("x", ctx)


def test_socket_without_a_context_uses_the_instance(shared_instance: None) -> None:
    seen: list[Any] = []

    @socket(mqcore.SUB, name="sub")
    def f(sub: Any) -> None:
        seen.append(sub)
        assert sub.context is mqcore.Context.instance()
        assert sub.socket_type == mqcore.SUB

    f()
    assert seen[0].closed


def test_socket_without_a_type_is_a_type_error(ctx: mqcore.Context) -> None:
    @socket("s")
    def f(ctx: mqcore.Context, s: Any) -> None:
        raise AssertionError("not called")

    with pytest.raises(TypeError):
        f(ctx)


def test_objects_are_closed_when_the_function_raises() -> None:
    seen: list[Any] = []

    @context()
    @socket(mqcore.PUSH)
    def f(ctx: mqcore.Context, push: Any) -> None:
        seen.extend([ctx, push])
        raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        f()
    assert all(obj.closed for obj in seen)


def test_calls_in_threads_get_their_own_objects() -> None:
    both_inside = threading.Barrier(2, timeout=10)
    seen: dict[str, tuple[Any, Any]] = {}
    errors: list[BaseException] = []

    @context()
    @socket(mqcore.PUB)
    def f(key: str, ctx: mqcore.Context, pub: Any) -> None:
        seen[key] = (ctx, pub)
        both_inside.wait()  # each call holds its objects while the other runs

    def run(key: str) -> None:
        try:
            f(key)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(key,)) for key in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not errors and not any(t.is_alive() for t in threads)
    (ctx_a, pub_a), (ctx_b, pub_b) = seen["a"], seen["b"]
    assert ctx_a is not ctx_b and pub_a is not pub_b
    assert pub_a.context is ctx_a and pub_b.context is ctx_b
    assert all(obj.closed for obj in (ctx_a, pub_a, ctx_b, pub_b))


class Worker:
    @context()
    @socket(mqcore.PUSH)
    def work(self, ctx: mqcore.Context, push: Any, tag: str = "t") -> str:
        assert isinstance(self, Worker) and push.context is ctx
        return tag


def test_decorated_method_gets_self_first() -> None:
    assert Worker().work(tag="w") == "w"
