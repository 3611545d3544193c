"""The DuckDB span store: one schema for every corpus and benchmark.

Tables (token offsets, `stop` exclusive; a sentence is keyed by (source, split, idx)):

    sources(source, split, kind, origin, fingerprint, loader_version, options, ingested_at,
            n_sentences, n_mentions, n_negatives, n_negative_spans, report, inputs)
    sentences(source, split, idx, sentence_id, tokens VARCHAR[], raw_id)
    mentions(source, split, idx, start, stop, label, raw_label, coarse)
    negatives(source, split, idx, label, raw_label)                -- label-level negatives
    negative_spans(source, split, idx, start, stop, label, raw_label)  -- span-level negatives
    embeddings(model, label, vector FLOAT[])          -- the embedding cache
    label_counts (view): source, label, mentions, sentences

`sources.inputs` is a JSON list of the split's inputs in reading order, `[{input,
fingerprint, sentences}]`: what `--append` adds to and what a refusal names.

This module owns the schema, the connection and the queries (the leakage queries are in
`builders.store.overlap`); `builders.store.writer` writes a
source into it (one transaction per ingest) and `builders.store.ingest` decides where it is read from.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from builders.defaults import DB_ENV, DEFAULT_DB, SPLITS, split_rank
from builders.errors import StoreError
from builders.store.schema import SCHEMA_VERSION, TABLES, one, stored_version
from builders.store.schema import create as create_schema

__all__ = ["DB_ENV", "DEFAULT_DB", "SCHEMA_VERSION", "Store", "StoredSplit", "one"]
from builders.store.overlap import OverlapQueries

#: The most memory DuckDB may use (its `memory_limit`, e.g. `8GB`); `duckdb`: DuckDB's own
#: default (80% of the RAM).
MEMORY_ENV = "LABELSHIFT_MEMORY_LIMIT"
#: DuckDB's limit when MEMORY_ENV is unset (or none where 80% of the RAM is less). DuckDB
#: keeps what it read cached up to its limit: at 10x NuNER a warm build-splits peaked at 8.0 GB
#: with DuckDB's default and 6.2 GB with 4 GB, and ran no slower (112 s and 102 s). What
#: outgrows the limit spills to disk beside the store.
DEFAULT_MEMORY_LIMIT_GB = 4
#: Seconds a command waits for a store another process holds (a write lock keeps every other
#: process out; a read lock keeps writers out).
LOCK_WAIT_ENV = "LABELSHIFT_LOCK_WAIT"
DEFAULT_LOCK_WAIT_S = 60.0
#: Seconds between two attempts to open a locked store.
_LOCK_POLL_S = 0.2


def memory_limit() -> str | None:
    """DuckDB's `memory_limit` for a store: $LABELSHIFT_MEMORY_LIMIT, else 4 GB where that is
    at most 80% of the memory this process may use; None leaves DuckDB's default (80% of
    it)."""
    limit = os.environ.get(MEMORY_ENV, "").strip()
    if limit.lower() == "duckdb":
        return None
    if limit:
        return limit
    usable = usable_memory()
    if usable is None or 0.8 * usable < DEFAULT_MEMORY_LIMIT_GB * 2**30:
        return None
    return f"{DEFAULT_MEMORY_LIMIT_GB}GB"


#: A container's memory cap (cgroup v2, then v1): a host's RAM can be far more.
_CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
)


def usable_memory() -> int | None:
    """Bytes this process may use: the RAM, or the container's cgroup cap where lower; None
    where neither can be read (no sysconf: Windows)."""
    try:
        found = [os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")]
    except (AttributeError, ValueError, OSError):
        found = []
    for path in _CGROUP_LIMITS:
        try:
            text = path.read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text.isdigit():  # "max": no cap
            found.append(int(text))
    return min(found) if found else None


@dataclass(frozen=True)
class StoredSplit:
    """One stored split as `sources` records it (`inputs`: [{input, fingerprint, sentences}])."""

    fingerprint: str
    options: dict[str, Any]
    sentences: int
    mentions: int
    negatives: int
    negative_spans: int
    report: dict[str, Any]
    inputs: list[dict[str, Any]]
    origin: str
    spec: str | None = None  # the registered source that read it
    loader_version: str | None = None  # the version of its reader that read it


#: SQL that orders a split column train, dev, test, then other names.
_SPLIT_ORDER_SQL = (
    "CASE {col} " + " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(SPLITS)) + " ELSE 9 END"
)


#: `Store.subset_rows`: the mentions of whole labels and of capped labels in their first
#: sentences, grouped per sentence, with the selected labels' negatives: label-level ones
#: (distinct labels) and span-level ones (distinct spans, none equal to a stored mention).
_SUBSET_SQL = """
WITH per AS (
    SELECT m.label, m.split, m.idx, count(*) AS n
    FROM mentions m JOIN _selected c ON m.label = c.label
    WHERE m.source = $1 AND c.cap IS NOT NULL
    GROUP BY m.label, m.split, m.idx
), capped AS (
    SELECT label, split, idx FROM (
        SELECT label, split, idx,
               sum(n) OVER (PARTITION BY label ORDER BY {order}, split, idx) - n AS before
        FROM per
    ) JOIN _selected USING (label)
    WHERE before < cap
), kept AS (
    SELECT m.split, m.idx, m.start, m.stop, m.label
    FROM mentions m JOIN _selected c ON m.label = c.label
    WHERE m.source = $1 AND c.cap IS NULL
    UNION ALL
    SELECT m.split, m.idx, m.start, m.stop, m.label
    FROM mentions m JOIN capped c ON m.label = c.label AND m.split = c.split AND m.idx = c.idx
    WHERE m.source = $1
), m AS (
    SELECT split, idx,
           list({{'start': start, 'end': stop, 'label': label}} ORDER BY start, stop, label)
               AS spans
    FROM kept GROUP BY split, idx
), n AS (
    SELECT split, idx, list(DISTINCT label ORDER BY label) AS negatives
    FROM negatives
    WHERE source = $1 AND label IN (SELECT label FROM _selected)
    GROUP BY split, idx
), ns AS (
    SELECT split, idx,
           list({{'start': start, 'end': stop, 'label': label}} ORDER BY start, stop, label)
               AS negative_spans
    FROM (
        SELECT DISTINCT split, idx, start, stop, label FROM negative_spans
        WHERE source = $1 AND label IN (SELECT label FROM _selected)
        EXCEPT
        SELECT split, idx, start, stop, label FROM mentions
        WHERE source = $1 AND label IN (SELECT label FROM _selected)
    )
    GROUP BY split, idx
)
SELECT s.sentence_id AS id, s.tokens, m.spans,
       coalesce(n.negatives, []::VARCHAR[]) AS negatives,
       coalesce(ns.negative_spans, {empty_spans}) AS negative_spans
