"""Which cases the run stage runs: a variant whose client cannot run here is left out, with its reason."""

from __future__ import annotations

import pytest

from harness.runner import case as run
from harness.scenario import parse_scenario


def _scenario() -> object:
    return parse_scenario({
        "name": "clients", "pattern": "queue", "systems": ["rabbitmq"], "message_sizes": [100], "messages": 10,
        "variants": {"rabbitmq": [{"name": "pika"}, {"name": "java", "client": "java"}]},
    })


def test_a_variant_whose_client_cannot_run_is_left_out_and_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.drivers.java as java

    monkeypatch.setattr(java, "unavailable_reason", lambda: "no java here: install a Java 17")
    run._client_reason.cache_clear()
    try:
        sc = _scenario()
        names = [variant.name for _, variant, *_ in run.cases([sc], ["rabbitmq"])]  # type: ignore[list-item]
        assert names == ["pika"]
        java_variant = sc.variants_for("rabbitmq")[1]  # type: ignore[attr-defined]
        assert run.variant_reason(java_variant) == "no java here: install a Java 17"
    finally:
        run._client_reason.cache_clear()


def test_an_unknown_client_is_a_reason_not_a_crash() -> None:
    from harness.scenario import Variant

    reason = run.variant_reason(Variant("rabbitmq", "x", {"client": "nosuch"}))
    assert reason is not None and "no client 'nosuch'" in reason
