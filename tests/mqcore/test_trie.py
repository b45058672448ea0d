"""Subscription tries: reference counts (SUB side) and prefix matching (PUB side)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mqcore.trie import PipeTrie, Trie


def test_trie_reference_counts() -> None:
    t = Trie()
    assert t.add(b"ab")
    assert not t.add(b"ab")
    assert not t.remove(b"ab")  # one reference left
    assert t.check(b"abc")
    assert t.remove(b"ab")
    assert not t.check(b"abc")
    assert not t.remove(b"ab")
    assert len(t) == 0


def test_trie_empty_prefix_matches_everything() -> None:
    t = Trie()
    t.add(b"")
    assert t.check(b"") and t.check(b"anything")
    assert list(t) == [b""]


def test_trie_iterates_distinct_prefixes() -> None:
    t = Trie()
    for p in (b"a", b"ab", b"b", b"a"):
        t.add(p)
    assert sorted(t) == [b"a", b"ab", b"b"]


def test_pipe_trie_matches_prefixes_once() -> None:
    pt: PipeTrie[str] = PipeTrie()
    pt.add(b"", "all")
    pt.add(b"ne", "n")
    pt.add(b"news", "n")
    pt.add(b"weather", "w")
    assert sorted(pt.match(b"news today")) == ["all", "n"]
    assert sorted(pt.match(b"weath")) == ["all"]
    pt.remove_item("all")
    assert pt.match(b"sports") == []
    assert not pt.remove(b"x", "n")
    assert pt.remove(b"ne", "n")
    assert pt.match(b"news") == ["n"]


@given(st.lists(st.tuples(st.binary(max_size=3), st.booleans()), max_size=30), st.binary(max_size=5))
def test_trie_agrees_with_a_counter(ops: list[tuple[bytes, bool]], data: bytes) -> None:
    t = Trie()
    counts: dict[bytes, int] = {}
    for prefix, add in ops:
        if add:
            assert t.add(prefix) == (counts.get(prefix, 0) == 0)
            counts[prefix] = counts.get(prefix, 0) + 1
        else:
            was = counts.get(prefix, 0)
            assert t.remove(prefix) == (was == 1)
            if was:
                counts[prefix] = was - 1
    live = {p for p, c in counts.items() if c}
    assert t.check(data) == any(data.startswith(p) for p in live)
    assert set(t) == live


@given(st.lists(st.tuples(st.binary(max_size=3), st.integers(0, 3), st.booleans()), max_size=30),
       st.binary(max_size=5))
def test_pipe_trie_agrees_with_sets(ops: list[tuple[bytes, int, bool]], data: bytes) -> None:
    pt: PipeTrie[int] = PipeTrie()
    subs: set[tuple[bytes, int]] = set()
    for prefix, item, add in ops:
        if add:
            assert pt.add(prefix, item) == ((prefix, item) not in subs)
            subs.add((prefix, item))
        else:
            assert pt.remove(prefix, item) == ((prefix, item) in subs)
            subs.discard((prefix, item))
    assert sorted(pt.match(data)) == sorted({i for p, i in subs if data.startswith(p)})
