"""The DuckDB span store: one schema for every corpus and benchmark.

Tables (token offsets, `stop` exclusive; a sentence is keyed by (source, split, idx)):

    sources(source, split, kind, origin, fingerprint, loader_version, options, ingested_at,
            n_sentences, n_mentions, n_negatives, report)
    sentences(source, split, idx, sentence_id, tokens VARCHAR[], raw_id)
    mentions(source, split, idx, start, stop, label, raw_label, coarse)
    negatives(source, split, idx, label, raw_label)
    embeddings(model, label, vector FLOAT[])          -- the embedding cache
    label_counts (view): source, label, mentions, sentences

Ingesting a source is one transaction: every split of it lands, or nothing changes. A split
whose fingerprint (input bytes + loader version + options) is unchanged is not re-read.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from builders.errors import SourceFormatError, StoreError
from builders.sources import SourceSpec
from builders.sources.base import Example, ReadReport

SCHEMA_VERSION = 1
DEFAULT_DB = "labelshift.duckdb"
DB_ENV = "LABELSHIFT_DB"
BATCH = 50_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS sources(
    source VARCHAR, split VARCHAR, kind VARCHAR, origin VARCHAR, fingerprint VARCHAR,
    loader_version VARCHAR, options VARCHAR, ingested_at TIMESTAMP,
    n_sentences BIGINT, n_mentions BIGINT, n_negatives BIGINT, report VARCHAR,
    PRIMARY KEY (source, split));
CREATE TABLE IF NOT EXISTS sentences(
    source VARCHAR, split VARCHAR, idx INTEGER, sentence_id VARCHAR, tokens VARCHAR[],
    raw_id VARCHAR);
CREATE TABLE IF NOT EXISTS mentions(
    source VARCHAR, split VARCHAR, idx INTEGER, start INTEGER, stop INTEGER,
    label VARCHAR, raw_label VARCHAR, coarse VARCHAR);
CREATE TABLE IF NOT EXISTS negatives(
    source VARCHAR, split VARCHAR, idx INTEGER, label VARCHAR, raw_label VARCHAR);
CREATE TABLE IF NOT EXISTS embeddings(
    model VARCHAR, label VARCHAR, vector FLOAT[], PRIMARY KEY (model, label));
CREATE OR REPLACE VIEW label_counts AS
    SELECT source, label, count(*) AS mentions,
           count(DISTINCT (split, idx)) AS sentences
    FROM mentions GROUP BY source, label;
"""


def one(cursor: duckdb.DuckDBPyConnection) -> Any:
    """The first row of a result, consuming it whole (DuckDB 2 refuses new work on a
    connection with an unfinished result)."""
    rows = cursor.fetchall()
    return rows[0] if rows else None


def default_db_path() -> Path:
    return Path(os.environ.get(DB_ENV, DEFAULT_DB))


@dataclass
class SplitResult:
    split: str
    files: list[str]
    status: str  # "ingested" | "unchanged"
    sentences: int
    mentions: int
    negatives: int
    types: int
    report: dict[str, Any] = field(default_factory=dict)


@dataclass
class IngestResult:
    source: str
    kind: str
    status: str  # "ingested" | "unchanged"
    splits: list[SplitResult]
    types: int = 0

    @property
    def sentences(self) -> int:
        return sum(s.sentences for s in self.splits)

    @property
    def mentions(self) -> int:
        return sum(s.mentions for s in self.splits)

    @property
    def negatives(self) -> int:
        return sum(s.negatives for s in self.splits)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": self.kind,
            "status": self.status,
            "sentences": self.sentences,
            "mentions": self.mentions,
            "negatives": self.negatives,
            "types": self.types,
            "splits": {
                s.split: {
                    "status": s.status,
                    "files": s.files,
                    "sentences": s.sentences,
                    "mentions": s.mentions,
                    "negatives": s.negatives,
                    "types": s.types,
                    "report": s.report,
                }
                for s in self.splits
            },
        }


def fingerprint(spec: SourceSpec, files: list[Path], options: dict[str, Any]) -> str:
    """Hash of the input bytes, the loader version and the options that shape the output."""
    h = hashlib.sha256()
    h.update(f"{spec.module}\0{spec.loader_version}\0".encode())
    h.update(json.dumps(_jsonable({**spec.options, **options}), sort_keys=True).encode())
    for path in files:
        h.update(b"\0" + path.name.encode() + b"\0")
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


