"""JSON files that hold one list of records (Pile-NER, GLiNER), read record by record.

`json_records` decodes the records one at a time, so that every error names the file, the
line where the record starts AND the record's number (a file on one line still says which
record), and shows the offending value as JSON, as it stands in the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builders.errors import SourceFormatError
from builders.sources.base import as_in_file, read_text

_NOTHING = object()


@dataclass(frozen=True)
class Record:
    """Where a record is: its file, 1-based number and the line where it starts."""

    path: Path
    number: int
    line: int

    def error(self, message: str, value: object = _NOTHING) -> SourceFormatError:
        """An error at this record; `value` is shown as JSON."""
        shown = None if value is _NOTHING else as_in_file(value)
        return SourceFormatError(self.path, self.line, message, shown, record=self.number)


def json_records(path: Path) -> Iterator[tuple[Record, Any]]:
    """Yield (where, record) for every record of a file holding one JSON list; a
    `SourceFormatError` for an empty file, invalid JSON or a top level that is not a list."""
    text = read_text(path)
    decoder = json.JSONDecoder()
    pos = _skip_ws(text, 0)
    if pos == len(text):
        raise SourceFormatError(path, None, "empty file")
    if text[pos] != "[":
        kind = _top_level_kind(path, text, decoder, pos)
        raise SourceFormatError(
            path,
            _line_at(text, pos),
            f"expected a JSON list of records, found {kind}",
            text[pos : pos + 40],
        )
    pos = _skip_ws(text, pos + 1)
    if text.startswith("]", pos):
        _expect_end(path, text, pos + 1)
        return
    number = 0
    line, line_pos = _line_at(text, pos), pos
    while True:
        number += 1
        line += text.count("\n", line_pos, pos)
        line_pos = pos
        try:
            record, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _json_error(path, text, exc, number) from None
        yield Record(path, number, line), record
        pos = _skip_ws(text, end)
        if text.startswith(",", pos):
            pos = _skip_ws(text, pos + 1)
            continue
        if text.startswith("]", pos):
            _expect_end(path, text, pos + 1)
            return
        if pos == len(text):
            raise SourceFormatError(
                path, _line_at(text, pos), f"invalid JSON: list not closed after record {number}"
            )
        raise SourceFormatError(
            path,
            _line_at(text, pos),
            f"invalid JSON after record {number}: expected ',' or ']'",
            text[pos : pos + 40],
        )


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\n\r":
        pos += 1
    return pos


def _line_at(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _expect_end(path: Path, text: str, pos: int) -> None:
    pos = _skip_ws(text, pos)
    if pos < len(text):
        raise SourceFormatError(
            path,
            _line_at(text, pos),
            "invalid JSON: extra data after the list",
            text[pos : pos + 40],
        )


def _top_level_kind(path: Path, text: str, decoder: json.JSONDecoder, pos: int) -> str:
    try:
        value, _ = decoder.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise _json_error(path, text, exc, None) from None
    kinds = {dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def _json_error(
    path: Path, text: str, exc: json.JSONDecodeError, number: int | None
) -> SourceFormatError:
    return SourceFormatError(
        path,
        exc.lineno,
        f"invalid JSON: {exc.msg} (column {exc.colno})",
        text[exc.pos : exc.pos + 40],
        record=number,
    )
