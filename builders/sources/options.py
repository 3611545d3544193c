"""Typed reader options: each reader declares a frozen dataclass of what it accepts.

    @dataclass(frozen=True)
    class Options(ReaderOptions):
        scheme: Literal["auto", "bio", "bioes", "io"] = option("auto", "tag scheme ...")

`Options.parse` turns the fixed and the user's `-o key=value` options into an instance: an
unknown key, a value of the wrong type or one `__post_init__` refuses (`ValueError`) is a
`BuildersError` naming the key and the valid keys or values.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, ClassVar, Literal, Union, get_args, get_origin, get_type_hints

from builders.errors import InvalidValue


def option(default: Any, help: str) -> Any:
    """A dataclass field with a default and the help line `sources` and `--help` print."""
    return field(default=default, metadata={"help": help})


class _BadValue(Exception):
    def __init__(self, expected: str):
        self.expected = expected


@dataclass(frozen=True)
class ReaderOptions:
    """Base class of the readers' option dataclasses (no options of its own)."""

    #: Options renamed or gone: key -> a hint, or a function making it (when it names a
    #: setting, rendered where the error is raised: see `builders.errors.opt`).
    renamed: ClassVar[Mapping[str, str | Callable[[], str]]] = {}

    @classmethod
    def parse(cls, given: Mapping[str, object], reader: str) -> Any:
        """Validate and convert `given` (fixed and user options, user last)."""
        hints = get_type_hints(cls)
        names = [f.name for f in fields(cls)]
        values: dict[str, Any] = {}
        for key, value in given.items():
            if key not in names:
                raise InvalidValue(_unknown(key, reader, names, cls.renamed))
            try:
                values[key] = _coerce(value, hints[key])
            except _BadValue as bad:
                raise InvalidValue(
                    f"option {key}={value!r} of the {reader} reader: expected {bad.expected}"
                ) from None
        try:
            return cls(**values)
        except ValueError as exc:
            raise InvalidValue(f"option of the {reader} reader: {exc}") from None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def describe(cls) -> list[dict[str, Any]]:
        """[{name, type, default, help}] of every option, in declaration order."""
        hints = get_type_hints(cls)
        return [
            {
                "name": f.name,
                "type": _type_name(hints[f.name]),
                "default": None if f.default is MISSING else f.default,
                "help": f.metadata.get("help", ""),
            }
            for f in fields(cls)
        ]


def _unknown(
    key: str, reader: str, names: list[str], renamed: Mapping[str, str | Callable[[], str]]
) -> str:
    if not names:
        return f"the {reader} reader takes no options (got {key!r})"
    given = renamed.get(key)
    hint = given() if callable(given) else given
    if hint is None:
        close = difflib.get_close_matches(key, names, n=1)
        hint = f"did you mean {close[0]!r}?" if close else ""
    return (
        f"unknown option {key!r} for the {reader} reader"
        + (f" ({hint})" if hint else "")
        + f"; valid options: {', '.join(names)}"
    )


_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


def _coerce(value: object, hint: Any) -> Any:
    """`value` as type `hint` (bool, int, str, Literal[...], X | None), or _BadValue."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        expected = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg)
            except _BadValue as bad:
                expected.append(bad.expected)
        raise _BadValue(" or ".join(expected))
    if origin is Literal:
        if isinstance(value, str) and value.lower() in args:
            return value.lower()
        if value in args:
            return value
        raise _BadValue("one of " + ", ".join(map(str, args)))
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise _BadValue("true or false")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            return int(value)
        raise _BadValue("an integer")
    if hint is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # `-o config=2019` arrives as the number 2019
        raise _BadValue("a string")
    raise TypeError(f"option type {hint!r} is not supported")  # a programming error


def _type_name(hint: Any) -> str:
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args if a is not type(None))
    if origin is Literal:
        return "|".join(map(str, args))
    return {bool: "bool", int: "int", str: "text"}.get(hint, str(hint))
