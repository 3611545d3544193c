"""The per-user leakage-scan cache: a scan's tables, reused while its inputs are unchanged.

    cache = ScanCache.default()             # None when LABELSHIFT_SCANS=off
    tables = cache.get(key)                 # OverlapTables, or None
    cache.put(key, description, tables)

A scan (`Store.overlap_tables`) reads the whole training corpus; its result depends only on
the corpus's stored splits, the benchmarks' evaluation splits, the n-gram length and whether
texts are kept. Its key (`scan_key`) is the sha256 of those: each split's fingerprint (input
bytes, reader version, options and label map: `builders.store.writer`), when it was ingested
(`--replace` reads the same input anew) and its counts, the scan's version, this package's and
DuckDB's (whose `lower`, `nfc_normalize` and `hash` make the keys).

An entry is a folder named by its key holding `key.json` (what the key hashes) and one parquet
file per table, written under a temporary name and renamed into place whole, as the vector
cache's shards are, and evicted and recovered from alike (`builders.shift.vector_cache`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from builders import __version__
from builders.deferred import pa, pq
from builders.errors import CacheWarning
from builders.files import rename_into_place, temp_dir
from builders.shift.vector_cache import abandoned, cache_place, file_size, mtime, touch
from builders.store.overlap import OverlapTables

#: The cache's folder, or `off` to use none.
SCANS_ENV = "LABELSHIFT_SCANS"
#: Its size bound: bytes, or a number with K, M, G or T (powers of 1024).
MAX_ENV = "LABELSHIFT_SCANS_MAX"
DEFAULT_MAX = 2 << 30
#: Bump when the scan's tables change for the same inputs.
SCAN_VERSION = 1
_PARTS = ("sentences", "pairs", "mentions", "surface_labels")
_KEY_FILE = "key.json"
_TMP = ".tmp-"


def scan_key(description: Mapping[str, Any]) -> str:
    """The key of a scan described by `description` (JSON-able; see `Store.scan_inputs`)."""
    import duckdb

    versions = {"scan": SCAN_VERSION, "builders": __version__, "duckdb": duckdb.__version__}
    text = json.dumps({**versions, **description}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class ScanCache:
    """Scan tables on disk, one folder per key."""

    def __init__(self, root: Path, max_bytes: int = DEFAULT_MAX):
        self.root = root
        self.max_bytes = max_bytes

    @classmethod
    def default(cls) -> ScanCache | None:
        """The user's cache, from the environment; None when it is switched off."""
        place = cache_place(SCANS_ENV, MAX_ENV, DEFAULT_MAX, "scans")
        return cls(*place) if place else None

    def get(self, key: str) -> OverlapTables | None:
        """The tables stored under `key`, or None (an unreadable entry is removed, warned)."""
        folder = self.root / key
        if not (folder / _KEY_FILE).is_file():
            return None
        try:
            tables = {p: pq.read_table(folder / f"{p}.parquet") for p in _PARTS}
        except FileNotFoundError:  # evicted or cleared by another run meanwhile
            return None
        except (OSError, pa.ArrowException) as exc:
            warnings.warn(
                f"removed an unreadable leakage-scan cache entry {folder}: {exc}",
                CacheWarning,
                stacklevel=2,
            )
            shutil.rmtree(folder, ignore_errors=True)
            return None
        touch(folder / _KEY_FILE)
        return OverlapTables(**tables)

    def put(self, key: str, description: Mapping[str, Any], tables: OverlapTables) -> None:
        """Store `tables` under `key` (kept as is when another run stored it first)."""
        try:
            with temp_dir(self.root / key, prefix=f"{_TMP}{os.getpid()}-") as tmp:
                for part in _PARTS:
                    table = getattr(tables, part)
                    pq.write_table(table, tmp / f"{part}.parquet", compression="zstd")
                (tmp / _KEY_FILE).write_text(json.dumps(description, indent=1, sort_keys=True))
                rename_into_place(tmp, self.root / key, lambda t: (t / _KEY_FILE).is_file())
            self._evict(keep=self.root / key)
        except (OSError, pa.ArrowException) as exc:
            warnings.warn(
                f"could not write the leakage-scan cache in {self.root}: {exc}; the scan's "
                "results stand, the next scan will not reuse them",
                CacheWarning,
                stacklevel=2,
            )

    def entries(self) -> list[tuple[str, int, float]]:
        """(key, bytes, last used) of every complete entry, most recently used first; the
        temporary entries of gone writers are removed."""
        out = []
        for folder in self._folders():
            out.append((folder.name, _tree_size(folder), mtime(folder / _KEY_FILE)))
        return sorted(out, key=lambda e: -e[2])

    def clear(self) -> tuple[int, int]:
        """Remove every entry; returns (entries, bytes) removed."""
        entries = self.entries()
        for key, _, _ in entries:
            shutil.rmtree(self.root / key, ignore_errors=True)
        return len(entries), sum(size for _, size, _ in entries)

    def _evict(self, keep: Path) -> None:
        """Remove the least recently used entries but `keep` until within the bound."""
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        for key, size, _ in reversed(entries):
            if total <= self.max_bytes:
                return
            if self.root / key != keep:
                shutil.rmtree(self.root / key, ignore_errors=True)
                total -= size

    def _folders(self) -> list[Path]:
        try:
            paths = sorted(self.root.iterdir())
        except OSError:
            return []
        for path in paths:
            if path.name.startswith(_TMP) and abandoned(path, _TMP):
                shutil.rmtree(path, ignore_errors=True)
        return [p for p in paths if not p.name.startswith(".") and (p / _KEY_FILE).is_file()]


def _tree_size(folder: Path) -> int:
    try:
        return sum(file_size(path) for path in folder.iterdir())
    except OSError:  # removed by another run meanwhile
        return 0