class Store:
    """A connection to the span store. Use as a context manager or call `close()`."""

    def __init__(self, path: str | Path | None = None, read_only: bool = False):
        self.path = Path(path) if path is not None else default_db_path()
        if read_only and not self.path.exists():
            raise StoreError(f"{self.path}: no store here yet; run `builders ingest` first")
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot open the store: {exc}") from exc
        if not read_only:
            self.con.execute(_SCHEMA)
            self._check_version()

    def _check_version(self) -> None:
        row = one(self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'"))
        if row is None:
            self.con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        elif row[0] != str(SCHEMA_VERSION):
            raise StoreError(
                f"{self.path}: store schema version {row[0]}, this toolkit writes "
                f"{SCHEMA_VERSION}; delete the file or point --db elsewhere"
            )

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield self.con
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    # ------------------------------------------------------------------ ingestion
    def ingest(
        self,
        spec: SourceSpec,
        files: dict[str, list[Path]],
        *,
        name: str | None = None,
        options: dict[str, Any] | None = None,
        replace: bool = False,
        origin: str | None = None,
        progress: Callable[[int], None] | None = None,
        examples: Callable[[str, list[Path], ReadReport], Iterable[tuple[Path, Example]]]
        | None = None,
    ) -> IngestResult:
        """Ingest the given split files of a source in one transaction.

        Args:
            spec: the registered source.
            files: split -> files, as `SourceSpec.discover` returns.
            name: the name to store it under (default: the source name).
            options: reader options beyond the spec's own (e.g. `repair=True`).
            replace: re-read even when the fingerprint is unchanged.
            origin: where the data came from (path or Hub id), recorded in `sources`.
            progress: called with the number of examples read since the last call.
            examples: alternative example producer (used by the `hf` source).
        """
        source = name or spec.name
        options = dict(options or {})
        reader_opts = {**spec.options, **options}
        plans: list[tuple[str, list[Path], str]] = []
        unchanged: list[str] = []
        for split, paths in sorted(files.items()):
            fp = (
                fingerprint(spec, paths, options)
                if paths
                else "hub:" + json.dumps(_jsonable(reader_opts), sort_keys=True)
            )
            old = one(
                self.con.execute(
                    "SELECT fingerprint FROM sources WHERE source = ? AND split = ?",
                    [source, split],
                )
            )
            if old is not None and old[0] == fp and not replace:
                unchanged.append(split)
            else:
                plans.append((split, paths, fp))

        results: dict[str, SplitResult] = {}
        if plans:
            with self.transaction():
                for split, paths, fp in plans:
                    report = ReadReport()
                    if examples is not None:
                        stream = examples(split, paths, report)
                    else:
                        stream = self._read_files(spec, paths, report, reader_opts)
                    results[split] = self._write_split(
                        spec, source, split, paths, fp, stream, report, origin, options, progress
                    )
        for split in unchanged:
            results[split] = self._split_counts(source, split, files[split], "unchanged")
        ordered = [results[s] for s in sorted(results, key=_split_order)]
        types = one(
            self.con.execute(
                "SELECT count(DISTINCT label) FROM mentions WHERE source = ?", [source]
            )
        )[0]
        return IngestResult(
            source=source,
            kind=spec.kind,
            status="ingested" if plans else "unchanged",
            splits=ordered,
            types=int(types),
        )

    @staticmethod
    def _read_files(
        spec: SourceSpec, paths: list[Path], report: ReadReport, opts: dict[str, Any]
    ) -> Iterator[tuple[Path, Example]]:
        read = spec.reader()
        for path in paths:
            for ex in read(path, report, **opts):
                yield path, ex

    def _write_split(
        self,
        spec: SourceSpec,
        source: str,
        split: str,
        paths: list[Path],
        fp: str,
        stream: Iterable[tuple[Path, Example]],
        report: ReadReport,
        origin: str | None,
        options: dict[str, Any],
        progress: Callable[[int], None] | None,
    ) -> SplitResult:
        con = self.con
        for table in ("sentences", "mentions", "negatives", "sources"):
            con.execute(f"DELETE FROM {table} WHERE source = ? AND split = ?", [source, split])
        label_cache: dict[str, tuple[str, str | None]] = {}
        buf = _Buffers(source, split)
        n_sent = n_ment = n_neg = 0
        last_path: Path | None = None
        for path, ex in stream:
            last_path = path
            if not ex.tokens:
                raise SourceFormatError(path, ex.line, "sentence has no tokens")
            n = len(ex.tokens)
            idx = n_sent
            buf.sentence(idx, ex.tokens, ex.raw_id)
            for start, stop, raw in ex.spans:
                if not (0 <= start < stop <= n):
                    raise SourceFormatError(
                        path,
                        ex.line,
                        f"span outside its sentence of {n} tokens (start, stop exclusive)",
                        (start, stop, raw),
                    )
                mapped = label_cache.get(raw)
                if mapped is None:
                    mapped = spec.map_label(raw)
                    if not mapped[0]:
                        raise SourceFormatError(path, ex.line, "empty label", raw)
                    label_cache[raw] = mapped
                buf.mention(idx, start, stop, mapped[0], raw, mapped[1])
                n_ment += 1
            for raw in ex.negatives:
                mapped = label_cache.get(raw) or spec.map_label(raw)
                if not mapped[0]:
                    raise SourceFormatError(path, ex.line, "empty label", raw)
                label_cache[raw] = mapped
                buf.negative(idx, mapped[0], raw)
                n_neg += 1
            n_sent += 1
            if len(buf) >= BATCH:
                buf.flush(con)
                if progress:
                    progress(BATCH)
        if n_sent == 0:
            where = last_path or (paths[0] if paths else Path(source))
            raise SourceFormatError(where, None, "empty input: no sentences found")
        if progress:
            progress(len(buf))
        buf.flush(con)
        types = one(
            con.execute(
                "SELECT count(DISTINCT label) FROM mentions WHERE source = ? AND split = ?",
                [source, split],
            )
        )[0]
        rep = {"counts": dict(sorted(report.counts.items())), "notes": report.notes}
        con.execute(
            "INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                source,
                split,
                spec.kind,
                origin or ",".join(str(p) for p in paths) or spec.origin,
                fp,
                spec.loader_version,
                json.dumps(_jsonable(options), sort_keys=True),
                _dt.datetime.now(_dt.UTC).replace(tzinfo=None),
                n_sent,
                n_ment,
                n_neg,
                json.dumps(rep, sort_keys=True),
            ],
        )
        return SplitResult(
            split, [str(p) for p in paths], "ingested", n_sent, n_ment, n_neg, int(types), rep
        )

    def _split_counts(self, source: str, split: str, paths: list[Path], status: str) -> SplitResult:
        row = one(
            self.con.execute(
                "SELECT n_sentences, n_mentions, n_negatives, report FROM sources "
                "WHERE source = ? AND split = ?",
                [source, split],
            )
        )
        types = one(
            self.con.execute(
                "SELECT count(DISTINCT label) FROM mentions WHERE source = ? AND split = ?",
                [source, split],
            )
        )[0]
        return SplitResult(
            split,
            [str(p) for p in paths],
            status,
            int(row[0]),
            int(row[1]),
            int(row[2]),
            int(types),
            json.loads(row[3]),
        )

    # ------------------------------------------------------------------ queries
    def has_source(self, source: str) -> bool:
        row = one(self.con.execute("SELECT 1 FROM sources WHERE source = ? LIMIT 1", [source]))
        return row is not None

    def require_source(self, source: str) -> None:
        if not self.has_source(source):
            known = [
                r[0] for r in self.con.execute("SELECT DISTINCT source FROM sources").fetchall()
            ]
            raise StoreError(
                f"source {source!r} is not in {self.path}; run `builders ingest {source}` first"
                + (f" (the store holds: {', '.join(sorted(known))})" if known else "")
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
        self.require_source(source)
        where, params = "m.source = ?", [source]
        if split:
            where += " AND m.split = ?"
            params.append(split)
        return self.frame(
            "SELECT s.sentence_id, m.split, m.start, m.stop, "
            "array_to_string(s.tokens[m.start + 1 : m.stop], ' ') AS text, m.label, m.raw_label "
            "FROM mentions m JOIN sentences s USING (source, split, idx) "
            f"WHERE {where} ORDER BY m.split, m.idx, m.start, m.stop, m.label",
            params,
        )

    def label_counts(
        self, source: str, splits: list[str] | None = None, top: int | None = None
    ) -> list[tuple[str, int, int]]:
        """(label, mentions, sentences) of a source, most frequent first, ties by label."""
        self.require_source(source)
        where, params = "source = ?", [source]
        if splits:
            where += f" AND split IN ({','.join('?' * len(splits))})"
            params += splits
        sql = (
            "SELECT label, count(*) AS mentions, count(DISTINCT (split, idx)) AS sentences "
            f"FROM mentions WHERE {where} GROUP BY label ORDER BY mentions DESC, label"
        )
        if top:
            sql += f" LIMIT {int(top)}"
        return [(r[0], int(r[1]), int(r[2])) for r in self.con.execute(sql, params).fetchall()]

    def stats(self) -> dict[str, Any]:
        rows = self.con.execute(
            "SELECT source, any_value(kind), sum(n_sentences), sum(n_mentions), sum(n_negatives), "
            "list(split ORDER BY split) FROM sources GROUP BY source ORDER BY source"
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
                    "types": int(types.get(r[0], 0)),
                    "splits": list(r[5]),
                }
                for r in rows
            ],
            "embeddings": {m: int(n) for m, n in emb},
        }