FROM sentences s
JOIN m ON s.split = m.split AND s.idx = m.idx
LEFT JOIN n ON s.split = n.split AND s.idx = n.idx
LEFT JOIN ns ON s.split = ns.split AND s.idx = ns.idx
WHERE s.source = $1
ORDER BY {s_order}, s.split, s.idx
"""


#: The type of an empty span list, for sentences with none.
_EMPTY_SPANS = """[]::STRUCT("start" INTEGER, "end" INTEGER, label VARCHAR)[]"""

#: `Store.source_reader`: one stored split's sentences with everything stored on them.
_SOURCE_SQL = """
WITH m AS (
    SELECT idx, list({{'start': start, 'end': stop, 'label': label}} ORDER BY start, stop, label)
               AS spans
    FROM mentions WHERE source = $1 AND split = $2 GROUP BY idx
), n AS (
    SELECT idx, list(label ORDER BY label) AS negatives
    FROM negatives WHERE source = $1 AND split = $2 GROUP BY idx
), ns AS (
    SELECT idx, list({{'start': start, 'end': stop, 'label': label}} ORDER BY start, stop, label)
               AS negative_spans
    FROM negative_spans WHERE source = $1 AND split = $2 GROUP BY idx
)
SELECT s.sentence_id AS id, s.tokens,
       coalesce(m.spans, {empty_spans}) AS spans,
       coalesce(n.negatives, []::VARCHAR[]) AS negatives,
       coalesce(ns.negative_spans, {empty_spans}) AS negative_spans
FROM sentences s
LEFT JOIN m ON s.idx = m.idx
LEFT JOIN n ON s.idx = n.idx
LEFT JOIN ns ON s.idx = ns.idx
WHERE s.source = $1 AND s.split = $2
ORDER BY s.idx
"""


def _subset_query(labels: list[str], caps: Mapping[str, int] | None) -> tuple[str, pa.Table]:
    """`Store.subset_rows`' SQL, and its `_selected` table (label, cap: NULL = whole)."""
    whole = sorted(set(labels))
    kept = set(whole)
    capped = {lab: int(n) for lab, n in sorted((caps or {}).items()) if lab not in kept}
    selected = pa.table(
        {
            "label": pa.array([*whole, *capped], pa.string()),
            "cap": pa.array([None] * len(whole) + list(capped.values()), pa.int64()),
        }
    )
    sql = _SUBSET_SQL.format(
        order=_SPLIT_ORDER_SQL.format(col="split"),
        s_order=_SPLIT_ORDER_SQL.format(col="s.split"),
        empty_spans=_EMPTY_SPANS,
    )
    return sql, selected


def _vector_rows(model: str, labels: pa.Array, vectors: np.ndarray) -> pa.Table:
    """(model, label, vector) rows for the embeddings table."""
    n, dim = vectors.shape
    offsets = pa.array(np.arange(0, (n + 1) * dim, dim, dtype=np.int32))
    vec = pa.ListArray.from_arrays(offsets, pa.array(vectors.reshape(-1), pa.float32()))
    return pa.table({"model": pa.array([model] * n, pa.string()), "label": labels, "vector": vec})


def default_db_path() -> Path:
    return Path(os.environ.get(DB_ENV, DEFAULT_DB))


def lock_wait() -> float:
    """Seconds a command waits for a store another process holds: $LABELSHIFT_LOCK_WAIT, else
    `DEFAULT_LOCK_WAIT_S`."""
    text = os.environ.get(LOCK_WAIT_ENV, "").strip()
    if not text:
        return DEFAULT_LOCK_WAIT_S
    try:
        seconds = float(text)
    except ValueError:
        raise StoreError(f"{LOCK_WAIT_ENV}={text!r}: give the seconds to wait, e.g. 60") from None
    if not seconds >= 0:  # NaN too
        raise StoreError(f"{LOCK_WAIT_ENV}={text!r}: give the seconds to wait, e.g. 60")
    return seconds


