"""Which cases the run stage runs: a variant whose client cannot run here is left out, with its reason."""

from __future__ import annotations

import pytest

from harness.runner import case as run
from harness.runner.plan import RunPlan
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
        plan = RunPlan.build([sc], ["rabbitmq"])  # type: ignore[list-item]
        assert [spec.variant.name for spec in plan.cases()] == ["pika"]
        assert plan.unavailable_clients() == {"rabbitmq/java": "no java here: install a Java 17"}
        java_variant = sc.variants_for("rabbitmq")[1]  # type: ignore[attr-defined]
        assert run.variant_reason(java_variant) == "no java here: install a Java 17"
    finally:
        run._client_reason.cache_clear()


def test_an_unknown_client_is_a_reason_not_a_crash() -> None:
    from harness.scenario import Variant

    reason = run.variant_reason(Variant("rabbitmq", "x", {"client": "nosuch"}))
    assert reason is not None and "no client 'nosuch'" in reason


def test_a_jvm_client_is_left_out_of_kill_faults_and_slow_consumers_but_runs_network_faults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The JVM worker cannot restart a killed worker or pace a slow consumer: those cases are not run (and
    named), where they used to fail one by one; a scenario with only network faults runs."""
    import harness.drivers.java as java

    monkeypatch.setattr(java, "unavailable_reason", lambda: None)  # no JVM needed to plan
    run._client_reason.cache_clear()
    base = {"pattern": "queue", "systems": ["jeromq", "rabbitmq"], "message_sizes": [100], "messages": 10,
            "variants": {"rabbitmq": [{"name": "pika"}, {"name": "java", "client": "java"}]}}
    crash = parse_scenario({**base, "name": "crash", "faults": [{"at": 1, "action": "restart-consumer"}]})
    slow = parse_scenario({**base, "name": "slow", "consumer_rate": 100})
    try:
        for sc in (crash, slow):
            plan = RunPlan.build([sc], ["jeromq", "rabbitmq"])
            assert [(s.variant.system, s.variant.name) for s in plan.cases()] == [("rabbitmq", "pika")]
            assert plan.not_supported() == [f"{sc.name}: jeromq ({java.JVM_LIMITS})"]
            assert plan.systems_for(sc) == ["rabbitmq"]
            assert run.scenario_reason("jeromq", sc) == java.JVM_LIMITS
            assert run.scenario_reason("rabbitmq", sc, "java") == java.JVM_LIMITS
            assert run.scenario_reason("rabbitmq", sc) is None
        delay = parse_scenario({**base, "name": "delay", "hosts": {"broker": "b", "producers": "p", "consumers": "c"},
                                "faults": [{"at": "1s", "action": "delay", "host": "consumers", "delay": "20ms",
                                            "duration": "1s"}]})
        assert run.scenario_reason("jeromq", delay) is None
    finally:
        run._client_reason.cache_clear()


def test_the_plan_decides_once_which_variant_runs_which_scenario() -> None:
    """Scenarios that name different systems, interleaved cases, searches, and one key per case."""
    both = parse_scenario({"name": "both", "pattern": "queue", "message_sizes": [10, 100], "messages": 10,
                           "rate": [100, "max"], "repetitions": 2})
    only_zmq = parse_scenario({"name": "only", "pattern": "queue", "systems": ["zmq"], "message_sizes": [10],
                               "messages": 10})
    search = parse_scenario({"name": "knee", "pattern": "queue", "systems": ["mqcore"], "message_sizes": [10],
                             "duration": "1s", "rate": "search", "p99_bound": "5ms"})
    plan = RunPlan.build([both, only_zmq, search], ["mqcore", "zmq"])
    assert plan.named(only_zmq) == ["zmq"] and plan.systems_for(both) == ["mqcore", "zmq"]
    specs = list(plan.cases())
    assert len(specs) == 2 * 2 * 2 * 2 + 1  # sizes x rates x repetitions x systems, then the zmq-only case
    first = specs[:2]
    assert [s.variant.system for s in first] == ["mqcore", "zmq"] and {s.size for s in first} == {10}
    keys = [s.key for s in specs]
    assert len(set(keys)) == len(keys)  # one key per case
    assert {k.raw_name for k in keys if k.rate is None and k.scenario == "both"} == {
        f"both__{system}__default__{size}B__rate-max__rep{rep}.parquet"
        for system in ("mqcore", "zmq") for size in (10, 100) for rep in (0, 1)}
    assert [(sc.name, v.system, size) for sc, v, size in plan.searches()] == [("knee", "mqcore", 10)]
