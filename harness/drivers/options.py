"""Declared variant options of drivers (``Driver.options_type``).

A driver declares its options as a frozen dataclass whose fields have defaults and typed annotations
(bool, int, str, or one of them ``| None``); :func:`option` adds what a field accepts (a minimum, a set of
choices). ``parse_options`` builds the dataclass from a scenario's mapping: it coerces YAML-ish values
(``"true"``, ``"3"``) to the declared type unless the field is ``exact``, checks the declared limits, and
rejects unknown names and bad values with one sentence that names the system and the option.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from harness.drivers.base import DriverError

T = TypeVar("T")

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def option(
    default: Any,
    *,
    minimum: int | None = None,
    choices: Collection[Any] | None = None,
    exact: bool = False,
    note: str = "",
) -> Any:
    """A dataclass field for an option: ``default``, the least value (ints), the allowed values, whether
    the value must arrive with the declared type already (``exact``: no coercion of strings), and a
    ``note`` that the error for a value outside ``choices`` adds in parentheses."""
    meta = {"minimum": minimum, "choices": tuple(choices) if choices else None, "exact": exact, "note": note}
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class NoOptions:
    """The options of a driver that has none: any option given is refused."""


def option_names(cls: type[Any]) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def parse_options(
    system: str, cls: type[T], options: Mapping[str, Any], allowed: Iterable[str] | None = None
) -> T:
    """``cls(**options)`` with each value coerced to its field's declared type and checked against its
    limits. ``allowed`` (default: the fields) are the names accepted at all; accepted names that are not
    fields (a subclass's extra options) are left to whoever declared them. Raises DriverError."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    known = set(fields) if allowed is None else set(allowed) | set(fields)
    unknown = sorted(set(options) - known)
    if unknown and not known:
        raise DriverError(f"{system} has no options; got {', '.join(unknown)}")
    if unknown:
        raise DriverError(f"{system} has no option {unknown[0]!r}; its options are {', '.join(sorted(known))}")
    hints = typing.get_type_hints(cls)
    values = {
        name: _checked(system, fields[name], hints[name], value)
        for name, value in options.items()
        if name in fields
    }
    return cls(**values)


def _checked(system: str, f: dataclasses.Field[Any], hint: Any, value: Any) -> Any:
    kind, optional = _kind(hint)
    what = f"{system} option {f.name!r}"
    if value is None and optional:
        return None
    try:
        value = _exact(value, kind) if f.metadata.get("exact") else _coerce(value, kind)
    except (TypeError, ValueError):
        raise DriverError(f"{what} must be a {kind.__name__}, not {value!r}") from None
    minimum, choices = f.metadata.get("minimum"), f.metadata.get("choices")
    if minimum is not None and value < minimum:
        raise DriverError(f"{what} must be at least {minimum}, not {value!r}")
    if choices is not None and value not in choices:
        note = f" ({f.metadata['note']})" if f.metadata.get("note") else ""
        allowed = ", ".join(str(c) for c in choices)
        raise DriverError(f"{what} must be one of {allowed}{note}, not {value!r}")
    return value


def _kind(hint: Any) -> tuple[type, bool]:
    """(bool | int | str, whether None is allowed) of a field's annotation."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], True
    return hint, False


def _exact(value: Any, kind: type) -> Any:
    # bool is an int to isinstance; an int option takes no true/false.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(value)
    return value


def _coerce(value: Any, kind: type) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueError(value)
    if kind is int:
        if isinstance(value, bool):
            raise TypeError(value)
        return int(str(value).strip())
    return str(value)
