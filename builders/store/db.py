"""The DuckDB span store: one schema for every corpus and benchmark.

Tables (token offsets, `stop` exclusive; a sentence is keyed by (source, split, idx)):

    sources(source, split, kind, origin, fingerprint, loader_version, options, ingested_at,
            n_sentences, n_mentions, n_negatives, report)
    sentences(source, split, idx, sentence_id, tokens VARCHAR[], raw_id)
    mentions(source, split, idx, start, stop, label, raw_label, coarse)
    negatives(source, split, idx, label, raw_label)
    embeddings(model, label, vector FLOAT[])          -- the embedding cache
    label_counts (view): source, label, mentions, sentences

This module owns the schema, the connection and the queries; `builders.store.writer` writes a
source into it (one transaction per ingest) and `builders.store.ingest` decides where it is read from.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from builders.errors import StoreError

SCHEMA_VERSION = 1
DEFAULT_DB = "labelshift.duckdb"
DB_ENV = "LABELSHIFT_DB"

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
