"""The store's connection: DuckDB opened with the store's memory limit, a store another
process holds waited for, and its refusals said in one line naming the holders and the fix."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from builders.deferred import duckdb
from builders.errors import (
    StoreDamaged,
    StoreError,
    StoreLocked,
    StoreOutOfMemory,
    StoreUnreadable,
    opt,
)
from builders.store.failures import damaged, is_damage
from builders.store.settings import LOCK_WAIT_ENV, MEMORY_ENV, lock_wait, memory_limit

#: Seconds between two attempts to open a locked store.
_LOCK_POLL_S = 0.2


def _connect(
    path: Path, read_only: bool, wait: float | None, on_wait: Callable[[str], None] | None
) -> duckdb.DuckDBPyConnection:
    """DuckDB's connection to the store file, its refusals said in one line with the fix. While
    another process holds a lock that excludes it, it is tried again for up to `wait` seconds
    (default: `lock_wait()`); `on_wait` is told once who holds the store."""
    deadline = None
    while True:
        try:
            return _connect_once(path, read_only)
        except duckdb.Error as exc:
            if not _LOCKED.search(str(exc)):
                raise open_error(path, exc, writing=not read_only) from exc
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
                raise open_error(path, exc, writing=not read_only, waited=wait or 0) from exc
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
        raise StoreOutOfMemory(f"{path}: cannot open the store within {where}: {exc}") from exc


_LOCKED = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")
#: DuckDB's hint, to a read-write connection, that the holder only reads.
_READER_HINT = "would be able to open this database in read-only mode"


def open_failure(path: Path, exc: Exception, *, writing: bool = True, waited: float = 0) -> str:
    """Why DuckDB could not open the store, in one line, with what to do (`writing`: the
    connection was to write; `waited`: how long the lock was waited for)."""
    text = str(exc)
    if _LOCKED.search(text):
        who, reads = _holders(path, exc, writing)
        clash = ", and this command writes to it" if reads else ""
        how_long = f"waited {waited:g} s; " if waited else ""
        return (
            f"{path}: the store is in use by {who}{clash}: wait for it to finish "
            f"({how_long}{LOCK_WAIT_ENV}=SECONDS sets how long a command waits), or pass "
            f"{opt('db')} another store"
        )
    if is_damage(exc):
        return damaged(path, exc)
    first = text.splitlines()[0]
    if isinstance(exc, duckdb.IOException):
        return f"{path}: cannot read the store ({first}): check the file and its folder"
    return (
        f"{path}: not a store this DuckDB can open ({first}): restore it from a copy, or "
        f"ingest the sources again into a new {opt('db')}"
    )


def open_error(
    path: Path, exc: Exception, *, writing: bool = True, waited: float = 0
) -> StoreError:
    """`open_failure` as its typed error: `StoreLocked`, `StoreDamaged` or `StoreUnreadable`."""
    kind: type[StoreError] = (
        StoreLocked
        if _LOCKED.search(str(exc))
        else StoreDamaged
        if is_damage(exc)
        else StoreUnreadable
    )
    return kind(open_failure(path, exc, writing=writing, waited=waited))


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


def _command_of(pid: str) -> str | None:
    """The command line of a running process (Linux), or None."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    args = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    shown = " ".join(Path(a).name if i == 0 else a for i, a in enumerate(args))
    return " ".join(shown.split())[:400] or None  # one line, however the command was typed
