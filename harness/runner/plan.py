"""The plan of a run, decided once: which variant of which system runs which scenario, and why each of the
others does not. ``compare`` builds it; the runner (its cases), the rate search (its searches), the crosscheck
(its broker rows) and the Spark cluster path read it instead of deciding again.

A variant does not run a scenario when
- its system cannot run the scenario at all (``scenario_reason`` with the system's default client: a pattern
  its driver lacks, a fault the JVM worker cannot ride, a workload field the driver has no means for) —
  the run says "not run: <scenario>: <system> (<reason>)";
- the client the variant chooses cannot run here (``variant_reason``: no java) — "not run, its client cannot
  run here";
- that client cannot run this scenario although the system's default client can (a Java client under a
  kill/restart fault) — left out silently, as its system's other variants run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from harness.runner.case import CaseSpec, scenario_reason, variant_reason
from harness.scenario import Scenario, Variant


@dataclass(frozen=True)
class Planned:
    """One (scenario, system variant) of the run and whether it runs."""

    scenario: Scenario
    variant: Variant
    system_reason: str | None  # the system cannot run the scenario (through its default client)
    client_reason: str | None  # the variant's client cannot run here
    client_runs: bool  # the variant's client can run the scenario

    @property
    def runs(self) -> bool:
        return self.system_reason is None and self.client_reason is None and self.client_runs


@dataclass(frozen=True)
class RunPlan:
    """Every (scenario, variant) of the chosen systems that the scenarios name, in run order."""

    systems: tuple[str, ...]
    entries: tuple[Planned, ...]

    @classmethod
    def build(cls, scenarios: Sequence[Scenario], systems: Sequence[str]) -> RunPlan:
        entries = []
        for sc in scenarios:
            for system in systems:
                if not sc.lists(system):
                    continue
                why = scenario_reason(system, sc)
                for variant in sc.variants_for(system):
                    client = variant.options.get("client")
                    runs = scenario_reason(system, sc, None if client is None else str(client)) is None
                    entries.append(Planned(sc, variant, why, variant_reason(variant), runs))
        return cls(tuple(systems), tuple(entries))

    def variants(self, scenario: Scenario) -> list[Variant]:
        """The variants that run ``scenario``, in the systems' order."""
        return [p.variant for p in self.entries if p.scenario is scenario and p.runs]

    def systems_for(self, scenario: Scenario) -> list[str]:
        """The systems with at least one variant that runs ``scenario``."""
        return list(dict.fromkeys(v.system for v in self.variants(scenario)))

    def not_supported(self) -> list[str]:
        """``scenario: system (reason)`` for each system that cannot run a scenario it was chosen for."""
        return sorted({f"{p.scenario.name}: {p.variant.system} ({p.system_reason})"
                       for p in self.entries if p.system_reason is not None})

    def unavailable_clients(self) -> dict[str, str]:
        """``system/variant`` -> why the client that variant chooses cannot run here."""
        return {f"{p.variant.system}/{p.variant.name}": p.client_reason
                for p in self.entries if p.client_reason is not None}

    def unrunnable(self, scenario: Scenario) -> list[str]:
        """``system: reason`` for each named system that cannot run ``scenario`` (one per system)."""
        return list(dict.fromkeys(f"{p.variant.system}: {p.system_reason}" for p in self.entries
                                  if p.scenario is scenario and p.system_reason is not None))

    def named(self, scenario: Scenario) -> list[str]:
        """The chosen systems ``scenario`` names."""
        return list(dict.fromkeys(p.variant.system for p in self.entries if p.scenario is scenario))

    def _scenarios(self) -> list[Scenario]:
        """The planned scenarios in order (by identity: two scenarios may be equal)."""
        seen: dict[int, Scenario] = {}
        for p in self.entries:
            seen.setdefault(id(p.scenario), p.scenario)
        return list(seen.values())

    def cases(self) -> Iterator[CaseSpec]:
        """Every case of the scenarios that give rates, interleaved: for each size, rate and repetition, every
        variant in turn (so that a slow drift of the machine spreads over all of them alike)."""
        for sc in self._scenarios():
            runnable = self.variants(sc)
            for size in sc.message_sizes:
                for rate in sc.rates:
                    for rep in range(sc.repetitions):
                        for variant in runnable:
                            yield CaseSpec(sc, variant, size, rate, rep)

    def searches(self) -> Iterator[tuple[Scenario, Variant, int]]:
        """Every (scenario, variant, size) a ``rate: search`` scenario searches."""
        for sc in self._scenarios():
            if sc.searches:
                for size in sc.message_sizes:
                    for variant in self.variants(sc):
                        yield sc, variant, size
