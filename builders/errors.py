"""Errors raised by the toolkit, typed by what went wrong (the CLI shows every `BuildersError`
as one line: `builders.cli.errors`). A message names the setting that fixes it with
`opt("min_labels")`, as the `Surface` in force spells it: `min_labels=` for a library caller,
`--min-labels` on the command line, `min_labels` in a scenario file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import ClassVar, Self


class Surface:
    """Where the user sets what a message asks them to change: here, the library's keywords."""

    #: What a message calls the list of settings that would help.
    helping = "Options that help"
    #: Settings that are no keyword argument here, by what the user passes instead.
    NAMES: ClassVar[Mapping[str, str]] = {"db": "Store(path)"}

    def option(self, name: str, value: object = None) -> str:
        """The setting `name` (a library parameter) as written here, with `value` if shown."""
        if name in self.NAMES:
            return self.NAMES[name]
        return f"{name}=" if value is None else f"{name}={value}"

    def reader_option(self, key: str, value: object = None) -> str:
        """The reader option `key` (set to `value`) as the user passes it here."""
        return f"options[{key!r}]" if value is None else f"options={{{key!r}: {value!r}}}"


LIBRARY = Surface()
_SHOWN: ContextVar[Surface] = ContextVar("builders_surface", default=LIBRARY)


def opt(name: str, value: object = None) -> str:
    """The setting `name` as the surface in force names it (see `Surface.option`)."""
    return _SHOWN.get().option(name, value)


def reader_opt(key: str, value: object = None) -> str:
    """The reader option `key` set to `value` as the surface in force names it."""
    return _SHOWN.get().reader_option(key, value)


def options_that_help() -> str:
    """How the surface in force introduces a list of settings that would help."""
    return _SHOWN.get().helping


def surface() -> Surface:
    """The surface in force (the library's unless a caller chose another)."""
    return _SHOWN.get()


@contextmanager
def shown_on(where: Surface) -> Iterator[None]:
    """Messages made inside name settings as `where` does (for this thread or task)."""
    token = _SHOWN.set(where)
    try:
        yield
    finally:
        _SHOWN.reset(token)


class BuildersError(Exception):
    """Base class of every error the toolkit raises on purpose."""

    def reworded(self, message: str) -> Self:
        """This error with another message, its type and attributes kept."""
        self.args = (message,)
        return self


class InvalidValue(BuildersError, ValueError):
    """A value the library refuses: an argument, a reader option, an environment variable."""


class ConflictingOptions(InvalidValue):
    """Settings that exclude each other (`replace` with `append`) or do not apply together."""


class InputError(BuildersError):
    """An input the user named is missing, unreadable, or not what it was given as."""


class ScenarioError(InputError):
    """A scenarios (or runs) file that cannot be read as one."""


class AmbiguousInput(InputError):
    """An input that reads more than one way; the message names the setting that says which."""


class BuildersWarning(UserWarning):
    """Something the toolkit went on without (the command line prints it as `warning: ...`)."""

    prefix = "warning"


class BuildersNote(BuildersWarning):
    """A choice the toolkit made that the user may want to know of (`note: ...`)."""

    prefix = "note"


class CacheWarning(BuildersWarning):
    """A per-user cache could not be read or written; the run goes on without it."""


class SourceFormatError(InputError):
    """A raw input file does not follow its format: the message names the file, the 1-based
    line, the record where the format has records (`file:1: record 3: ...`) and the value."""

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


class AmbiguousFormat(SourceFormatError, AmbiguousInput):
    """A file whose layout reads more than one way; the message names the reader option."""


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
    """The span store cannot do what was asked (`store.failures.as_store_error` types DuckDB's)."""


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
    """The machine refused a write (disk full, quota, permissions); the store is unchanged."""


class WritesKeptInWal(StoreWriteRefused):
    """A committed write stays in the store's `.wal`, which could not be folded in."""


class StoreOutOfMemory(StoreError):
    """DuckDB ran out of its memory limit (`$LABELSHIFT_MEMORY_LIMIT`)."""


class SplitNotStored(SourceNotStored):
    """A split (or part) the stored source does not hold; the message names those it has."""

    def __init__(self, message: str, source: str, split: str):
        super().__init__(message, source)
        self.split = split


class IngestRefused(StoreError):
    """An ingest that would change a split in a way nobody asked for; nothing was written."""


class ModelUnavailable(BuildersError):
    """A model, tokenizer or embedding runtime cannot be loaded or used as asked."""


class CacheError(BuildersError):
    """A cache that cannot serve what was asked (switched off, or of another width)."""


class OutputFolderError(BuildersError):
    """The output folder cannot be written (held by another run, refused, bad manifest)."""


class CannotBuild(BuildersError):
    """The stored data cannot give what was asked; the message says which settings ask less."""


class LevelsUnreachable(CannotBuild):
    """No placement of the levels at this size meets the targets and gaps (`familiarity`)."""

    def __init__(self, message: str, low: float, high: float, alone: bool = False):
        super().__init__(message)
        self.low, self.high = low, high  # the Familiarity range windows of this size span
        self.alone = alone  # the build's model alone would place them: another model refuses


class LiteralError(InvalidValue):
    """The text is not a Python list literal of strings (a NuNER CSV cell)."""


class HubUnreachable(BuildersError):
    """The Hugging Face Hub cannot be reached: what only it knows (a newest revision) is
    unknown, which is not unchanged."""


class NotLoggedInError(BuildersError):
    """No Hugging Face token: none given, no `HF_TOKEN`, no saved login."""


class PublishRefused(BuildersError):
    """A folder that is not pushed as it stands; nothing was pushed."""


class PublishError(BuildersError):
    """A push failed; says which repos were published before it and which were not."""

    def __init__(self, message: str, published: list[str], not_published: list[str]):
        self.published, self.not_published = published, not_published
        super().__init__(message)


def _show(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
