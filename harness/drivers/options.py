"""Typed variant options for drivers (declared as `Driver.options_type`).

A driver declares its options as a frozen dataclass whose fields have defaults; ``parse_options`` builds it
from a scenario's mapping, coercing YAML-ish values (``"true"``, ``"1"``) and rejecting unknown names and
bad values with one sentence that names the system and the option.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from harness.drivers.base import DriverError

T = TypeVar("T")

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def option_names(cls: type[Any]) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def parse_options(system: str, cls: type[T], options: Mapping[str, Any]) -> T:
    """``cls(**options)`` with each value coerced to its field's type (bool, int or str)."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(options) - set(fields))
    if unknown:
        raise DriverError(
            f"{system} has no option {unknown[0]!r}; its options are {', '.join(sorted(fields))}"
        )
    values: dict[str, Any] = {}
    for name, value in options.items():
        default = fields[name].default
        try:
            values[name] = _coerce(value, default)
        except (TypeError, ValueError):
            kind = type(default).__name__
            raise DriverError(f"{system} option {name!r} must be a {kind}, not {value!r}") from None
    return cls(**values)


def _coerce(value: Any, default: Any) -> Any:
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueError(value)
    if isinstance(default, int):
        if isinstance(value, bool):
            raise TypeError(value)
        return int(str(value).strip())
    return str(value)
