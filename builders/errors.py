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


class CacheWarning(BuildersWarning):
    """A per-user cache (embeddings, leakage scans) could not be read or written; the run goes
    on without it."""


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
    """The span store cannot do what was asked (missing source, schema mismatch, ...).

    The store turns DuckDB's own errors into the kinds below where it meets them
    (`builders.store.failures.as_store_error`), so that no caller needs DuckDB to tell them
    apart; each message is one line naming the store and the fix."""


class NoStore(StoreError):
    """No store at the path given, where a command only reads (nothing is made)."""


class SourceNotStored(StoreError):
    """A source the store does not hold; the message names what it holds and the ingest."""

    def __init__(self, message: str, source: str):
        self.source = source
        super().__init__(message)


class StoreLocked(StoreError):
    """Another process held the store past the wait (`$LABELSHIFT_LOCK_WAIT`)."""


class StoreDamaged(StoreError):
    """The store file's bytes are damaged or cut short (a checksum or a read failed)."""


class StoreUnreadable(StoreError):
    """The store file cannot be opened: unreadable, or not a store this DuckDB opens."""


class StoreWriteRefused(StoreError):
    """The machine refused a write (full disk, quota, file size limit, permissions); the
    store was left as it was."""


class WritesKeptInWal(StoreWriteRefused):
    """A committed write stays in the store's `.wal`, which could not be folded into the
    store file: the message says to keep the `.wal` beside the store."""


class StoreOutOfMemory(StoreError):
    """DuckDB ran out of its memory limit (`$LABELSHIFT_MEMORY_LIMIT`)."""


class LevelsUnreachable(BuildersError):
    """No placement of the levels at this size meets the targets and the gaps
    (`--strategy familiarity`)."""

    def __init__(self, message: str, low: float, high: float, alone: bool = False):
        super().__init__(message)
        self.low, self.high = low, high  # the Familiarity range windows of this size span
        self.alone = alone  # the build's model alone would place them: another model refuses


class LiteralError(InvalidValue):
    """The text is not a Python list literal of strings (a NuNER CSV cell)."""


class HubUnreachable(BuildersError):
    """The Hugging Face Hub cannot be reached (offline mode, no connection, a timeout, its
    server failing): what only the Hub knows, such as a dataset's newest revision, is
    unknown, which is not the same as unchanged."""


class NotLoggedInError(BuildersError):
    """No Hugging Face token: none given, no `HF_TOKEN`, no saved login."""


class PublishError(BuildersError):
    """A push failed; says which repos were published before it and which were not."""

    def __init__(self, message: str, published: list[str], not_published: list[str]):
        self.published, self.not_published = published, not_published
        super().__init__(message)


def _show(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
