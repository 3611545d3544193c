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
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from builders.defaults import SPLITS, split_rank
from builders.errors import StoreError
from builders.store.schema import SCHEMA_VERSION, TABLES, one, stored_version
from builders.store.schema import create as create_schema

__all__ = ["DB_ENV", "DEFAULT_DB", "SCHEMA_VERSION", "Store", "StoredSplit", "one"]
from builders.store.overlap import OverlapQueries

DEFAULT_DB = "labelshift.duckdb"
DB_ENV = "LABELSHIFT_DB"
#: The most memory DuckDB may use (its `memory_limit`, e.g. `8GB`); `duckdb`: DuckDB's own
#: default (80% of the RAM).
MEMORY_ENV = "LABELSHIFT_MEMORY_LIMIT"
#: DuckDB's limit when MEMORY_ENV is unset (or none where 80% of the RAM is less). DuckDB
#: keeps what it read cached up to its limit: at 10x NuNER a warm build-splits peaked at 8.0 GB
#: with DuckDB's default and 6.2 GB with 4 GB, and ran no slower (112 s and 102 s). What
#: outgrows the limit spills to disk beside the store.
DEFAULT_MEMORY_LIMIT_GB = 4


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


def default_db_path() -> Path:
    return Path(os.environ.get(DB_ENV, DEFAULT_DB))


def _connect(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """DuckDB's connection to the store file, its refusals said in one line with the fix."""
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
    except duckdb.Error as exc:
        raise StoreError(open_failure(path, exc)) from exc


_LOCKED = re.compile(r"Conflicting lock is held in (.*?) \(PID (\d+)\)")


def open_failure(path: Path, exc: Exception) -> str:
    """Why DuckDB could not open the store, in one line, with what to do."""
    text = str(exc)
    held = _LOCKED.search(text)
    if held:
        pid = held.group(2)
        return (
            f"{path}: the store is in use by process {pid} ({_command_of(pid) or held.group(1)}),"
            " which writes to it: wait for it to finish, or pass --db another store"
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


def write_failure(path: Path | str, exc: Exception) -> str:
    """One line for a write DuckDB could not make (the transaction was rolled back)."""
    first = str(exc).splitlines()[0]
    if "No space left on device" in first:
        return (
            f"{path}: no space left on the device while writing the store; nothing was "
            "written: free space there, or pass --db a store on another disk"
        )
    return f"{path}: could not write the store ({first}); nothing was written"


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

    The leakage queries and the decontaminated view come from `OverlapQueries`."""

    def __init__(
        self, path: str | Path | None = None, read_only: bool = False, create: bool = True
    ):
        """Open the store at `path` (default: $LABELSHIFT_DB or ./labelshift.duckdb).

        Args:
            read_only: share the store with other readers; nothing can be written.
            create: make a new store when there is none at `path` (only where something
                will be ingested: a command that only reads never leaves an empty store).
        """
        self.path = Path(path) if path is not None else default_db_path()
        if (read_only or not create) and not self.path.exists():
            raise StoreError(
                f"{self.path}: no store here: run `builders ingest SOURCE --db {self.path}` "
                "first, or pass --db the store you meant"
            )
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = _connect(self.path, read_only)
        try:
            if stored_version(self.con, self.path) is None and not read_only:
                create_schema(self.con)
        except duckdb.Error as exc:
            self.con.close()
            raise StoreError(open_failure(self.path, exc)) from exc
        except BaseException:
            self.con.close()
            raise

    def close(self) -> None:
        self.con.close()
        wal = self.path.with_name(self.path.name + ".wal")
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
        """All of the block's writes, or (on any error, a full disk included) none."""
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
            raise StoreError(write_failure(self.path, exc)) from exc

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
            known = self.source_names()
            raise StoreError(
                f"source {source!r} is not in {self.path}; run `builders ingest {source}` first"
                + (f" (the store holds: {', '.join(known)})" if known else "")
            )

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
            empty_spans="""[]::STRUCT("start" INTEGER, "end" INTEGER, label VARCHAR)[]""",
        )
        with self._registered("_selected", selected):
            return self.con.sql(sql, params=[source]).to_arrow_table()

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
        """(positions into `labels`, float32 vectors) of the labels cached for `model`.

        Raises:
            StoreError: when the cache holds vectors of several lengths for the model.
        """
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
        """Cache `vectors` (one row per label) for `model`, in one statement."""
        n, dim = vectors.shape
        offsets = pa.array(np.arange(0, (n + 1) * dim, dim, dtype=np.int32))
        vec = pa.ListArray.from_arrays(offsets, pa.array(vectors.reshape(-1), pa.float32()))
        rows = pa.table(
            {"model": pa.array([model] * n, pa.string()), "label": labels, "vector": vec}
        )
        with self._registered("_emb_new", rows):
            sql = "INTO embeddings SELECT model, label, vector FROM _emb_new"
            try:  # one statement, one transaction
                self.con.execute("INSERT " + sql)
            except duckdb.ConstraintException:  # a concurrent writer got there first
                self.con.execute("INSERT OR IGNORE " + sql)  # ten times slower: a fallback

    def drop_vectors(self, model: str) -> int:
        """Forget every cached vector of `model`; returns how many there were."""
        (n,) = one(self.con.execute("SELECT count(*) FROM embeddings WHERE model = ?", [model]))
        self.con.execute("DELETE FROM embeddings WHERE model = ?", [model])
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
