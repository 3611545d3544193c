"""Errors raised by the toolkit. The CLI turns every `BuildersError` into a clean message."""

from __future__ import annotations


class BuildersError(Exception):
    """Base class of every error the toolkit raises on purpose."""


class InvalidValue(BuildersError, ValueError):
    """A value the library refuses (an argument out of range, a reader option it cannot
    read); a `ValueError` too, for callers that catch those."""


class BuildersWarning(UserWarning):
    """Something the toolkit went on without (the command line prints it as `warning: ...`)."""

    prefix = "warning"


class BuildersNote(BuildersWarning):
    """A choice the toolkit made that the user may want to know of (`note: ...`)."""

    prefix = "note"


class SourceFormatError(BuildersError):
    """A raw input file does not follow its format.

    The message always names the file, the 1-based line, the record number where the format
    has records (JSON: `file:1: record 3: ...`, so a one-line file still points at the right
    place) and the offending value as it stands in the file.
    """

    def __init__(
        self,
        path: object,
        line: int | None,
        message: str,
        value: object = None,
        record: int | None = None,
    ):
        self.path = str(path)
        self.line = line
        self.value = value
        self.message = message
        self.record = record
        where = f"{self.path}:{line}" if line is not None else self.path
        rec = "" if record is None else f" record {record}:"
        shown = "" if value is None else f": {_show(value)}"
        super().__init__(f"{where}:{rec} {message}{shown}")


class Verbatim(str):
    """A value shown in an error exactly as it stands in the file (no Python quoting)."""

    def __repr__(self) -> str:
        return str.__str__(self)


class UnknownNameError(BuildersError):
    """A name (source, benchmark, strategy, ...) is not one of the valid ones."""

    def __init__(self, what: str, name: str, valid: list[str] | tuple[str, ...]):
        self.what, self.name, self.valid = what, name, list(valid)
        super().__init__(f"unknown {what} {name!r}. Valid: {', '.join(sorted(valid))}")


class StoreError(BuildersError):
    """The span store cannot do what was asked (missing source, schema mismatch, ...)."""


def _show(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
