"""The span store's schema: its tables and its version (`meta.schema_version`); a store of
another version is refused before anything in it is touched (no migration: ingest again)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builders.defaults import SPLITS
from builders.deferred import duckdb
from builders.errors import StoreError, opt

#: 2: span-level negatives (`negative_spans`), each split's inputs (`sources.inputs`) and the
#: registered source that read it (`sources.spec`)
SCHEMA_VERSION = 2

#: SQL that orders a split column train, dev, test, then other names.
SPLIT_ORDER_SQL = (
    "CASE {col} " + " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(SPLITS)) + " ELSE 9 END"
)

#: The `label_counts` view over a `mentions` table (the stored one, or a decontaminated view).
LABEL_COUNTS = (
    "SELECT source, label, count(*) AS mentions, count(DISTINCT (split, idx)) AS sentences "
    "FROM {mentions} GROUP BY source, label"
)

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta(key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS sources(
    source VARCHAR, split VARCHAR, kind VARCHAR, origin VARCHAR, fingerprint VARCHAR,
    loader_version VARCHAR, options VARCHAR, ingested_at TIMESTAMP,
    n_sentences BIGINT, n_mentions BIGINT, n_negatives BIGINT, n_negative_spans BIGINT,
    report VARCHAR, inputs VARCHAR, spec VARCHAR,
    PRIMARY KEY (source, split));
CREATE TABLE IF NOT EXISTS sentences(
    source VARCHAR, split VARCHAR, idx INTEGER, sentence_id VARCHAR, tokens VARCHAR[],
    raw_id VARCHAR);
CREATE TABLE IF NOT EXISTS mentions(
    source VARCHAR, split VARCHAR, idx INTEGER, start INTEGER, stop INTEGER,
    label VARCHAR, raw_label VARCHAR, coarse VARCHAR);
CREATE TABLE IF NOT EXISTS negatives(
    source VARCHAR, split VARCHAR, idx INTEGER, label VARCHAR, raw_label VARCHAR);
CREATE TABLE IF NOT EXISTS negative_spans(
    source VARCHAR, split VARCHAR, idx INTEGER, start INTEGER, stop INTEGER,
    label VARCHAR, raw_label VARCHAR);
CREATE TABLE IF NOT EXISTS embeddings(
    model VARCHAR, label VARCHAR, vector FLOAT[], PRIMARY KEY (model, label));
CREATE OR REPLACE VIEW label_counts AS {LABEL_COUNTS.format(mentions="mentions")};
"""


TABLES = ("meta", "sources", "sentences", "mentions", "negatives", "negative_spans", "embeddings")


def one(cursor: duckdb.DuckDBPyConnection) -> Any:
    """The first row of a result, consuming it whole (DuckDB 2 refuses new work on a
    connection with an unfinished result)."""
    rows = cursor.fetchall()
    return rows[0] if rows else None


def create(con: duckdb.DuckDBPyConnection) -> None:
    """The tables of this schema version, in a new store."""
    con.execute(SCHEMA)
    con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])


def stored_version(con: duckdb.DuckDBPyConnection, path: Path) -> str | None:
    """The store's schema version (None for a new, empty file); an error for another one."""
    has_meta = one(
        con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'meta' AND NOT temporary"
        )
    )[0]
    if not has_meta:
        return None
    row = one(con.execute("SELECT value FROM meta WHERE key = 'schema_version'"))
    if row is None or row[0] != str(SCHEMA_VERSION):
        found = "no schema version" if row is None else f"schema version {row[0]}"
        raise StoreError(
            f"{path}: this store has {found}; this toolkit reads and writes version "
            f"{SCHEMA_VERSION} (since 2: span-level negatives such as GLiNER's negative_ner, "
            f"and the inputs of every split). Ingest into a new store: point {opt('db')} (or "
            f"$LABELSHIFT_DB) at a new file, or delete {path} and ingest again"
        )
    return str(row[0])
