"""The per-user embedding cache: label vectors shared by every store and by `familiarity_of`.

    cache = VectorCache.default()            # None when LABELSHIFT_EMBEDDINGS=off
    positions, vectors = cache.lookup(key, labels)
    cache.add(key, new_labels, new_vectors)

Each cache key (`Embedder.cache_key`) has a folder named by the key's hash, holding `key.txt`
(the key) and parquet shards of (label, vector). A shard is written whole under a temporary
name and renamed into place, so a reader sees a shard entire or not at all, whatever runs
beside it or is killed with -9; a label held by two shards (two runs embedded it at once) is
read from the oldest one. Past the size bound the least recently used keys' shards go first.
The cache is an accelerator: a shard that cannot be read is removed, and a write that fails
leaves the run's results as they are, each with a warning.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path

from builders.deferred import np, pa, pc, pq
from builders.errors import CacheWarning, InvalidValue
from builders.files import atomic_path, atomic_write_text
from builders.processes import pid_alive
from builders.shift.models import cache_root

#: The cache's folder, or `off` to use none.
EMBEDDINGS_ENV = "LABELSHIFT_EMBEDDINGS"
#: Its size bound: bytes, or a number with K, M, G or T (powers of 1024).
MAX_ENV = "LABELSHIFT_EMBEDDINGS_MAX"
DEFAULT_MAX = 4 << 30
#: Shards of one key merged into one past this many.
MAX_SHARDS = 8
#: Passes over a key's shards when others merge or evict them meanwhile.
LIST_TRIES = 5
#: A temporary shard whose writer is gone is removed after this many seconds.
STALE_TMP_S = 3600.0
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_KEY_FILE = "key.txt"
_TMP = ".tmp-"


def parse_size(text: str, env: str = MAX_ENV) -> int:
    """`4G`, `500M`, `123456` -> bytes (`env`: the variable it was read from, for the error)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", text.upper())
    if not m:
        raise InvalidValue(f"{env}={text!r} is not a size: give bytes, or e.g. 500M, 4G")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


@dataclass(frozen=True)
class CacheEntry:
    """One key's share of the cache."""

    key: str
    labels: int
    shards: int
    bytes: int
    last_used: float

    @property
    def parts(self) -> dict[str, str]:
        """model, backend, precision, device, rows, weights (`Embedder.cache_key`'s parts)."""
        names = ("model", "backend", "precision", "device", "rows", "weights")
        return dict(zip(names, self.key.split("|"), strict=False))


