"""The DuckDB span store (`Store`): opening (the schema made or checked), closing, transactions
whose refused writes are undone, and a shared store's swap of connections. Its tables are in
docs/DESIGN.md, "The span store"; its queries come from `catalogue`, `vectors`, `subsets` and
`overlap`, its messages from `connection` and `failures`; `writer` writes a source into it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import NoReturn

from builders.defaults import DB_ENV, DEFAULT_DB
from builders.deferred import duckdb, np, pa
from builders.errors import (
    NoStore,
    StoreDamaged,
    StoreError,
    StoreOutOfMemory,
    StoreWriteRefused,
    WritesKeptInWal,
    opt,
)
from builders.store.catalogue import CatalogueQueries, StoredSplit
from builders.store.connection import _connect, open_error, open_failure
from builders.store.failures import (
    FileState,
    as_store_error,
    damaged,
    is_damage,
    kept_in_wal,
    machine_refused,
    memory_failure,
    out_of_memory,
    wal_holds_writes,
    wal_path,
    write_failure,
)
from builders.store.overlap import OverlapQueries
from builders.store.schema import TABLES, one, stored_version
from builders.store.schema import create as create_schema
from builders.store.settings import default_db_path, lock_wait, memory_limit, usable_memory
from builders.store.subsets import SubsetQueries
from builders.store.vectors import VectorQueries

__all__ = [
    "DB_ENV",
    "DEFAULT_DB",
    "Store",
    "StoredSplit",
    "default_db_path",
    "lock_wait",
    "memory_limit",
    "open_failure",
    "usable_memory",
    "wal_path",
]


class Store(CatalogueQueries, VectorQueries, OverlapQueries, SubsetQueries):
    """A connection to the span store; a context manager, or call `close()`. A `shared` store
    reads through a read-only connection (DuckDB lets one process write a store, or many read
    it), so other commands can read beside a long computation: each `transaction()` holds the
    write lock only while it runs, and label vectors wait in memory for `flush_vectors()`. A
    DuckDB error the store knows (damage, a refused write, memory) leaves a `with Store(...)`
    block as its typed `StoreError`."""

    def __init__(
        self,
        path: str | Path | None = None,
        read_only: bool = False,
        create: bool = True,
        *,
        shared: bool = False,
        wait: float | None = None,
        on_wait: Callable[[str], None] | None = None,
    ):
        """Open the store at `path` (default: $LABELSHIFT_DB or ./labelshift.duckdb).
        `read_only` shares it with other readers; `create` makes one where there is none (a
        command that only reads never leaves an empty store); `wait`: seconds to wait for a
        store another process holds (default `lock_wait()`); `on_wait` is told who holds it."""
        self.path = Path(path) if path is not None else default_db_path()
        if (read_only or not create) and not self.path.exists():
            raise NoStore(
                f"{self.path}: no store here: run `builders ingest SOURCE --db {self.path}` "
                f"first, or pass {opt('db')} the store you meant"
            )
        self.shared = shared and not read_only and str(path) != ":memory:"
        self._wait = wait
        self._on_wait = on_wait
        self._pending: dict[str, list[tuple[pa.Array, np.ndarray]]] = {}
        self._writing = False
        self._in_transaction = False
        self._closed = False
        self._fd: int | None = None  # the store file, read by `_settled`
        #: whether this open makes the store (none was at `path`)
        self.created = not read_only and str(path) != ":memory:" and not self.path.exists()
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.shared and not self.path.exists():
            Store(self.path, wait=self._wait, on_wait=on_wait).close()  # a new, empty store
        self.con = self._open(read_only or self.shared)
        try:
            if stored_version(self.con, self.path) is None and not read_only:
                with self._writable():
                    create_schema(self.con)
                    self.con.execute("CHECKPOINT")  # an empty .wal: the first write undoable
        except duckdb.Error as exc:
            with suppress(duckdb.Error):
                self.con.close()
            if out_of_memory(exc):
                raise StoreOutOfMemory(memory_failure(exc)) from exc
            if machine_refused(exc):
                raise StoreWriteRefused(write_failure(self.path, exc)) from exc
            raise open_error(self.path, exc) from exc
        except BaseException:
            self.con.close()
            raise

    def _open(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        return _connect(self.path, read_only, self._wait, self._on_wait)

    def close(self) -> None:
        """Close the connection; label vectors still held in memory are not written (see
        `flush_vectors`)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.con.close()
        finally:
            self._let_go()
        wal = wal_path(self.path)
        with suppress(OSError):
            if wal.stat().st_size == 0:  # left by a commit the disk refused: holds nothing
                wal.unlink()

    def check(self) -> dict[str, int]:
        """Read every row of every table, so that DuckDB verifies every block's checksum: table
        -> rows, or a StoreError naming the damaged table."""
        rows = {}
        for table in TABLES:
            sql = f"SELECT count(*), sum(hash(t)) FROM {table} t"
            try:
                rows[table] = one(self.con.execute(sql))[0]
            except duckdb.Error as exc:
                if not is_damage(exc):
                    raise
                raise StoreDamaged(damaged(self.path, exc, table)) from exc
        return rows

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
        typed = None if exc is None else as_store_error(self.path, exc)
        if typed is not None:
            raise typed from exc

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """All of the block's writes, or (on any error, a full disk included) none. A shared
        store holds the write lock for the block only. The write is folded from the .wal into
        the store file before the block ends (a disk refusing that is undone: `_refused`).
        A block inside another is part of it: its writes land or are undone with the outer's."""
        if self._in_transaction:
            self.__dict__.pop("_per_label_cache", None)
            yield self.con
            return
        with self._writable(), self._one_transaction():
            yield self.con

    @contextmanager
    def _one_transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """`transaction`'s outermost block, on the writable connection."""
        self._in_transaction = True
        try:
            before = self._settled()
            self.__dict__.pop("_per_label_cache", None)  # level rows read before a write
            self.con.execute("BEGIN TRANSACTION")
            try:
                yield self.con
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            try:
                self.con.execute("COMMIT")
            except duckdb.Error as exc:
                with suppress(duckdb.Error):
                    self.con.execute("ROLLBACK")
                if machine_refused(exc):  # a large write is checkpointed by the commit itself
                    self._refused(exc, before, committed="durable" in str(exc))
                raise StoreWriteRefused(write_failure(self.path, exc)) from exc
            try:
                self.con.execute("CHECKPOINT")  # DuckDB's on close says nothing of a failure
            except duckdb.Error as exc:
                if isinstance(exc, duckdb.FatalException):  # DuckDB stopped the database
                    self._refused(exc, before, committed=True)
                # else another transaction of this process is open: DuckDB folds it later
        finally:
            self._in_transaction = False

    def checkpoint(self) -> None:
        """Fold what the store's .wal holds into the store file; a `StoreError` where the disk
        refused it (the writes stay in the .wal)."""
        try:
            self.con.execute("CHECKPOINT")
        except duckdb.Error as exc:
            if machine_refused(exc) or isinstance(exc, duckdb.FatalException):
                raise WritesKeptInWal(kept_in_wal(self.path, exc)) from exc
            raise

    def _settled(self) -> FileState | None:
        """The store file's state before a write, when its .wal holds nothing: what a write
        the disk cannot fold in is undone to. None: a store in memory, on Windows (no POSIX
        locks, no truncating an open file), or whose .wal holds earlier writes."""
        if os.name == "nt" or self.path.name == ":memory:" or wal_holds_writes(self.path):
            return None
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except OSError:
                return None
        return FileState.of(self._fd)

    def _let_go(self) -> None:
        """Close the store file's descriptor `_settled` opened, once DuckDB's connection is
        closed (closing it before would release DuckDB's lock: see `FileState`)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _refused(self, exc: duckdb.Error, before: FileState | None, committed: bool) -> NoReturn:
        """Raise the `StoreError` of a write the machine refused at its commit or checkpoint,
        or DuckDB stopped at its checkpoint (`committed`: the .wal holds it).

        While the store file's headers are `before`'s, the .wal is dropped and the file cut
        back before the connection lets go of the file's lock: "nothing was written". Else a
        committed write stays in the .wal, and the error says to keep it. A database DuckDB
        did not stop is not undone under it (its close would fold the .wal in): its rollback
        already left the data as it was."""
        stopped = isinstance(exc, duckdb.FatalException)
        undone = (
            (stopped or not committed)
            and before is not None
            and self._fd is not None
            and before.restore(self.path, self._fd)
        )
        with suppress(duckdb.Error):
            self.con.close()
        self._let_go()
        if undone and not self.shared:  # a shared store's is opened again by _writable
            with suppress(StoreError, duckdb.Error):  # held meanwhile: the error stays this one
                self.con = self._open(False)
        if committed and not undone:
            raise WritesKeptInWal(kept_in_wal(self.path, exc)) from exc
        if out_of_memory(exc):
            raise StoreOutOfMemory(memory_failure(exc)) from exc
        raise StoreWriteRefused(write_failure(self.path, exc)) from exc

    @contextmanager
    def _writable(self, reopen: bool = True) -> Iterator[None]:
        """A shared store's read-only connection swapped for a read-write one for the block
        (then read-only again, with `reopen`); other stores as they are."""
        if not self.shared or self._writing:
            yield
            return
        temporary = one(
            self.con.execute(
                "SELECT (SELECT count(*) FROM duckdb_views() WHERE temporary AND NOT internal) "
                "+ (SELECT count(*) FROM duckdb_tables() WHERE temporary)"
            )
        )[0]
        if temporary:  # they live in this connection, which the swap closes
            raise StoreError(
                f"{self.path}: cannot write while this connection's temporary views or tables "
                "are open (a decontaminated corpus)"
            )
        self.con.close()
        self._writing = True
        try:
            self.con = self._open(False)
            yield
        finally:
            self._writing = False
            with suppress(duckdb.Error):
                self.con.close()
            self._let_go()
            if reopen:
                self.con = self._open(True)
