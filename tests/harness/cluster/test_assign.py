"""Roles given to barrier tasks after placement: hosts honoured, the rest spread over executors."""

from __future__ import annotations

import pytest

from harness.cluster import Role, StageError, assign


def test_roles_spread_over_executors() -> None:
    places = [("h", "e1"), ("h", "e1"), ("h", "e2"), ("h", "e2")]
    roles = [Role("producer-0"), Role("consumer-0"), Role("producer-1"), Role("consumer-1")]
    chosen = assign(roles, places)
    executor_of = {roles[r].name: places[t][1] for t, r in enumerate(chosen)}
    assert executor_of["producer-0"] != executor_of["consumer-0"]
    assert sorted(chosen) == [0, 1, 2, 3]


def test_a_role_with_a_host_runs_there() -> None:
    places = [("a", "e1"), ("b", "e2")]
    roles = [Role("producer-0", host="b"), Role("consumer-0", host="a")]
    assert assign(roles, places) == [1, 0]


def test_a_missing_host_is_one_sentence() -> None:
    with pytest.raises(StageError, match="wants host 'c'.*free tasks run on a, b"):
        assign([Role("producer-0", host="c"), Role("consumer-0")], [("a", "e1"), ("b", "e2")])
