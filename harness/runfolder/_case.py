"""A case's identity, one type for every stage: ``CaseKey`` (scenario, system, variant, size, rate, repetition),
its raw file's name, its columns in the tables and its entry in the manifest.

One spelling of an unpaced rate ("as fast as it goes"), defined in :mod:`harness.units`: ``None`` in code,
``MAX_RATE`` ("max") in a scenario, a file name or a table's text, and NaN in a table's float ``rate`` column
(the only way a float column holds it); ``as_rate`` reads any of those back to ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.units import MAX_RATE, as_rate, rate_column, rate_text


@dataclass(frozen=True)
class CaseKey:
    """One case and repetition of a run."""

    scenario: str
    system: str
    variant: str
    size: int
    rate: float | None
    repetition: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", int(self.size))
        object.__setattr__(self, "rate", as_rate(self.rate))
        object.__setattr__(self, "repetition", int(self.repetition))

    @classmethod
    def of(cls, record: Mapping[Any, Any] | Any) -> CaseKey:
        """The key of a table row (a mapping or a pandas row) or a manifest entry (any spelling of an unpaced
        rate)."""
        return cls(str(record["scenario"]), str(record["system"]), str(record["variant"]), record["size"],
                   record.get("rate"), record["repetition"])

    @property
    def stem(self) -> str:
        """The case's name in the run folder (the raw file without ``.parquet``, the tables' ``case``)."""
        return (f"{self.scenario}__{self.system}__{self.variant}__{self.size}B__rate-{rate_text(self.rate)}"
                f"__rep{self.repetition}")

    @property
    def raw_name(self) -> str:
        return f"{self.stem}.parquet"

    def columns(self) -> dict[str, Any]:
        """The key as table columns (the rate as ``rate_column``)."""
        return {"scenario": self.scenario, "system": self.system, "variant": self.variant, "size": self.size,
                "rate": rate_column(self.rate), "repetition": self.repetition}

    def manifest_entry(self) -> dict[str, Any]:
        """The key as the manifest's ``cases`` entries write it (JSON: ``null`` for an unpaced rate)."""
        return {**self.columns(), "rate": self.rate}

    def describe(self, size_text: str | None = None) -> str:
        """``scenario system/variant 100 B @ max rep 1`` (repetitions counted from 1, as people do)."""
        rate = MAX_RATE if self.rate is None else f"{self.rate:g}/s"
        return (f"{self.scenario} {self.system}/{self.variant} {size_text or f'{self.size} B'} @ {rate} "
                f"rep {self.repetition + 1}")
