"""Prefix tries for subscriptions.

``Trie`` (subscriber side): reference-counted prefixes; ``add`` returns True only for the first
reference and ``remove`` only when the last goes, so SUB sends SUBSCRIBE/CANCEL upstream once per topic
and subscribing twice then unsubscribing once keeps the topic. ``check(data)`` is True if any
subscribed prefix starts ``data``.

``PipeTrie`` (publisher side): for each prefix the set of pipes subscribed to it; ``match(data)``
collects every pipe subscribed to some prefix of ``data``. Used only by the publishing socket's thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class _Node:
    __slots__ = ("count", "children")

    def __init__(self) -> None:
        self.count = 0
        self.children: dict[int, _Node] = {}


class Trie:
    """Prefix set with reference counts."""

    def __init__(self) -> None:
        self._root = _Node()
        self._size = 0  # distinct prefixes

    def add(self, prefix: bytes) -> bool:
        """Count one more reference; True if ``prefix`` was not subscribed before."""
        node = self._root
        for byte in prefix:
            nxt = node.children.get(byte)
            if nxt is None:
                nxt = node.children[byte] = _Node()
            node = nxt
        node.count += 1
        if node.count == 1:
            self._size += 1
            return True
        return False

    def remove(self, prefix: bytes) -> bool:
        """Drop one reference; True if that was the last one (unknown prefixes return False)."""
        path: list[tuple[_Node, int]] = []
        node = self._root
        for byte in prefix:
            nxt = node.children.get(byte)
            if nxt is None:
                return False
            path.append((node, byte))
            node = nxt
        if node.count == 0:
            return False
        node.count -= 1
        if node.count:
            return False
        self._size -= 1
        for parent, byte in reversed(path):  # prune empty branches
            child = parent.children[byte]
            if child.count or child.children:
                break
            del parent.children[byte]
        return True

    def check(self, data: bytes) -> bool:
        """True if some subscribed prefix is a prefix of ``data``."""
        node = self._root
        if node.count:
            return True
        for byte in data:
            node = node.children.get(byte)  # type: ignore[assignment]
            if node is None:
                return False
            if node.count:
                return True
        return False

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[bytes]:
        """Every subscribed prefix (once each, regardless of its count)."""
        stack: list[tuple[_Node, bytes]] = [(self._root, b"")]
        while stack:
            node, prefix = stack.pop()
            if node.count:
                yield prefix
            for byte, child in node.children.items():
                stack.append((child, prefix + bytes((byte,))))


class _PNode(Generic[T]):
    __slots__ = ("items", "children")

    def __init__(self) -> None:
        self.items: set[T] = set()
        self.children: dict[int, _PNode[T]] = {}


class PipeTrie(Generic[T]):
    """Prefix -> set of subscribers (pipes)."""

    def __init__(self) -> None:
        self._root: _PNode[T] = _PNode()

    def add(self, prefix: bytes, item: T) -> bool:
        """Subscribe ``item`` to ``prefix``; True if it was not subscribed to it already."""
        node = self._root
        for byte in prefix:
            nxt = node.children.get(byte)
            if nxt is None:
                nxt = node.children[byte] = _PNode()
            node = nxt
        if item in node.items:
            return False
        node.items.add(item)
        return True

    def remove(self, prefix: bytes, item: T) -> bool:
        """Unsubscribe ``item`` from ``prefix``; True if it was subscribed."""
        path: list[tuple[_PNode[T], int]] = []
        node = self._root
        for byte in prefix:
            nxt = node.children.get(byte)
            if nxt is None:
                return False
            path.append((node, byte))
            node = nxt
        if item not in node.items:
            return False
        node.items.discard(item)
        for parent, byte in reversed(path):
            child = parent.children[byte]
            if child.items or child.children:
                break
            del parent.children[byte]
        return True

    def remove_item(self, item: T) -> None:
        """Forget every subscription of ``item`` (its pipe went away)."""
        def walk(node: _PNode[T]) -> bool:
            node.items.discard(item)
            for byte in list(node.children):
                if walk(node.children[byte]):
                    del node.children[byte]
            return not node.items and not node.children
        walk(self._root)

    def match(self, data: bytes) -> list[T]:
        """Every item subscribed to a prefix of ``data`` (each once)."""
        node = self._root
        if not node.children:
            return list(node.items)
        found: set[T] = set(node.items)
        for byte in data:
            nxt = node.children.get(byte)
            if nxt is None:
                break
            node = nxt
            if node.items:
                found.update(node.items)
            if not node.children:
                break
        return list(found)
