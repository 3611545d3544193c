"""The catalogue queries `Store` inherits: which sources and splits it holds and how they were
read (`StoredSplit`), counts, rows in corpus order, polars frames, checksums, `stats`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builders import sources as registry  # read at each call (tests stand in a reader)
from builders.defaults import split_rank
from builders.deferred import duckdb
from builders.errors import SourceNotStored
from builders.store.schema import SPLIT_ORDER_SQL, TABLES, one

if TYPE_CHECKING:
    import polars as pl


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


class CatalogueQueries:
    """Mixed into `Store`: what it holds, counted and listed."""

    con: duckdb.DuckDBPyConnection
    path: Path

    def source_names(self) -> list[str]:
        """Every stored source, sorted."""
        rows = self.con.execute("SELECT DISTINCT source FROM sources ORDER BY source").fetchall()
        return [r[0] for r in rows]

    def has_source(self, source: str) -> bool:
        row = one(self.con.execute("SELECT 1 FROM sources WHERE source = ? LIMIT 1", [source]))
        return row is not None

    def older_reads(self, source: str | None = None) -> list[tuple[str, str, str, str, str]]:
        """(source, split, reader, stored version, current version) of every stored split that
        an older version of its reader read (it reads that input differently now)."""
        rows = self.con.execute(
            "SELECT source, split, spec, loader_version FROM sources "
            "WHERE spec IS NOT NULL AND (? IS NULL OR source = ?) ORDER BY source, split",
            [source, source],
        ).fetchall()
        return [
            (src, split, spec, str(ver), registry.SOURCES[spec].loader_version)
            for src, split, spec, ver in rows
            if spec in registry.SOURCES and str(ver) != registry.SOURCES[spec].loader_version
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
            raise SourceNotStored(self.missing_source(source), source)

    def missing_source(self, source: str) -> str:
        """Why `source` cannot be read from this store, and the ingest that adds it: its own
        name where it names a reader, else a reader's with `--name`."""
        known = self.source_names()
        holds = f"it holds: {', '.join(known)}" if known else "it holds no source"
        if source in registry.SOURCES:
            how = f"`builders ingest {source} --db {self.path}`"
        else:
            how = (
                f"`builders ingest columns --path FILE --name {source} --db {self.path}` "
                "(or another reader: `builders sources`)"
            )
        return f"source {source!r} is not in {self.path} ({holds}): ingest it first, {how}"

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
        sql = "SELECT label, any_value(coarse) FROM mentions WHERE source = ? GROUP BY label"
        return dict(self.con.execute(sql, [source]).fetchall())

    def count_types(self, source: str, split: str | None = None) -> int:
        """Distinct labels of a source (or of one of its splits)."""
        where, params = "source = ?", [source]
        if split:
            where, params = "source = ? AND split = ?", [source, split]
        sql = f"SELECT count(DISTINCT label) FROM mentions WHERE {where}"
        return int(one(self.con.execute(sql, params))[0])

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
                sentences=r[3],
                mentions=r[4],
                negatives=r[5],
                negative_spans=r[6],
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
        sql = f"SELECT source, split, fingerprint FROM sources {where} ORDER BY source, split"
        return self.con.execute(sql, params).fetchall()

    def sentence_labels(self, source: str) -> list[tuple[str, int, list[str]]]:
        """(split, idx, distinct labels) of every sentence with a mention, in corpus order."""
        rows = self.con.execute(
            "SELECT split, idx, list(DISTINCT label ORDER BY label) FROM mentions "
            f"WHERE source = ? GROUP BY split, idx "
            f"ORDER BY {SPLIT_ORDER_SQL.format(col='split')}, split, idx",
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
            f"ORDER BY {SPLIT_ORDER_SQL.format(col='s.split')}, s.split, s.idx",
            params,
        ).fetchall()
        return [
            (sp, int(idx), list(tokens), [(int(a), int(b), lab) for a, b, lab in spans or []])
            for sp, idx, tokens, spans in rows
        ]

    def stats(self) -> dict[str, Any]:
        rows = self.con.execute(
            "SELECT source, any_value(kind), sum(n_sentences), sum(n_mentions), sum(n_negatives), "
            f"list(split ORDER BY {SPLIT_ORDER_SQL.format(col='split')}, split), "
            "sum(n_negative_spans) FROM sources GROUP BY source ORDER BY source"
        ).fetchall()
        sql = "SELECT source, count(DISTINCT label) FROM mentions GROUP BY source"
        types = dict(self.con.execute(sql).fetchall())
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
