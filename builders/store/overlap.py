"""The store's leakage queries: benchmark sentences and mentions found in a training corpus.

    tables = store.overlap_tables("pilener", pa.table({"benchmark", "source", "split"}), n=13)
    with store.without_sentences("pilener", ids):   every query sees the corpus without them

Tokens are compared normalised (NFC, lower-cased, METHOD.md section 7) and hashed; how, and why
n-gram and mention hits are not checked token by token: docs/DESIGN.md, "Leakage". A false hit
needs a 64-bit collision, about one in 10^7 scans of a NuNER-sized corpus against the seven
zero-shot test sets (30M x 70k keys / 2^64). `Store` inherits these methods.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from builders.deferred import duckdb, pa
from builders.store.schema import LABEL_COUNTS

_NORM = "list_transform({col}, lambda x: lower(nfc_normalize(x)))"
_NORM_HASH = "list_transform({col}, lambda x: hash(lower(nfc_normalize(x))))"
#: Temporary tables of one scan (connection-local, dropped when it ends).
_TEMP = ("_lk_bs", "_lk_bg", "_lk_bm", "_lk_t", "_lk_cp", "_lk_p", "_lk_ts", "_lk_tl", "_lk_tm")
#: Training sentences hashed at a time: bounds the scan's memory (its tokens and their hashes:
#: about 0.3 GB a chunk).
CHUNK = 500_000
#: The tables a decontaminated view shadows, and what each is keyed by.
_SHADOWED = ("sentences", "mentions", "negatives", "negative_spans")


def _gram(pos: str, n: int) -> str:
    """SQL: the hash of the n token hashes of `th` from position `pos` (1-based)."""
    return "hash(" + ", ".join(f"th[{pos} + {k}]" for k in range(n)) + ")"


def _chunk_pairs(n: int) -> str:
    """SQL: `_lk_cp`, a chunk's pairs from its token hashes `_lk_t`: the benchmark sentences
    whose whole hash it has and whose normalised tokens are its own (exact), and those one of
    whose n-gram hashes it has (at those positions)."""
    return f"""
    CREATE OR REPLACE TEMP TABLE _lk_cp AS
    WITH same_hash AS MATERIALIZED (
        SELECT b.bno, t.idx, t.tokens, b.norm
        FROM _lk_t t JOIN _lk_bs b ON b.sh = hash(t.th)
    ), ex AS (
        SELECT bno, idx, true AS exact, NULL::INTEGER AS pos FROM same_hash
        WHERE {_NORM.format(col="tokens")} = norm
    ), ng AS (
        SELECT g.bno, t.idx, false AS exact, g.pos::INTEGER AS pos
        FROM (SELECT idx, {_gram("tpos", n)} AS h FROM (
                SELECT idx, th, unnest(generate_series(1, len(th) - $n + 1)) AS tpos
                FROM _lk_t)) t
        JOIN _lk_bg g ON g.h = t.h
    )
    SELECT bno, idx, bool_or(exact) AS exact,
           list_sort(list_distinct(list(pos))) AS positions
    FROM (SELECT * FROM ex UNION ALL SELECT * FROM ng)
    GROUP BY bno, idx
    """


#: The pairs, one row per (benchmark sentence, training sentence), `{text}`: `_TEXTS` or "".
_PAIRS = """
SELECT b.benchmark, b.sentence_id AS benchmark_sentence_id,
       t.sentence_id AS training_sentence_id, p.exact, p.positions,
       coalesce(tl.labels, []::VARCHAR[]) AS training_labels{text}
