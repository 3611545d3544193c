"""`json.dumps(obj, indent=..., sort_keys=...)`'s exact text, several times faster.

With `indent`, the standard library encodes through its pure-Python generators (its C encoder
serves compact output only), and a NuNER-sized build.json (78k `{label, mentions}` records a
level) spent 2 s of a build there. This encoder follows the same rules (key order and key
conversion, `ensure_ascii` escapes, `float.__repr__`, `NaN`/`Infinity`, `default` for other
objects, `[]` and `{}` for empty containers) but appends to one list instead of chaining
generators, and writes a run of records with the same keys through one format string.
tests/test_jsontext.py holds it to `json.dumps`'s text on real-shaped data.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

#: `json`'s string encoder (its C version where built): `"..."` with non-ASCII escaped.
_encode_str: Callable[[str], str] = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]
_CONSTANTS = {True: "true", False: "false", None: "null"}
#: The exact types a record of the fast path may hold (subclasses go the general way).
_SCALARS = {str, int, float, bool, type(None)}
Default = Callable[[Any], Any]


def dumps_indented(
    obj: Any, indent: int = 2, sort_keys: bool = False, default: Default | None = None
) -> str:
    """The text `json.dumps(obj, indent=indent, sort_keys=sort_keys, default=default)` gives
    (no `\\n` at the end), for the JSON types, tuples, and what `default` turns into them.

    Raises:
        TypeError: an object neither JSON nor turned into JSON by `default` (as json does).
        ValueError: a container that holds itself (json says "Circular reference detected").
    """
    enc = _Encoder(" " * indent, sort_keys, default)
    enc.value(obj, 0)
    return "".join(enc.out)


def _float(x: float) -> str:
    """json's float text: `repr`, with JavaScript's names for the non-finite ones."""
    if x != x:
        return "NaN"
    if x in (float("inf"), -float("inf")):
        return "Infinity" if x > 0 else "-Infinity"
    return float.__repr__(x)


def _scalar(o: Any) -> str | None:
    """A scalar's JSON text, in json's order of tests (str, constants, int, float); None for
    a container or another object."""
    if isinstance(o, str):
        return _encode_str(o)
    if o is None or o is True or o is False:
        return _CONSTANTS[o]
    if isinstance(o, int):
        return int.__repr__(o)
    if isinstance(o, float):
        return _float(o)
    return None


def _key(k: Any) -> str:
    """A dict key as json writes it (str kept; float, constants and int as their text)."""
    if isinstance(k, str):
        return k
    if isinstance(k, float):
        return _float(k)
    if k is True or k is False or k is None:
        return _CONSTANTS[k]
    if isinstance(k, int):
        return int.__repr__(k)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")


class _Encoder:
    """One document's text, as a list of pieces (`out`), with json's layout for `indent`."""

    def __init__(self, indent: str, sort_keys: bool, default: Default | None) -> None:
        self.indent = indent
        self.sort_keys = sort_keys
        self.default = default
        self.out: list[str] = []
        self.open: set[int] = set()  # ids of the containers being written (cycle check)

    def value(self, o: Any, level: int) -> None:
        """Append `o`'s text at nesting depth `level` (json's `_iterencode`)."""
        text = _scalar(o)
        if text is not None:
            self.out.append(text)
        elif isinstance(o, (list, tuple)):
            self.container(o, level, self.items)
        elif isinstance(o, dict):
            self.container(o, level, self.members)
        elif self.default is None:
            raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")
        else:
            self.container(o, level, lambda obj, lvl: self.value(self.default(obj), lvl))  # type: ignore[misc]

    def container(self, o: Any, level: int, write: Callable[[Any, int], None]) -> None:
        """Write `o` with `write`, refusing a container that is already open (a cycle)."""
        if id(o) in self.open:
            raise ValueError("Circular reference detected")
        self.open.add(id(o))
        write(o, level)
        self.open.discard(id(o))

    def items(self, o: list[Any] | tuple[Any, ...], level: int) -> None:
        """A list: `[`, one item a line one level in, `]` (json's `_iterencode_list`)."""
        if not o:
            self.out.append("[]")
            return
        inner = "\n" + self.indent * (level + 1)
        self.out.append("[" + inner)
        run = _record_run(o, self.sort_keys, self.indent, level + 1)
        if run is not None:
            self.out.append(run)
        else:
            for i, item in enumerate(o):
                if i:
                    self.out.append("," + inner)
                self.value(item, level + 1)
        self.out.append("\n" + self.indent * level + "]")

    def members(self, o: dict[Any, Any], level: int) -> None:
        """A dict: `{`, one `"key": value` a line one level in, `}` (json's `_iterencode_dict`)."""
        if not o:
            self.out.append("{}")
            return
        inner = "\n" + self.indent * (level + 1)
        self.out.append("{" + inner)
        pairs = sorted(o.items()) if self.sort_keys else o.items()
        for i, (k, v) in enumerate(pairs):
            self.out.append(("," + inner if i else "") + _encode_str(_key(k)) + ": ")
            self.value(v, level + 1)
        self.out.append("\n" + self.indent * level + "}")


def _record_run(
    o: list[Any] | tuple[Any, ...], sort_keys: bool, indent: str, level: int
) -> str | None:
    """The items of a list of two or more dicts with the same str keys (in the same order
    unless `sort_keys`) and scalar values, each dict at depth `level`: one format string
    filled per record from whole columns encoded at once (what makes a 78k-label list
    cheap). None when the list is anything else (the general path writes it)."""
    first = o[0]
    if len(o) < 2 or type(first) is not dict or not first:
        return None
    keys = list(first)
    if set(map(type, o)) != {dict} or set(map(len, o)) != {len(keys)}:
        return None
    if set(map(type, keys)) != {str} or (not sort_keys and not all(map(keys.__eq__, map(list, o)))):
        return None
    order = sorted(keys) if sort_keys else keys
    cols = []
    for k in order:
        try:
            col = _column([rec[k] for rec in o])  # equal lengths + every key: the same keys
        except KeyError:
            return None
        if col is None:
            return None
        cols.append(col)
    inner = "\n" + indent * (level + 1)
    fields = ("," + inner).join(_encode_str(k).replace("%", "%%") + ": %s" for k in order)
    template = "{" + inner + fields + "\n" + indent * level + "}"
    return (",\n" + indent * level).join([template % vals for vals in zip(*cols, strict=True)])


def _column(values: list[Any]) -> list[str] | None:
    """The JSON texts of a column of scalars of the exact JSON types (a column of one type
    through one C-level map); None when it holds anything else (a subclass included)."""
    types = set(map(type, values))
    if types == {str}:
        return list(map(_encode_str, values))
    if types == {int}:
        return list(map(int.__repr__, values))
    if types <= _SCALARS:
        return list(map(_scalar, values))  # type: ignore[arg-type]  # never None here
    return None