def _split_order(split: str) -> tuple[int, str]:
    return ({"train": 0, "dev": 1, "test": 2}.get(split, 3), split)


class _Buffers:
    """Column buffers flushed to DuckDB as Arrow tables (no row-by-row INSERTs).

    Token lists are kept flat with offsets (building a list array from nested Python lists
    costs several times more); source, split and sentence ids are filled in by SQL.
    """

    def __init__(self, source: str, split: str):
        self.source, self.split = source, split
        self._reset()

    def _reset(self) -> None:
        self.s_idx: list[int] = []
        self.s_off: list[int] = [0]
        self.s_flat: list[str] = []
        self.s_raw: list[str | None] = []
        self.m_idx: list[int] = []
        self.m_start: list[int] = []
        self.m_stop: list[int] = []
        self.m_label: list[str] = []
        self.m_raw: list[str] = []
        self.m_coarse: list[str | None] = []
        self.n_idx: list[int] = []
        self.n_label: list[str] = []
        self.n_raw: list[str] = []

    def __len__(self) -> int:
        return len(self.s_idx)

    def sentence(self, idx: int, tokens: list[str], raw_id: str | None) -> None:
        self.s_idx.append(idx)
        self.s_flat.extend(tokens)
        self.s_off.append(len(self.s_flat))
        self.s_raw.append(raw_id)

    def mention(
        self, idx: int, start: int, stop: int, label: str, raw: str, coarse: str | None
    ) -> None:
        self.m_idx.append(idx)
        self.m_start.append(start)
        self.m_stop.append(stop)
        self.m_label.append(label)
        self.m_raw.append(raw)
        self.m_coarse.append(coarse)

    def negative(self, idx: int, label: str, raw: str) -> None:
        self.n_idx.append(idx)
        self.n_label.append(label)
        self.n_raw.append(raw)

    def flush(self, con: duckdb.DuckDBPyConnection) -> None:
        if not self.s_idx:
            return
        key = [self.source, self.split]
        tokens = pa.ListArray.from_arrays(
            pa.array(self.s_off, pa.int32()), pa.array(self.s_flat, pa.string())
        )
        sents = pa.table(
            {
                "idx": pa.array(self.s_idx, pa.int32()),
                "tokens": tokens,
                "raw_id": pa.array(self.s_raw, pa.string()),
            }
        )
        con.register("_batch_sentences", sents)
        con.execute(
            "INSERT INTO sentences SELECT $1, $2, idx, $1 || '/' || $2 || '/' || idx, tokens, "
            "raw_id FROM _batch_sentences",
            key,
        )
        con.unregister("_batch_sentences")
        if self.m_idx:
            ments = pa.table(
                {
                    "idx": pa.array(self.m_idx, pa.int32()),
                    "start": pa.array(self.m_start, pa.int32()),
                    "stop": pa.array(self.m_stop, pa.int32()),
                    "label": pa.array(self.m_label, pa.string()),
                    "raw_label": pa.array(self.m_raw, pa.string()),
                    "coarse": pa.array(self.m_coarse, pa.string()),
                }
            )
            con.register("_batch_mentions", ments)
            con.execute(
                "INSERT INTO mentions SELECT $1, $2, idx, start, stop, label, raw_label, coarse "
                "FROM _batch_mentions",
                key,
            )
            con.unregister("_batch_mentions")
        if self.n_idx:
            negs = pa.table(
                {
                    "idx": pa.array(self.n_idx, pa.int32()),
                    "label": pa.array(self.n_label, pa.string()),
                    "raw_label": pa.array(self.n_raw, pa.string()),
                }
            )
            con.register("_batch_negatives", negs)
            con.execute(
                "INSERT INTO negatives SELECT $1, $2, idx, label, raw_label FROM _batch_negatives",
                key,
            )
            con.unregister("_batch_negatives")
        self._reset()