def _connect(
    path: Path,
    read_only: bool,
    wait: float | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> duckdb.DuckDBPyConnection:
    """DuckDB's connection to the store file, its refusals said in one line with the fix.

    While another process holds a lock that excludes this connection (a writer; or, for a
    read-write connection, any reader), it is tried again for up to `wait` seconds (default:
    `lock_wait()`); `on_wait` is told once who holds the store."""
    deadline = None
    while True:
        try:
            return _connect_once(path, read_only)
        except duckdb.Error as exc:
            if not _LOCKED.search(str(exc)):
                raise StoreError(open_failure(path, exc, writing=not read_only)) from exc
            if deadline is None:
                wait = lock_wait() if wait is None else wait
                deadline = time.monotonic() + wait
                if on_wait is not None and wait > 0:
                    who, _ = _holders(path, exc, not read_only)
                    on_wait(
                        f"{path}: the store is in use by {who}; waiting up to {wait:g} s for "
                        f"it ({LOCK_WAIT_ENV}=SECONDS sets how long)"
                    )
            left = deadline - time.monotonic()
            if left <= 0:
                raise StoreError(
                    open_failure(path, exc, writing=not read_only, waited=wait or 0)
                ) from exc
            time.sleep(min(_LOCK_POLL_S, left))


def _connect_once(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """One attempt: a StoreError for DuckDB's memory settings, DuckDB's error for others."""
    config: dict[str, str | bool | int | float | list[str]] = {}
    limit = memory_limit()
    if limit:  # DuckDB caches what it reads up to its limit (by default 80% of the RAM)
        config["memory_limit"] = limit
    try:
        return duckdb.connect(str(path), read_only=read_only, config=config)
    except duckdb.ParserException as exc:  # only the config is parsed here
        raise StoreError(
            f"{MEMORY_ENV}={limit!r}: not a memory size DuckDB reads (e.g. 4GB): {exc}"
        ) from exc
    except duckdb.OutOfMemoryException as exc:
        where = (
            f"{MEMORY_ENV}={limit!r}"
            if os.environ.get(MEMORY_ENV)
            else (f"DuckDB's limit {limit or 'default'} (set {MEMORY_ENV} for another)")
        )
        raise StoreError(f"{path}: cannot open the store within {where}: {exc}") from exc


_LOCKED = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")
#: DuckDB's hint, to a read-write connection, that the holder only reads.
_READER_HINT = "would be able to open this database in read-only mode"


def open_failure(path: Path, exc: Exception, *, writing: bool = True, waited: float = 0) -> str:
    """Why DuckDB could not open the store, in one line, with what to do.

    Args:
        writing: whether the connection was to write (a lock held by a reader excludes it).
        waited: how long the lock was waited for."""
    text = str(exc)
    if _LOCKED.search(text):
        who, reads = _holders(path, exc, writing)
        clash = ", and this command writes to it" if reads else ""
        how_long = f"waited {waited:g} s; " if waited else ""
        return (
            f"{path}: the store is in use by {who}{clash}: wait for it to finish "
            f"({how_long}{LOCK_WAIT_ENV}=SECONDS sets how long a command waits), or pass "
            "--db another store"
        )
    if is_damage(exc):
        return damaged(path, exc)
    first = text.splitlines()[0]
    if isinstance(exc, duckdb.IOException):
        return f"{path}: cannot read the store ({first}): check the file and its folder"
    return (
        f"{path}: not a store this DuckDB can open ({first}): restore it from a copy, or "
        "ingest the sources again into a new --db"
    )


def _holders(path: Path, exc: Exception, writing: bool) -> tuple[str, bool]:
    """Who holds the store's lock, as words (`process 12 (builders stats), which reads it`),
    and whether they only read it. The kernel's lock table names every holder (Linux); else
    DuckDB's error names one."""
    found = _LOCKED.search(str(exc))
    assert found is not None
    program = {int(found.group(2)): found.group(1)}  # DuckDB names one holder's program
    reads = writing and _READER_HINT in str(exc)
    held = lock_holders(path) or [(int(found.group(2)), not reads)]
    writers = [pid for pid, writes in held if writes]
    pids = writers or [pid for pid, _ in held]
    named = [
        f"{pid} ({_command_of(str(pid)) or program.get(pid, 'command unknown')})"
        for pid in pids[:3]
    ]
    if len(pids) > 3:
        named.append(f"{len(pids) - 3} more")
    if len(pids) == 1:
        return f"process {named[0]}, which {'writes to' if writers else 'reads'} it", not writers
    verb = "write to" if writers else "read"
    return f"processes {', '.join(named)}, which {verb} it", not writers


def lock_holders(path: Path) -> list[tuple[int, bool]]:
    """(pid, whether it writes) of every process holding a lock on the file, from Linux'
    /proc/locks (DuckDB takes a read lock to read a store and a write lock to write it);
    empty elsewhere or when the file is gone."""
    try:
        st = path.stat()
        table = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return []
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    found: dict[int, bool] = {}
    for line in table.splitlines():
        fields = line.split()
        if "->" in fields or len(fields) < 6 or fields[5] != where:  # "->": a waiter
            continue
        pid = int(fields[4]) if fields[4].lstrip("-").isdigit() else -1
        if pid > 0 and pid != os.getpid():
            found[pid] = found.get(pid, False) or fields[3] == "WRITE"
    return sorted(found.items())


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
        "sources again into a new --db"
    )


#: What DuckDB says of a write the machine refused, and the fix.
_WRITE_FIXES = {
    "No space left on device": "free space there, or pass --db a store on another disk",
    "Disk quota exceeded": "free space within your quota, or pass --db a store on another disk",
    "File too large": "raise the file size limit (`ulimit -f`), or pass --db a store on "
    "another disk",
    "Read-only file system": "pass --db a store on a writable disk",
    "Permission denied": "pass --db a store in a folder you can write to",
    "Input/output error": "the disk reported an error: check it, then run the command again",
}


def write_failure(path: Path | str, exc: Exception) -> str:
    """One line for a write DuckDB could not make (the transaction was rolled back)."""
    first = str(exc).splitlines()[0]
    if "No space left on device" in first:
        return (
            f"{path}: no space left on the device while writing the store; nothing was "
            f"written: {_WRITE_FIXES['No space left on device']}"
        )
    fix = next((f for cause, f in _WRITE_FIXES.items() if cause in first), None)
    return f"{path}: could not write the store ({first}); nothing was written" + (
        f": {fix}" if fix else ""
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


def _kept_in_wal(path: Path, exc: Exception) -> str:
    wal = wal_path(path)
    cause = _cause(exc)
    fix = (
        f"set {MEMORY_ENV} higher"
        if _out_of_memory(exc)
        else "free space or raise the file size limit"
    )
    return (
        f"{path}: the write is kept in {wal.name} but could not be folded into the store file "
        f"({cause}): keep {wal.name} beside the store (copy both or neither); {fix}, then "
        f"`builders stats --db {path}` folds it in"
    )


def _out_of_memory(exc: Exception) -> bool:
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
class _FileState:
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
    def of(cls, fd: int) -> _FileState:
        os.lseek(fd, 0, os.SEEK_SET)
        return cls(os.fstat(fd).st_size, os.read(fd, cls.HEAD))

    def restore(self, path: Path, fd: int) -> bool:
        """The store as it was, if its headers still are: the .wal removed (what decides),
        then the file cut back to its size, both by path (no descriptor of the file is
        closed). False, nothing touched, when a header changed or the .wal stays."""
        try:
            now = _FileState.of(fd)
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


def _command_of(pid: str) -> str | None:
    """The command line of a running process (Linux), or None."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    args = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    shown = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(args))
    return " ".join(shown.split())[:400] or None  # one line, however the command was typed


class Store(OverlapQueries):
    """A connection to the span store. Use as a context manager or call `close()`.

    DuckDB lets one process write a store, or any number of processes read it. A `shared`
    store reads through a read-only connection, so that other commands can read beside it
    during a long computation: each write (`transaction()`) takes the write lock only while it
    runs, and label vectors (`add_vectors`) are held in memory until `flush_vectors()` writes
    them in one short transaction.

    The leakage queries and the decontaminated view come from `OverlapQueries`."""

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

        Args:
            read_only: share the store with other readers; nothing can be written.
            create: make a new store when there is none at `path` (only where something
                will be ingested: a command that only reads never leaves an empty store).
            shared: read with a read-only connection; write only for the length of each
                write (see the class).
            wait: seconds to wait for a store another process holds (default: `lock_wait()`,
                read when one is found held).
            on_wait: told once, in words, who holds a store that is waited for.
        """
        self.path = Path(path) if path is not None else default_db_path()
        if (read_only or not create) and not self.path.exists():
            raise StoreError(
                f"{self.path}: no store here: run `builders ingest SOURCE --db {self.path}` "
                "first, or pass --db the store you meant"
            )
        self.shared = shared and not read_only and str(path) != ":memory:"
        self._wait = wait
        self._on_wait = on_wait
        self._pending: dict[str, list[tuple[pa.Array, np.ndarray]]] = {}
        self._writing = False
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
            if _out_of_memory(exc):
                raise StoreError(memory_failure(exc)) from exc
            if machine_refused(exc):
                raise StoreError(write_failure(self.path, exc)) from exc
            raise StoreError(open_failure(self.path, exc)) from exc
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
        """Read every row of every table, so that DuckDB verifies every block's checksum.

        Returns: table -> rows. Raises StoreError naming the damaged table.
        """
        rows = {}
        for table in TABLES:
            sql = f"SELECT count(*), sum(hash(t)) FROM {table} t"
            try:
                rows[table] = one(self.con.execute(sql))[0]
            except duckdb.Error as exc:
                if not is_damage(exc):
                    raise
                raise StoreError(damaged(self.path, exc, table)) from exc
        return rows

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """All of the block's writes, or (on any error, a full disk included) none. A shared
        store holds the write lock for the block only (waiting for readers to finish).

        The write is folded from the .wal into the store file before the block ends: a disk
        that takes the .wal but not the file's growth (a full disk, a file size limit), at the
        commit or at its checkpoint, is refused like one that takes neither (`_refused`)."""
        with self._writable():
            before = self._settled()
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
                raise StoreError(write_failure(self.path, exc)) from exc
            try:
                self.con.execute("CHECKPOINT")  # DuckDB's on close says nothing of a failure
            except duckdb.Error as exc:
                if isinstance(exc, duckdb.FatalException):  # DuckDB stopped the database
                    self._refused(exc, before, committed=True)
                # else another transaction of this process is open: DuckDB folds it later

    def checkpoint(self) -> None:
        """Fold what the store's .wal holds into the store file.

        Raises:
            StoreError: the disk refused it (the writes stay in the .wal).
        """
        try:
            self.con.execute("CHECKPOINT")
        except duckdb.Error as exc:
            if machine_refused(exc) or isinstance(exc, duckdb.FatalException):
                raise StoreError(_kept_in_wal(self.path, exc)) from exc
            raise

    def _settled(self) -> _FileState | None:
        """The store file's state before a write, when its .wal holds nothing: what a write
        the disk cannot fold in is undone to. None: a store in memory, on Windows (no POSIX
        locks, no truncating an open file), or whose .wal holds earlier writes."""
        if os.name == "nt" or self.path.name == ":memory:":
            return None
        if wal_holds_writes(self.path):
            return None
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except OSError:
                return None
        return _FileState.of(self._fd)

    def _let_go(self) -> None:
        """Close the store file's descriptor `_settled` opened, once DuckDB's connection is
        closed (closing it before would release DuckDB's lock: see `_FileState`)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _refused(self, exc: duckdb.Error, before: _FileState | None, committed: bool) -> NoReturn:
        """The machine refused the write at its commit or its checkpoint, or DuckDB stopped
        the database at its checkpoint (`committed`: the .wal holds it).

        While the store file's headers are `before`'s, the .wal is dropped and the file cut
        back, before the connection lets go of the file's lock: the store as it was, and
        "nothing was written". Else a committed write stays in the .wal, and the error says
        to keep it. A refused write of a database DuckDB did not stop is not undone under
        it (its close would fold the .wal in): its rollback already left the data as it was.

        Raises:
            StoreError: always.
        """
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
            raise StoreError(_kept_in_wal(self.path, exc)) from exc
        if _out_of_memory(exc):
            raise StoreError(memory_failure(exc)) from exc
        raise StoreError(write_failure(self.path, exc)) from exc

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

    # ------------------------------------------------------------------ queries
    def has_source(self, source: str) -> bool:
        row = one(self.con.execute("SELECT 1 FROM sources WHERE source = ? LIMIT 1", [source]))
        return row is not None

    def older_reads(self, source: str | None = None) -> list[tuple[str, str, str, str, str]]:
        """(source, split, reader, stored version, current version) of every stored split that
        an older version of its reader read (it reads that input differently now)."""
        from builders.sources import SOURCES

        rows = self.con.execute(
            "SELECT source, split, spec, loader_version FROM sources "
            "WHERE spec IS NOT NULL AND (? IS NULL OR source = ?) ORDER BY source, split",
            [source, source],
        ).fetchall()
        return [
            (src, split, spec, str(ver), SOURCES[spec].loader_version)
            for src, split, spec, ver in rows
            if spec in SOURCES and str(ver) != SOURCES[spec].loader_version
        ]

    def older_read_notes(self, source: str | None = None) -> list[str]:
        """`older_reads` as sentences to show a user."""
        return [
            f"{src}/{split} was read by version {was} of the {reader} reader, which now reads "
            f"differently (version {now}); ingest it again to re-read it "
            f"(`builders ingest {reader} --path ... --name {src}`)"
            for src, split, reader, was, now in self.older_reads(source)
        ]

    def require_source(self, source: str) -> None:
        if not self.has_source(source):
            raise StoreError(self.missing_source(source))

    def missing_source(self, source: str) -> str:
        """Why `source` cannot be read from this store, and the ingest that adds it: its own
        name where it names a reader, else a reader's with `--name`."""
        from builders.sources import SOURCES

        known = self.source_names()
        holds = f"it holds: {', '.join(known)}" if known else "it holds no source"
        if source in SOURCES:
            how = f"`builders ingest {source} --db {self.path}`"
        else:
            how = (
                f"`builders ingest columns --path FILE --name {source} --db {self.path}` "
                "(or another reader: `builders sources`)"
            )
        return f"source {source!r} is not in {self.path} ({holds}): ingest it first, {how}"

    # ------------------------------------------------------------------ DataFrames
    def frame(self, sql: str, params: list[Any] | None = None) -> pl.DataFrame:
        """Any query over the store as a polars DataFrame (for notebooks and scripts)."""
        return self.con.sql(sql, params=params or []).pl()

    def labels_frame(self, source: str) -> pl.DataFrame:
        """label, mentions, sentences, raw spellings of a source; most frequent first."""
        self.require_source(source)
        return self.frame(
            "SELECT label, count(*) AS mentions, count(DISTINCT (split, idx)) AS sentences, "
            "list(DISTINCT raw_label ORDER BY raw_label) AS raw_labels "
            "FROM mentions WHERE source = ? GROUP BY label ORDER BY mentions DESC, label",
            [source],
        )

    def spans_frame(self, source: str, split: str | None = None) -> pl.DataFrame:
        """One row per mention with its sentence id and the mention text."""
        return self._span_rows("mentions", source, split)

    def negative_spans_frame(self, source: str, split: str | None = None) -> pl.DataFrame:
        """One row per span-level negative (a span that is NOT of its label), with its text."""
        return self._span_rows("negative_spans", source, split)

    def _span_rows(self, table: str, source: str, split: str | None) -> pl.DataFrame:
        self.require_source(source)
        where, params = "m.source = ?", [source]
        if split:
            where += " AND m.split = ?"
            params.append(split)
        return self.frame(
            "SELECT s.sentence_id, m.split, m.start, m.stop, "
            "array_to_string(s.tokens[m.start + 1 : m.stop], ' ') AS text, m.label, m.raw_label "
            f"FROM {table} m JOIN sentences s USING (source, split, idx) "
            f"WHERE {where} ORDER BY m.split, m.idx, m.start, m.stop, m.label",
            params,
        )

    def label_counts(
        self,
        source: str,
        splits: list[str] | None = None,
        top: int | None = None,
        *,
        by: str = "mentions",
    ) -> list[tuple[str, int, int]]:
        """(label, mentions, sentences) of a source.

        `by="mentions"`: most frequent first, ties by label; `by="label"`: by label text.
        """
        self.require_source(source)
        where, params = "source = ?", [source]
        if splits:
            where += f" AND split IN ({','.join('?' * len(splits))})"
            params += splits
        order = "label" if by == "label" else "mentions DESC, label"
        sql = (
            "SELECT label, count(*) AS mentions, count(DISTINCT (split, idx)) AS sentences "
            f"FROM mentions WHERE {where} GROUP BY label ORDER BY {order}"
        )
        if top:
            sql += f" LIMIT {int(top)}"
        return [(r[0], int(r[1]), int(r[2])) for r in self.con.execute(sql, params).fetchall()]

    def label_mentions(self, source: str) -> list[tuple[str, int]]:
        """(label, mentions) of a source, by label text: `label_counts` without the sentence
        counts, which cost most of its time on a large corpus."""
        self.require_source(source)
        sql = "SELECT label, count(*) FROM mentions WHERE source = ? GROUP BY label ORDER BY label"
        return [(r[0], int(r[1])) for r in self.con.execute(sql, [source]).fetchall()]

    def label_coarse(self, source: str) -> dict[str, str | None]:
        """label -> its coarse type (Few-NERD) or None, for every label of a source."""
        rows = self.con.execute(
            "SELECT label, any_value(coarse) FROM mentions WHERE source = ? GROUP BY label",
            [source],
        ).fetchall()
        return {r[0]: r[1] for r in rows}

    def count_types(self, source: str, split: str | None = None) -> int:
        """Distinct labels of a source (or of one of its splits)."""
        where, params = (
            ("source = ? AND split = ?", [source, split]) if split else ("source = ?", [source])
        )
        return int(
            one(
                self.con.execute(
                    f"SELECT count(DISTINCT label) FROM mentions WHERE {where}", params
                )
            )[0]
        )

    def count_sentences(self, source: str) -> int:
        return int(
            one(self.con.execute("SELECT count(*) FROM sentences WHERE source = ?", [source]))[0]
        )

    def splits_of(self, source: str) -> list[str]:
        """The stored splits of a source, train / dev / test first."""
        rows = self.con.execute(
            "SELECT DISTINCT split FROM sentences WHERE source = ?", [source]
        ).fetchall()
        return sorted((r[0] for r in rows), key=split_rank)

    def stored_splits(self, source: str) -> dict[str, StoredSplit]:
        """What each stored split of `source` holds: counts, options, inputs, report."""
        rows = self.con.execute(
            "SELECT split, fingerprint, options, n_sentences, n_mentions, n_negatives, "
            "n_negative_spans, report, inputs, origin, spec, loader_version FROM sources "
            "WHERE source = ?",
            [source],
        ).fetchall()
        return {
            r[0]: StoredSplit(
                fingerprint=r[1],
                options=json.loads(r[2]),
                sentences=int(r[3]),
                mentions=int(r[4]),
                negatives=int(r[5]),
                negative_spans=int(r[6]),
                report=json.loads(r[7]),
                inputs=json.loads(r[8]),
                origin=r[9],
                spec=r[10],
                loader_version=r[11],
            )
            for r in rows
        }

    def checksums(self) -> dict[str, tuple[int, int]]:
        """(rows, order-independent sum of row hashes) of every table: equal before and after
        an operation that must not change the store (a failed ingest)."""
        out = {}
        for table in TABLES:
            n, h = one(self.con.execute(f"SELECT count(*), sum(hash(t)::HUGEINT) FROM {table} t"))
            out[table] = (int(n), int(h or 0))
        return out

    def fingerprints(self, source: str | None = None) -> list[tuple[str, str, str]]:
        """(source, split, fingerprint) of every stored split (of one source), sorted."""
        where, params = ("WHERE source = ?", [source]) if source else ("", [])
        return [
            (r[0], r[1], r[2])
            for r in self.con.execute(
                f"SELECT source, split, fingerprint FROM sources {where} ORDER BY source, split",
                params,
            ).fetchall()
        ]

    # ------------------------------------------------------------------ rows
    def subset_rows(
        self, source: str, labels: list[str], caps: Mapping[str, int] | None = None
    ) -> pa.Table:
        """The rows of a label subset, in corpus order (METHOD.md section 4).

        A sentence is kept if it has a mention of one of `labels`; only those mentions are
        kept, and only the negatives among the labels kept (whole or capped): label-level ones
        (types asked about with no answer) and span-level ones (spans that are NOT of their
        label; one equal to a stored mention is left out).
        `caps` (label -> mentions) adds labels kept in part: each only in its first sentences
        (in corpus order) until that many of its mentions are in (the last one may pass it).
        A label both in `labels` and in `caps` is kept whole; each label counts once.
        Columns: id, tokens, spans [{start, end, label}] (`end` exclusive), negatives,
        negative_spans [{start, end, label}] (`end` exclusive).
        """
        sql, selected = _subset_query(labels, caps)
        with self._registered("_selected", selected):
            return self.con.sql(sql, params=[source]).to_arrow_table()

    @contextmanager
    def subset_reader(
        self,
        source: str,
        labels: list[str],
        caps: Mapping[str, int] | None = None,
        batch_rows: int = 100_000,
    ) -> Iterator[pa.RecordBatchReader]:
        """`subset_rows` as a reader of record batches (up to `batch_rows` rows each, in the
        same order): a subset of a large corpus is written out without holding it in memory.
        Read it whole inside the block."""
        sql, selected = _subset_query(labels, caps)
        with self._registered("_selected", selected):
            rel = self.con.sql(sql, params=[source])
            # DuckDB 2 names it to_arrow_reader (its fetch_arrow_reader is deprecated); 1.x has
            # only fetch_arrow_reader
            to_reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader
            reader = to_reader(batch_rows)
            try:
                yield reader
            finally:  # the connection takes no other work while a result is open
                reader.close()

    @contextmanager
    def source_reader(
        self, source: str, split: str, batch_rows: int = 100_000
    ) -> Iterator[pa.RecordBatchReader]:
        """Every sentence of one stored split, in corpus order, in `subset_rows`' columns: its
        mentions, label-level and span-level negatives as stored (none left out), as record
        batches. Read it whole inside the block."""
        rel = self.con.sql(_SOURCE_SQL.format(empty_spans=_EMPTY_SPANS), params=[source, split])
        to_reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader
        reader = to_reader(batch_rows)
        try:
            yield reader
        finally:
            reader.close()

    def split_labels(self, source: str, split: str) -> list[str]:
        """The distinct labels of one split's mentions, sorted."""
        rows = self.con.execute(
            "SELECT DISTINCT label FROM mentions WHERE source = ? AND split = ? ORDER BY label",
            [source, split],
        ).fetchall()
        return [r[0] for r in rows]

    def sentence_labels(self, source: str) -> list[tuple[str, int, list[str]]]:
        """(split, idx, distinct labels) of every sentence with a mention, in corpus order."""
        rows = self.con.execute(
            "SELECT split, idx, list(DISTINCT label ORDER BY label) FROM mentions "
            f"WHERE source = ? GROUP BY split, idx "
            f"ORDER BY {_SPLIT_ORDER_SQL.format(col='split')}, split, idx",
            [source],
        ).fetchall()
        return [(r[0], int(r[1]), list(r[2])) for r in rows]

    def sentences_with_spans(
        self, source: str, split: str | None = None, *, with_mentions_only: bool = False
    ) -> list[tuple[str, int, list[str], list[tuple[int, int, str]]]]:
        """(split, idx, tokens, [(start, stop, label)]) in corpus order, spans by offset."""
        where, params = "s.source = ?", [source]
        if split is not None:
            where += " AND s.split = ?"
            params.append(split)
        join = "JOIN" if with_mentions_only else "LEFT JOIN"
        rows = self.con.execute(
            "SELECT s.split, s.idx, s.tokens, "
            "list((m.start, m.stop, m.label) ORDER BY m.start, m.stop, m.label) "
            "FILTER (WHERE m.label IS NOT NULL) "
            f"FROM sentences s {join} mentions m "
            "ON m.source = s.source AND m.split = s.split AND m.idx = s.idx "
            f"WHERE {where} GROUP BY s.split, s.idx, s.tokens "
            f"ORDER BY {_SPLIT_ORDER_SQL.format(col='s.split')}, s.split, s.idx",
            params,
        ).fetchall()
        return [
            (sp, int(idx), list(tokens), [(int(a), int(b), lab) for a, b, lab in spans or []])
            for sp, idx, tokens, spans in rows
        ]

    # ------------------------------------------------------------------ embedding cache
    def cached_vectors(self, model: str, labels: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """(positions into `labels`, float32 vectors) of the labels cached for `model` (in
        the store, or held in memory to be written: `add_vectors` on a shared store).

        Raises:
            StoreError: when the cache holds vectors of several lengths for the model.
        """
        pos, vectors = self._stored_vectors(model, labels)
        held = self._held(model)
        if held is None or len(pos) == len(labels):
            return pos, vectors
        rest = np.setdiff1d(np.arange(len(labels)), pos)
        at = pc.index_in(labels.take(pa.array(rest)), value_set=held[0])
        hit = at.is_valid().to_numpy(zero_copy_only=False)
        if not hit.any():
            return pos, vectors
        more = held[1][at.fill_null(0).to_numpy(zero_copy_only=False)[hit]]
        if len(pos) and more.shape[1] != vectors.shape[1]:
            raise StoreError(f"embedding cache holds vectors of several lengths for {model!r}")
        both = np.concatenate([vectors.reshape(-1, more.shape[1]), more])
        return np.concatenate([pos, rest[hit]]), both

    def _stored_vectors(self, model: str, labels: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """`cached_vectors` of the store's table alone."""
        query = pa.table({"pos": pa.array(np.arange(len(labels), dtype=np.int64)), "label": labels})
        with self._registered("_emb_query", query):
            hit = self.con.sql(
                "SELECT q.pos, e.vector FROM _emb_query q JOIN embeddings e "
                "ON e.model = ? AND e.label = q.label",
                params=[model],
            ).to_arrow_table()
        pos = hit.column("pos").to_numpy()
        if not len(pos):
            return pos, np.zeros((0, 0), dtype=np.float32)
        lengths = pc.list_value_length(hit.column("vector"))
        dims = pc.min_max(lengths).as_py()
        if dims["min"] != dims["max"]:
            raise StoreError(f"embedding cache holds vectors of several lengths for {model!r}")
        flat = hit.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        return pos, flat.astype(np.float32, copy=False).reshape(len(pos), dims["max"])

    def add_vectors(self, model: str, labels: pa.Array, vectors: np.ndarray) -> None:
        """Cache `vectors` (one row per label) for `model`, in one statement; a shared store
        holds them in memory until `flush_vectors()`."""
        if self.shared:
            if isinstance(labels, pa.ChunkedArray):
                labels = labels.combine_chunks()
            parts = self._pending.setdefault(model, [])
            if parts and parts[0][1].shape[1] != vectors.shape[1]:
                raise StoreError(f"vectors of several lengths given for {model!r}")
            parts.append((labels, np.asarray(vectors, dtype=np.float32)))
            return
        with self._registered("_emb_new", _vector_rows(model, labels, vectors)):
            sql = "INTO embeddings SELECT model, label, vector FROM _emb_new"
            try:  # one statement, one transaction
                self.con.execute("INSERT " + sql)
            except duckdb.ConstraintException:  # a concurrent writer got there first
                self.con.execute("INSERT OR IGNORE " + sql)  # ten times slower: a fallback

    @property
    def pending_vectors(self) -> int:
        """Label vectors held in memory, not yet written to the store (a shared store's)."""
        return sum(len(labels) for parts in self._pending.values() for labels, _ in parts)

    def _held(self, model: str) -> tuple[pa.Array, np.ndarray] | None:
        """The labels and vectors held in memory for `model`, joined into one part."""
        parts = self._pending.get(model)
        if not parts:
            return None
        if len(parts) > 1:
            labels = pa.concat_arrays([p[0] for p in parts])
            parts[:] = [(labels, np.concatenate([p[1] for p in parts]))]
        return parts[0]

    def flush_vectors(self, *, close: bool = False) -> int:
        """Write the label vectors held in memory in one transaction (those another process
        cached meanwhile are kept as they are); returns how many were held. With `close`, the
        store is closed after the write (a shared store does not open to read again).

        Raises:
            StoreError: the store stayed locked for the wait, or the write failed; the vectors
                are still held then.
        """
        models = [m for m in self._pending if self._held(m) is not None]
        n = self.pending_vectors
        if not models:
            if close:
                self.close()
            return 0
        with self._writable(reopen=not close), self.transaction() as con:
            for model in models:
                held = self._held(model)
                assert held is not None
                with self._registered("_emb_new", _vector_rows(model, *held)):
                    con.execute(
                        "INSERT INTO embeddings SELECT n.model, n.label, n.vector FROM _emb_new n "
                        "ANTI JOIN embeddings e ON e.model = n.model AND e.label = n.label"
                    )
        self._pending.clear()
        if close:
            self.close()
        return n

    def drop_vectors(self, model: str) -> int:
        """Forget every cached vector of `model`; returns how many there were."""
        self._pending.pop(model, None)
        (n,) = one(self.con.execute("SELECT count(*) FROM embeddings WHERE model = ?", [model]))
        with self.transaction() as con:
            con.execute("DELETE FROM embeddings WHERE model = ?", [model])
        return int(n)

    @contextmanager
    def _registered(self, name: str, table: pa.Table) -> Iterator[None]:
        self.con.register(name, table)
        try:
            yield
        finally:
            self.con.unregister(name)

    def stats(self) -> dict[str, Any]:
        rows = self.con.execute(
            "SELECT source, any_value(kind), sum(n_sentences), sum(n_mentions), sum(n_negatives), "
            f"list(split ORDER BY {_SPLIT_ORDER_SQL.format(col='split')}, split), "
            "sum(n_negative_spans) FROM sources GROUP BY source ORDER BY source"
        ).fetchall()
        types = dict(
            self.con.execute(
                "SELECT source, count(DISTINCT label) FROM mentions GROUP BY source"
            ).fetchall()
        )
        emb = self.con.execute(
            "SELECT model, count(*) FROM embeddings GROUP BY model ORDER BY model"
        ).fetchall()
        return {
            "db": str(self.path),
            "sources": [
                {
                    "source": r[0],
                    "kind": r[1],
                    "sentences": int(r[2]),
                    "mentions": int(r[3]),
                    "negatives": int(r[4]),
                    "negative_spans": int(r[6]),
                    "types": int(types.get(r[0], 0)),
                    "splits": list(r[5]),
                }
                for r in rows
            ],
            "embeddings": {m: int(n) for m, n in emb},
        }
