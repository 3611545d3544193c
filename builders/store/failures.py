"""What the store says when DuckDB or the machine refuses: one line per failure, naming the
store and the fix, and the typed `StoreError` each becomes (`as_store_error`). Also the undo
of a write the disk refused (`FileState`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from builders.deferred import duckdb
from builders.errors import (
    StoreDamaged,
    StoreError,
    StoreOutOfMemory,
    StoreWriteRefused,
    opt,
)
from builders.store.settings import MEMORY_ENV, memory_limit

_DAMAGE = ("Corrupt database file", "does not match stored checksum", "Could not read enough")


def is_damage(exc: Exception) -> bool:
    """Whether DuckDB's error says the file's bytes are damaged or cut short."""
    return any(s in str(exc) for s in _DAMAGE)


def damaged(path: Path | str, exc: Exception, table: str | None = None) -> str:
    """The one-line message for a damaged store."""
    where = f" (table {table})" if table else ""
    first = str(exc).splitlines()[0]
    return (
        f"{path}: the store is damaged{where}: {first}. Restore it from a copy, or ingest the "
        f"sources again into a new {opt('db')}"
    )


#: What DuckDB says of a write the machine refused, and the fix (`{db}`: the store setting).
_WRITE_FIXES = {
    "No space left on device": "free space there, or pass {db} a store on another disk",
    "Disk quota exceeded": "free space within your quota, or pass {db} a store on another disk",
    "File too large": "raise the file size limit (`ulimit -f`), or pass {db} a store on "
    "another disk",
    "Read-only file system": "pass {db} a store on a writable disk",
    "Permission denied": "pass {db} a store in a folder you can write to",
    "Input/output error": "the disk reported an error: check it, then run the command again",
}


def write_failure(path: Path | str, exc: Exception) -> str:
    """One line for a write DuckDB could not make (the transaction was rolled back)."""
    first = str(exc).splitlines()[0]
    if "No space left on device" in first:
        return (
            f"{path}: no space left on the device while writing the store; nothing was "
            f"written: {_WRITE_FIXES['No space left on device'].format(db=opt('db'))}"
        )
    fix = next((f for cause, f in _WRITE_FIXES.items() if cause in first), None)
    return f"{path}: could not write the store ({first}); nothing was written" + (
        f": {fix.format(db=opt('db'))}" if fix else ""
    )


def wal_path(path: Path) -> Path:
    """The write-ahead log DuckDB keeps beside a store."""
    return path.with_name(path.name + ".wal")


def wal_holds_writes(path: Path) -> bool:
    """Whether the store's .wal holds writes not yet folded into the store file."""
    try:
        return wal_path(path).stat().st_size > 0
    except OSError:
        return False


def _cause(exc: Exception) -> str:
    """DuckDB's error on one line, without its list of tuning advice."""
    return " ".join(str(exc).split("Possible solutions")[0].split())


def kept_in_wal(path: Path, exc: Exception) -> str:
    wal = wal_path(path)
    cause = _cause(exc)
    fix = (
        f"set {MEMORY_ENV} higher"
        if out_of_memory(exc)
        else "free space or raise the file size limit"
    )
    return (
        f"{path}: the write is kept in {wal.name} but could not be folded into the store file "
        f"({cause}): keep {wal.name} beside the store (copy both or neither); {fix}, then "
        f"`builders stats --db {path}` folds it in"
    )


def out_of_memory(exc: Exception) -> bool:
    """Whether DuckDB ran out of its memory limit (a checkpoint's words for it are DuckDB's
    version's: "failed to pin block", "could not allocate block")."""
    cause = _cause(exc)
    return isinstance(exc, duckdb.OutOfMemoryException) or any(
        words in cause for words in ("Out of Memory", "pin block", "allocate block")
    )


def memory_failure(exc: Exception) -> str:
    """One line for DuckDB running out of its memory limit, naming the variable."""
    return (
        f"DuckDB ran out of its memory limit ({memory_limit() or 'its default'}): set "
        f"{MEMORY_ENV} higher, e.g. {MEMORY_ENV}=16GB. {exc}"
    )


@dataclass(frozen=True)
class FileState:
    """A store file's size and header blocks (DuckDB's main header and its two database
    headers, the first 12 KiB: DuckDB writes a checkpoint's blocks, then the header that
    points at them), taken when its .wal holds nothing.

    Read through a descriptor the `Store` keeps open until DuckDB has let go of the file:
    DuckDB's lock on the store is a POSIX record lock, which closing ANY descriptor of the
    file in the process releases (a second process could then write the store beside it)."""

    size: int
    head: bytes

    HEAD = 3 * 4096

    @classmethod
    def of(cls, fd: int) -> FileState:
        os.lseek(fd, 0, os.SEEK_SET)
        return cls(os.fstat(fd).st_size, os.read(fd, cls.HEAD))

    def restore(self, path: Path, fd: int) -> bool:
        """The store as it was, if its headers still are: the .wal removed (what decides),
        then the file cut back to its size, both by path (no descriptor of the file is
        closed). False, nothing touched, when a header changed or the .wal stays."""
        try:
            now = FileState.of(fd)
            if now.head != self.head or now.size < self.size:
                return False
            wal_path(path).unlink(missing_ok=True)
        except OSError:
            return False
        with suppress(OSError):  # left longer, the end is unused blocks: the store is as it was
            os.truncate(path, self.size)
        return True


def machine_refused(exc: Exception) -> bool:
    """Whether a DuckDB error is the machine refusing a write (disk, quota, size limit,
    permissions), not a fault of the store's own."""
    return any(cause in str(exc) for cause in _WRITE_FIXES)


def as_store_error(path: Path | str, exc: BaseException) -> StoreError | None:
    """The typed `StoreError` a DuckDB error met while using the store at `path` becomes; None
    for any other error (a bug: it is left as it is)."""
    if not isinstance(exc, duckdb.Error):
        return None
    if is_damage(exc):
        return StoreDamaged(damaged(path, exc))
    if machine_refused(exc):  # a full disk, a size limit, permissions
        return StoreWriteRefused(write_failure(path, exc))
    if isinstance(exc, duckdb.OutOfMemoryException):
        return StoreOutOfMemory(memory_failure(exc))
    return None


@contextmanager
def store_errors(path: Path | str) -> Iterator[None]:
    """The block's DuckDB errors that `as_store_error` knows, raised as their `StoreError`
    (the DuckDB error as its cause)."""
    try:
        yield
    except duckdb.Error as exc:
        typed = as_store_error(path, exc)
        if typed is None:
            raise
        raise typed from exc
