"""The store's settings from the environment: where it is, how much memory DuckDB may use
and how long a command waits for a store another process holds."""

from __future__ import annotations

import os
from pathlib import Path

from builders.defaults import DB_ENV, DEFAULT_DB
from builders.errors import StoreError

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
        seconds = -1.0
    if not seconds >= 0:  # NaN too
        raise StoreError(f"{LOCK_WAIT_ENV}={text!r}: give the seconds to wait, e.g. 60")
    return seconds
