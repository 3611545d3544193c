"""Errors raised by the toolkit, typed by what went wrong, and how their messages name the
setting that fixes them. The CLI turns every `BuildersError` into a clean message
(`builders.cli.errors`).

A message that tells the user what to change names the setting with `opt("min_labels")`, not
with a command-line flag: the text is made for the surface the user works in (the
`Surface` in force where the error is raised), so that a library caller reads
`min_labels=`, the command line `--min-labels` and a scenario file's author `min_labels`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import ClassVar, Self


class Surface:
    """Where the user sets what a message asks them to change; this one is the library's,
    where a setting is a keyword argument (`min_labels=`, `replace=True`). The command line
    (`builders.cli.errors`) and a scenario (`builders.scenarios.regenerate`) name them their
    own way."""

    #: What a message calls the list of settings that would help.
    helping = "Options that help"
    #: Settings that are no keyword argument here, by what the user passes instead.
    NAMES: ClassVar[Mapping[str, str]] = {"db": "Store(path)"}

    def option(self, name: str, value: object = None) -> str:
        """The setting `name` (a library parameter) as the user writes it here, with `value`
        when the message shows one (a placeholder such as `NAME`, or the value given)."""
        if name in self.NAMES:
            return self.NAMES[name]
        return f"{name}=" if value is None else f"{name}={value}"

    def reader_option(self, key: str, value: object = None) -> str:
        """The reader option `key` (set to `value`, when the message shows one) as the user
        passes it here: a library caller in the `options` mapping."""
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
        """This error with another message (e.g. naming the scenario it happened in), its
        type and attributes kept, so that a caller's `except` still tells it apart."""
        self.args = (message,)
        return self


class InvalidValue(BuildersError, ValueError):
    """A value the library refuses (an argument out of range, a reader option it cannot
    read, an environment variable it cannot parse); a `ValueError` too, for callers that
    catch those."""


class ConflictingOptions(InvalidValue):
    """Settings that exclude each other, or a setting that does not apply with another
    (`replace` with `append`, a strategy's option under another strategy)."""


class InputError(BuildersError):
    """An input the user named (a file, folder, dataset, label or scenario file) is missing,
    cannot be read, or is not what it was given as."""


class ScenarioError(InputError):
    """A scenarios file that cannot be read as scenarios: not TOML, an unknown key, kind or
    scenario, two scenarios storing one input that disagree on how it is read."""


class AmbiguousInput(InputError):
    """An input that reads more than one way (a file name naming two splits, a column layout
    with no clear tag column, an entry that is both a source and a file): the message names
    the setting that says which, since nothing ambiguous is read silently."""


class BuildersWarning(UserWarning):
    """Something the toolkit went on without (the command line prints it as `warning: ...`)."""

    prefix = "warning"


class BuildersNote(BuildersWarning):
    """A choice the toolkit made that the user may want to know of (`note: ...`)."""

    prefix = "note"


class CacheWarning(BuildersWarning):
    """A per-user cache (embeddings, leakage scans) could not be read or written; the run goes
    on without it."""


class SourceFormatError(InputError):
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


class AmbiguousFormat(SourceFormatError, AmbiguousInput):
    """A file whose layout reads more than one way (which column holds the tags, IO tags
    that look like words): the message names the reader option that says which."""


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


class SplitNotStored(SourceNotStored):
    """A split (or part) the stored source does not hold; the message names those it has."""

    def __init__(self, message: str, source: str, split: str):
        super().__init__(message, source)
        self.split = split


class IngestRefused(StoreError):
    """An ingest that would change what a split holds in a way nobody asked for (another
    input without `replace` or `append`, an `append` of changed inputs or other options);
    one line per split refused, and nothing was written."""


class ModelUnavailable(BuildersError):
    """A model, tokenizer or embedding runtime cannot be loaded or used as asked: weights
    missing or not installed, a runtime package absent, a runtime that does not run the
    precision asked for."""


class CacheError(BuildersError):
    """A per-user or store cache that cannot serve what was asked (switched off, or holding
    vectors of another width than the model's)."""


class OutputFolderError(BuildersError):
    """The output folder cannot be written: another run holds it, the machine refuses the
    write, or its manifest of what a build wrote is unreadable."""


class CannotBuild(BuildersError):
    """The stored data cannot give what was asked: too few labels or mentions for the
    levels, too few sentences per type for an episode, no mention to measure Familiarity on.
    The message says which settings ask for less."""


class LevelsUnreachable(CannotBuild):
    """No placement of the levels at this size meets the targets and the gaps
    (the `familiarity` strategy)."""

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


class PublishRefused(BuildersError):
    """A folder that is not pushed as it stands (a file holds the Hugging Face token, more
    files than one commit takes, a repo name the Hub refuses); nothing was pushed."""


class PublishError(BuildersError):
    """A push failed; says which repos were published before it and which were not."""

    def __init__(self, message: str, published: list[str], not_published: list[str]):
        self.published, self.not_published = published, not_published
        super().__init__(message)


def _show(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