class VectorCache:
    """Label vectors by cache key, in parquet shards under `root` (see the module's doc)."""

    def __init__(self, root: Path, max_bytes: int = DEFAULT_MAX):
        self.root = Path(root)
        self.max_bytes = max_bytes

    @classmethod
    def default(cls) -> VectorCache | None:
        """The user's cache, from the environment; None when it is switched off."""
        place = cache_place(EMBEDDINGS_ENV, MAX_ENV, DEFAULT_MAX, "embeddings")
        return cls(*place) if place else None

    def folder(self, key: str) -> Path:
        return self.root / hashlib.sha256(key.encode()).hexdigest()[:24]

    # ------------------------------------------------------------------ reading
    def lookup(self, key: str, labels: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """(positions into `labels`, float32 vectors) of the labels cached under `key`.
        `labels` are distinct. A shard another run merged or evicted while it was being read
        is looked for again in the shards listed then (the merged one holds its labels)."""
        folder = self.folder(key)
        found = np.zeros(len(labels), dtype=bool)
        vectors: np.ndarray | None = None
        for _ in range(LIST_TRIES):
            vectors, vanished = self._scan(folder, labels, found, vectors)
            if not vanished or found.all():
                break
        pos = np.flatnonzero(found)
        if vectors is None or not len(pos):
            return pos, np.zeros((0, 0), dtype=np.float32)
        touch(folder / _KEY_FILE)
        return pos, vectors[pos]

    def _scan(
        self, folder: Path, labels: pa.Array, found: np.ndarray, vectors: np.ndarray | None
    ) -> tuple[np.ndarray | None, bool]:
        """One pass over the key's shards, oldest first, filling `found` and the vectors;
        also says whether a listed shard was gone when read."""
        vanished = False
        for shard in self._shards(folder) if len(labels) else []:
            got = self._read(shard, labels)
            if got is None:
                vanished = vanished or not shard.exists()
                continue
            rows, at, block = got
            if vectors is None:
                vectors = np.zeros((len(labels), block.shape[1]), dtype=np.float32)
            if block.shape[1] != vectors.shape[1]:
                warnings.warn(
                    f"{shard}: {block.shape[1]}-d vectors beside {vectors.shape[1]}-d "
                    "ones; left unread",
                    CacheWarning,
                    stacklevel=3,
                )
                continue
            fresh = ~found[at]
            vectors[at[fresh]] = block[rows[fresh]]
            found[at[fresh]] = True
            if found.all():
                break
        return vectors, vanished

    def _read(
        self, shard: Path, labels: pa.Array
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(shard rows, their positions in `labels`, the shard's vectors) for the shard's labels
        that `labels` holds; None when the shard is gone or unreadable (an unreadable one is
        removed, with a warning)."""
        try:
            table = pq.read_table(shard)
            block = _matrix(table.column("vector"))
            at = pc.index_in(table.column("label"), value_set=labels).fill_null(-1)
        except FileNotFoundError:  # merged or evicted by another run meanwhile
            return None
        except (OSError, pa.ArrowException, KeyError, ValueError) as exc:
            _unreadable(shard, exc)
            return None
        idx = np.asarray(at.to_numpy(zero_copy_only=False), dtype=np.int64)
        rows = np.flatnonzero(idx >= 0)
        _, first = np.unique(idx[rows], return_index=True)  # a label once per shard
        rows = rows[np.sort(first)]
        return rows, idx[rows], block

    def entries(self) -> list[CacheEntry]:
        """Every key's labels, shards, bytes and last use, most recently used first."""
        out = []
        for folder in self._folders():
            try:
                key = (folder / _KEY_FILE).read_text(encoding="utf-8")
                used = (folder / _KEY_FILE).stat().st_mtime
            except OSError:
                continue
            shards = self._shards(folder)
            rows = sum(_rows(s) for s in shards)
            size = sum(file_size(s) for s in shards)
            out.append(CacheEntry(key, rows, len(shards), size, used))
        return sorted(out, key=lambda e: -e.last_used)

    def size(self) -> int:
        return sum(file_size(s) for f in self._folders() for s in self._shards(f))

    # ------------------------------------------------------------------ writing
    def add(self, key: str, labels: pa.Array, vectors: np.ndarray) -> None:
        """Cache `vectors` (one row per label) under `key`: one new shard, then merging and
        eviction as needed. A failure is a warning: the cache is only an accelerator."""
        if not len(labels):
            return
        try:
            folder = self.folder(key)
            folder.mkdir(parents=True, exist_ok=True)
            _write_key(folder, key)
            _write_shard(folder, _table(labels, vectors))
            shards = self._shards(folder)
            if len(shards) > MAX_SHARDS:
                self._merge(folder, shards)
            self._evict(keep=folder)
        except OSError as exc:
            warnings.warn(
                f"embedding cache not written ({self.root}): {exc}", CacheWarning, stacklevel=2
            )

    def _merge(self, folder: Path, shards: list[Path]) -> None:
        """One shard holding every label of `shards` once (the oldest vector), then the old ones
        removed: a reader listing them meanwhile finds the merged one or the old ones."""
        seen: set[str] = set()
        parts = []
        for shard in shards:
            try:
                table = pq.read_table(shard)
            except FileNotFoundError:
                continue
            except (OSError, pa.ArrowException) as exc:
                _unreadable(shard, exc)
                continue
            labels = table.column("label").to_pylist()
            keep = [i for i, lab in enumerate(labels) if lab not in seen]
            seen.update(labels)
            parts.append(table.take(pa.array(keep, pa.int64())))
        if parts:
            _write_shard(folder, pa.concat_tables(parts), prefix="0")  # sorts before new shards
        for shard in shards:
            shard.unlink(missing_ok=True)

    def _evict(self, keep: Path) -> None:
        """Remove the least recently used keys' shards (whole keys, then `keep`'s oldest
        shards but its newest) until the cache is within its bound."""
        total = self.size()
        if total <= self.max_bytes:
            return
        folders = sorted(self._folders(), key=lambda f: mtime(f / _KEY_FILE))
        folders = [f for f in folders if f != keep] + [keep]
        for folder in folders:
            shards = self._shards(folder)
            if folder == keep:
                shards = shards[:-1]
            for shard in shards:
                total -= file_size(shard)
                shard.unlink(missing_ok=True)
                if total <= self.max_bytes:
                    return

    def clear(self, model: str | None = None) -> tuple[int, int]:
        """Remove every key's shards, or those of one model (its canonical name); returns
        (keys, bytes) removed."""
        keys = removed = 0
        for entry in self.entries():
            if model is not None and entry.parts.get("model") != model:
                continue
            folder = self.folder(entry.key)
            for path in sorted(folder.iterdir()) if folder.is_dir() else []:
                removed += file_size(path)
                path.unlink(missing_ok=True)
            folder.rmdir() if folder.is_dir() and not any(folder.iterdir()) else None
            keys += 1
        return keys, removed

    # ------------------------------------------------------------------ listing
    def _folders(self) -> list[Path]:
        try:
            return sorted(p for p in self.root.iterdir() if (p / _KEY_FILE).is_file())
        except OSError:
            return []

    def _shards(self, folder: Path) -> list[Path]:
        """The key's complete shards, oldest first; temporary ones of gone writers removed."""
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return []
        for name in names:  # temporary shards of gone writers, or older than an hour
            if name.startswith(_TMP) and abandoned(folder / name, _TMP):
                (folder / name).unlink(missing_ok=True)
        return [folder / n for n in names if n.endswith(".parquet") and not n.startswith(".")]


def _table(labels: pa.Array, vectors: np.ndarray) -> pa.Table:
    dim = vectors.shape[1]
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1), pa.float32())
    return pa.table(
        {"label": labels.cast(pa.string()), "vector": pa.FixedSizeListArray.from_arrays(flat, dim)}
    )


def _matrix(column: pa.ChunkedArray) -> np.ndarray:
    arr = column.combine_chunks()
    if not pa.types.is_fixed_size_list(arr.type) or arr.null_count:
        raise ValueError(f"vector column is {arr.type}, not fixed-size lists of floats")
    flat = arr.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    return flat.reshape(len(arr), arr.type.list_size)


def _write_shard(folder: Path, table: pa.Table, prefix: str = "") -> Path:
    """Write `table` as a new shard (`files.atomic_path`: whole, or not at all)."""
    stamp = f"{prefix}{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    target = folder / f"{stamp}.parquet"
    with atomic_path(target, prefix=f"{_TMP}{os.getpid()}-") as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return target


def _write_key(folder: Path, key: str) -> None:
    path = folder / _KEY_FILE
    if path.is_file():
        touch(path)
        return
    atomic_write_text(path, key, prefix=f"{_TMP}{os.getpid()}-")


def cache_place(env: str, max_env: str, default_max: int, name: str) -> tuple[Path, int] | None:
    """A per-user cache's folder and size bound: `$env` (`off`, `0`, `none` or `false`: no
    cache, None), else `<cache root>/name` (`models.cache_root`); `$max_env`, else
    `default_max`."""

    where = os.environ.get(env, "").strip()
    if where.lower() in {"off", "0", "none", "false"}:
        return None
    root = Path(where).expanduser() if where else cache_root() / name
    size = os.environ.get(max_env, "").strip()
    return root, parse_size(size, max_env) if size else default_max


def abandoned(path: Path, prefix: str) -> bool:
    """Whether a temporary entry named `<prefix><pid>-...` is left by a process that is gone,
    or is older than `STALE_TMP_S`."""
    try:
        pid = int(path.name[len(prefix) :].split("-")[0])
        return not pid_alive(pid) or time.time() - path.stat().st_mtime > STALE_TMP_S
    except (ValueError, OSError):
        return False


def _unreadable(shard: Path, exc: Exception) -> None:
    warnings.warn(
        f"removed an unreadable embedding cache shard {shard}: {exc}", CacheWarning, stacklevel=2
    )
    shard.unlink(missing_ok=True)


def touch(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(path)


def mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _rows(path: Path) -> int:
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (OSError, pa.ArrowException):
        return 0