FROM _lk_p p
JOIN _lk_bs b ON b.bno = p.bno
JOIN _lk_ts t ON t.split = p.split AND t.idx = p.idx
LEFT JOIN _lk_tl tl ON tl.split = p.split AND tl.idx = p.idx
ORDER BY p.bno, p.split, p.idx
"""
_TEXTS = (
    ", array_to_string(b.tokens, ' ') AS benchmark_text, "
    "array_to_string(t.tokens, ' ') AS training_text"
)


@dataclass(frozen=True)
class OverlapTables:
    """What one scan found (Arrow tables; their columns as `overlap_tables` selects them):
    every benchmark sentence; the (benchmark, training sentence) pairs, `exact` when the
    normalised sentences are equal, `positions` the 1-based starts of the benchmark sentence's
    n-grams found; every benchmark mention, `surface` the hash of its normalised tokens; and
    the distinct labels the training mentions of each benchmark surface carry (a surface
    missing is unseen; kept per surface, not per mention: one can carry thousands).
    """

    sentences: pa.Table
    pairs: pa.Table
    mentions: pa.Table
    surface_labels: pa.Table


class OverlapQueries:
    """Mixed into `Store`: the leakage scan and the decontaminated view."""

    con: duckdb.DuckDBPyConnection
    #: How many `without_sentences` blocks are open: their views no stored fingerprint describes.
    _shadowing: int = 0

    def scan_inputs(self, source: str, benchmarks: pa.Table) -> dict[str, Any] | None:
        """What `overlap_tables(source, benchmarks, ...)` reads: the corpus's and benchmarks'
        splits' fingerprints, ingest times and counts (the key of `builders.shift.scan_cache`);
        None inside `without_sentences`."""
        if self._shadowing:
            return None
        rows = self.con.execute(
            "SELECT source, split, fingerprint, CAST(ingested_at AS VARCHAR), n_sentences, "
            "n_mentions FROM sources ORDER BY source, split"
        ).fetchall()
        prints = {(r[0], r[1]): list(r[2:]) for r in rows}
        columns = (benchmarks.column(c).to_pylist() for c in ("benchmark", "source", "split"))
        asked = sorted(zip(*columns, strict=True))
        return {
            "source": source,
            "splits": {sp: fp for (src, sp), fp in sorted(prints.items()) if src == source},
            "benchmarks": [[b, src, sp, prints.get((src, sp))] for b, src, sp in asked],
        }

    def raw_labels(self, source: str, split: str) -> list[tuple[str, str, str | None]]:
        """Distinct (raw_label, label, coarse) of a split's mentions, by label."""
        return self.con.execute(
            "SELECT DISTINCT raw_label, label, coarse FROM mentions "
            "WHERE source = ? AND split = ? ORDER BY label, raw_label",
            [source, split],
        ).fetchall()

    def overlap_tables(
        self, source: str, benchmarks: pa.Table, n: int, texts: bool = True
    ) -> OverlapTables:
        """Scan the training source `source` for the benchmarks' sentences and mentions
        (`benchmarks`: where each one's sentences are stored). Sentences shorter than `n` take
        part in the exact figure only. `texts` gives the pairs their sentences' texts (a
        build's figures do not need them; a million pairs hold ~0.5 GB of them)."""
        if n < 1:
            raise ValueError(f"n-gram length must be >= 1, got {n}")
        self.con.register("_lk_query", benchmarks)
        try:
            self._overlap_prepare(source, n, texts)
            return OverlapTables(
                sentences=self.con.sql(
                    "SELECT benchmark, sentence_id, len(norm) AS n_tokens FROM _lk_bs ORDER BY bno"
                ).to_arrow_table(),
                pairs=self.con.sql(_PAIRS.format(text=_TEXTS if texts else "")).to_arrow_table(),
                mentions=self.con.sql(
                    "SELECT benchmark, sentence_id, start, stop, raw_label, label, text, "
                    "mh AS surface FROM _lk_bm ORDER BY bno, start, stop, label"
                ).to_arrow_table(),
                surface_labels=self.con.sql(
                    "SELECT DISTINCT mh AS surface, label FROM _lk_tm ORDER BY surface, label"
                ).to_arrow_table(),
            )
        finally:
            self.con.unregister("_lk_query")
            for name in _TEMP:
                self.con.execute(f"DROP TABLE IF EXISTS temp.main.{name}")

    def _overlap_prepare(self, source: str, n: int, texts: bool) -> None:
        """The benchmark side (`_lk_bs` sentences, `_lk_bg` n-grams, `_lk_bm` mentions), then
        one pass over the corpus, `CHUNK` sentences at a time (`_overlap_chunk`), keeping only
        its hits: the pairs (`_lk_p`), their training sentences and labels (`_lk_ts`, `_lk_tl`)
        and the training mentions of a benchmark surface (`_lk_tm`)."""
        con = self.con
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _lk_bs AS "
            "SELECT row_number() OVER (ORDER BY q.benchmark, s.split, s.idx)::INTEGER AS bno, "
            "q.benchmark, s.source, s.split, s.idx, s.sentence_id, s.tokens, "
            f"{_NORM.format(col='s.tokens')} AS norm, {_NORM_HASH.format(col='s.tokens')} AS th, "
            f"hash({_NORM_HASH.format(col='s.tokens')}) AS sh "
            "FROM sentences s JOIN _lk_query q ON s.source = q.source AND s.split = q.split"
        )
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _lk_bg AS "
            f"SELECT bno, pos, {_gram('pos', n)} AS h FROM ("
            "  SELECT bno, th, unnest(generate_series(1, len(th) - $n + 1)) AS pos FROM _lk_bs)",
            {"n": n},
        )
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _lk_bm AS "
            "SELECT b.bno, b.benchmark, b.sentence_id, m.start, m.stop, m.raw_label, m.label, "
            "array_to_string(b.norm[m.start + 1 : m.stop], ' ') AS text, "
            "hash(b.th[m.start + 1 : m.stop]) AS mh "
            "FROM _lk_bs b "
            "JOIN mentions m ON m.source = b.source AND m.split = b.split AND m.idx = b.idx"
        )
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _lk_p(bno INTEGER, split VARCHAR, idx INTEGER, "
            "exact BOOLEAN, positions INTEGER[]); "
            "CREATE OR REPLACE TEMP TABLE _lk_ts(split VARCHAR, idx INTEGER, sentence_id VARCHAR, "
            "tokens VARCHAR[]); "
            "CREATE OR REPLACE TEMP TABLE _lk_tl(split VARCHAR, idx INTEGER, labels VARCHAR[]); "
            "CREATE OR REPLACE TEMP TABLE _lk_tm(mh UBIGINT, label VARCHAR)"
        )
        ranges = con.execute(
            "SELECT split, min(idx), max(idx) FROM sentences WHERE source = ? "
            "GROUP BY split ORDER BY split",
            [source],
        ).fetchall()
        for split, lo, hi in ranges:
            for first in range(lo, hi + 1, CHUNK):
                where = {"src": source, "split": split, "first": first, "stop": first + CHUNK}
                self._overlap_chunk(where, n, texts)

    def _overlap_chunk(self, where: dict[str, object], n: int, texts: bool) -> None:
        """The rows of `_lk_p`, `_lk_ts`, `_lk_tl` and `_lk_tm` of the sentences
        first <= idx < stop of one split, from the chunk's tokens and normalised token hashes
        (`_lk_t`) and its pairs (`_chunk_pairs`: `_lk_cp`), both replaced by the next chunk's."""
        con = self.con
        con.execute(
            "CREATE OR REPLACE TEMP TABLE _lk_t AS "
            f"SELECT idx, sentence_id, tokens, {_NORM_HASH.format(col='tokens')} AS th "
            "FROM sentences "
            "WHERE source = $src AND split = $split AND idx >= $first AND idx < $stop",
            where,
        )
        con.execute(_chunk_pairs(n), {"n": n})
        split = {"split": where["split"]}
        con.execute(
            "INSERT INTO _lk_p SELECT bno, $split, idx, exact, positions FROM _lk_cp", split
        )
        con.execute(
            "INSERT INTO _lk_ts SELECT $split, idx, sentence_id, "
            f"{'tokens' if texts else 'NULL'} FROM _lk_t "
            "WHERE idx IN (SELECT idx FROM _lk_cp)",
            split,
        )
        con.execute(
            "INSERT INTO _lk_tl SELECT $split, idx, list(DISTINCT label ORDER BY label) "
            "FROM mentions WHERE source = $src AND split = $split AND idx >= $first "
            "AND idx < $stop AND idx IN (SELECT idx FROM _lk_cp) GROUP BY idx",
            where,
        )
        con.execute(
            "INSERT INTO _lk_tm SELECT DISTINCT mh, label FROM ("
            "  SELECT hash(t.th[m.start + 1 : m.stop]) AS mh, m.label "
            "  FROM mentions m JOIN _lk_t t ON t.idx = m.idx "
            "  WHERE m.source = $src AND m.split = $split AND m.idx >= $first AND m.idx < $stop) "
            "WHERE mh IN (SELECT mh FROM _lk_bm)",
            where,
        )

    @contextmanager
    def without_sentences(self, source: str, sentence_ids: Sequence[str]) -> Iterator[int]:
        """Within the block, every query of this connection sees `source` without these
        sentences, their mentions and their negatives (temporary views named like the tables
        shadow them); nothing is deleted. Yields how many stored sentences are left out."""
        ids = pa.table({"sentence_id": pa.array(list(sentence_ids), pa.string())})
        db = self.con.execute("SELECT current_database()").fetchall()[0][0]
        main = '"' + str(db).replace('"', '""') + '".main'
        self.con.register("_drop_ids", ids)
        try:
            self.con.execute(
                "CREATE OR REPLACE TEMP TABLE _dropped AS SELECT source, split, idx "
                f"FROM {main}.sentences WHERE source = ? "
                "AND sentence_id IN (SELECT sentence_id FROM _drop_ids)",
                [source],
            )
        finally:
            self.con.unregister("_drop_ids")
        keep = (
            "WHERE NOT EXISTS (SELECT 1 FROM temp.main._dropped d "
            "WHERE d.source = t.source AND d.split = t.split AND d.idx = t.idx)"
        )
        try:
            for table in _SHADOWED:
                self.con.execute(
                    f"CREATE OR REPLACE TEMP VIEW {table} AS SELECT * FROM {main}.{table} t {keep}"
                )
            self.con.execute(
                "CREATE OR REPLACE TEMP VIEW label_counts AS "
                + LABEL_COUNTS.format(mentions="temp.main.mentions")
            )
            (dropped,) = self.con.execute("SELECT count(*) FROM temp.main._dropped").fetchall()[0]
            self._shadowing += 1
            self.__dict__.pop("_per_label_cache", None)  # rows read before see other sentences
            try:
                yield int(dropped)
            finally:
                self._shadowing -= 1
        finally:
            self.__dict__.pop("_per_label_cache", None)
            for view in ("label_counts", *_SHADOWED):
                self.con.execute(f"DROP VIEW IF EXISTS temp.main.{view}")
            self.con.execute("DROP TABLE IF EXISTS temp.main._dropped")
