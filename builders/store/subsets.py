"""The store's level queries: which sentences a level keeps, and their rows.

    chosen = store.select_sentences("pilener", whole, caps, seed=0)   # sentences + counts
    rows = store.subset_rows("pilener", labels, chosen=chosen)        # every row, in memory
    with store.subset_reader("pilener", labels, chosen=chosen) as reader: ...   # streamed

A level keeps a sentence whole; a label it keeps in part (`caps`: label -> mentions) is cut by
a seeded draw of its sentences (the md5 of the seed and the sentence's key: the same order on
every machine and DuckDB version), after the sentences of the labels kept whole (METHOD.md
section 4). `Store` inherits these methods (`builders.store.db`).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext

from builders.defaults import SEED
from builders.deferred import duckdb, np, pa
from builders.store.draws import (
    LevelRows,
    Selection,
    count_runs,
    labels_table,
    per_sentence_selection,
    selection,
    walk,
)
from builders.store.schema import SPLIT_ORDER_SQL

#: Each (sentence, selected label) with the label's mentions in it; a sentence's rows are
#: together, those holding a label kept whole first, then the rest in the seeded order.
_PER_SENTENCE = f"""
WITH per AS (
    SELECT m.split, m.idx, c.pos, count(*)::INTEGER AS n
    FROM mentions m JOIN _selected c ON m.label = c.label
    WHERE m.source = $1
    GROUP BY m.split, m.idx, c.pos
), sent AS (
    SELECT split, idx, bool_or(pos < $2) AS forced,
           md5(concat($3::VARCHAR, '/', split, '/', idx::VARCHAR)) AS draw
    FROM per GROUP BY split, idx
)
SELECT per.split, per.idx, per.pos, per.n, sent.forced
FROM per JOIN sent USING (split, idx)
ORDER BY sent.forced DESC, sent.draw, {SPLIT_ORDER_SQL.format(col="per.split")}, per.split,
         per.idx, per.pos
"""

#: Each mention of a label of the level's order as (sentence, the label's place), sorted so
#: that a sentence's rows are together; `draws.count_runs` counts each (sentence, label)'s
#: mentions (`fit_level`). Sorted rows counted in NumPy take about 0.6x the time of DuckDB's
#: GROUP BY, which at NuNER's 4.3M groups of 4.9M mentions hashes nearly a group a row.
_PER_LABEL = f"""
SELECT m.split, m.idx, c.pos
FROM mentions m JOIN _selected c ON m.label = c.label
WHERE m.source = $1
ORDER BY {SPLIT_ORDER_SQL.format(col="m.split")}, m.split, m.idx, c.pos
"""

#: `_sentences` (split, idx, k: the rows' order) in the seeded order of `_PER_SENTENCE`'s
#: `draw`, ties in the rows' order (which is corpus order, as `_PER_SENTENCE` breaks them).
_DRAW_ORDER = """
SELECT k FROM _sentences
ORDER BY md5(concat($1::VARCHAR, '/', split, '/', idx::VARCHAR)), k
"""

#: The rows of a level: every mention of its labels in the sentences it keeps (all sentences
#: with one, or `_chosen`), grouped per sentence, with the labels' negatives: label-level
#: ones (distinct labels) and span-level ones (distinct spans, none equal to a stored mention).
#: Lists are sorted after they are gathered (`list_sort`; a struct sorts by its fields in
#: order: start, end, label), which is the `ORDER BY` inside `list` gives, in about 0.7x
#: its time on a NuNER level.
_ROWS = """
WITH kept AS (
    SELECT m.split, m.idx, m.start, m.stop, m.label
    FROM mentions m JOIN _selected c ON m.label = c.label {chosen}
    WHERE m.source = $1
), m AS (
    SELECT split, idx,
           list_sort(list({{'start': start, 'end': stop, 'label': label}}))
               AS spans
    FROM kept GROUP BY split, idx
), n AS (
    SELECT split, idx, list_sort(list(DISTINCT label)) AS negatives
    FROM negatives
    WHERE source = $1 AND label IN (SELECT label FROM _selected)
    GROUP BY split, idx
), ns AS (
    SELECT split, idx,
           list_sort(list({{'start': start, 'end': stop, 'label': label}}))
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
#: `Store.source_reader`: one stored split's sentences with everything stored on them.
_SOURCE_SQL = """
WITH m AS (
    SELECT idx, list_sort(list({{'start': start, 'end': stop, 'label': label}}))
               AS spans
    FROM mentions WHERE source = $1 AND split = $2 GROUP BY idx
), n AS (
    SELECT idx, list_sort(list(label)) AS negatives
    FROM negatives WHERE source = $1 AND split = $2 GROUP BY idx
), ns AS (
    SELECT idx, list_sort(list({{'start': start, 'end': stop, 'label': label}}))
               AS negative_spans
    FROM negative_spans WHERE source = $1 AND split = $2 GROUP BY idx
)
SELECT s.sentence_id AS id, s.tokens,
       coalesce(m.spans, {empty_spans}) AS spans,
       coalesce(n.negatives, []::VARCHAR[]) AS negatives,
       coalesce(ns.negative_spans, {empty_spans}) AS negative_spans
FROM sentences s
LEFT JOIN m ON s.idx = m.idx
LEFT JOIN n ON s.idx = n.idx
LEFT JOIN ns ON s.idx = ns.idx
WHERE s.source = $1 AND s.split = $2
ORDER BY s.idx
"""
#: A level order's stored labels and each one's place in the order (`_stored`).
_Stored = tuple[list[str], list[int]]
_CHOSEN_JOIN = "JOIN _chosen k ON m.split = k.split AND m.idx = k.idx"
_EMPTY_SPANS = """[]::STRUCT("start" INTEGER, "end" INTEGER, label VARCHAR)[]"""


class SubsetQueries:
    """Mixed into `Store`: a level's sentences and rows (METHOD.md section 4)."""

    con: duckdb.DuckDBPyConnection

    def select_sentences(
        self,
        source: str,
        whole: list[str],
        caps: Mapping[str, int] | None = None,
        seed: int = SEED,
    ) -> Selection:
        """The sentences a level of labels `whole` (every mention) and `caps` (label -> the
        mentions wanted) keeps, and each label's mentions in them (module docstring)."""
        labels, cap = labels_table(whole, caps or {})
        selected = pa.table(
            {
                "label": pa.array(labels, pa.string()),
                "pos": pa.array(range(len(labels)), pa.int32()),
            }
        )
        n_whole = int((cap < 0).sum())
        with self._registered("_selected", selected):
            if n_whole == len(labels):
                rows = self.con.execute(
                    "SELECT label, count(*) FROM mentions WHERE source = $1 "
                    "AND label IN (SELECT label FROM _selected) GROUP BY label",
                    [source],
                ).fetchall()
                return Selection({lab: int(k) for lab, k in sorted(rows)})
            params = [source, n_whole, str(seed)]
            table = self.con.sql(_PER_SENTENCE, params=params).to_arrow_table()
        return per_sentence_selection(table, labels, cap)

    def subset_rows(
        self,
        source: str,
        labels: list[str],
        caps: Mapping[str, int] | None = None,
        *,
        chosen: Selection | None = None,
        seed: int = SEED,
    ) -> pa.Table:
        """The rows of a label subset in corpus order (METHOD.md section 4): the sentences with
        a mention of `labels` (with `caps` or `chosen`: those `select_sentences` keeps), as id,
        tokens, spans and negative_spans [{start, end (exclusive), label}], negatives."""
        with self._rows(source, labels, caps, chosen, seed) as sql:
            return self.con.sql(sql, params=[source]).to_arrow_table()

    @contextmanager
    def subset_reader(
        self,
        source: str,
        labels: list[str],
        caps: Mapping[str, int] | None = None,
        batch_rows: int = 100_000,
        *,
        chosen: Selection | None = None,
        seed: int = SEED,
    ) -> Iterator[pa.RecordBatchReader]:
        """`subset_rows` as a reader of record batches (up to `batch_rows` rows each, in the
        same order): a subset of a large corpus is written out without holding it in memory.
        Read it whole inside the block."""
        with (
            self._rows(source, labels, caps, chosen, seed) as sql,
            self._reader(sql, [source], batch_rows) as reader,
        ):
            yield reader

    def fit_level(
        self,
        source: str,
        order: list[str],
        take: np.ndarray,
        size: int,
        members: Mapping[str, Sequence[str]] | None = None,
    ) -> tuple[list[str], dict[str, int]]:
        """The labels of a level cut to `size` mentions counted on what it writes (`order`: its
        labels in the order it takes them, `take`: the mentions planned of each, `members`: the
        stored labels each stands for, counted as one, default itself; METHOD.md section 4), as
        (whole labels, capped label -> cap); `select_fitted` then draws."""
        rows = self._level_rows(source, order, take, members)
        take = np.asarray(take, dtype=np.int64)
        whole, caps = walk(rows.pos, rows.n, rows.first, take, int(size), rows.walk_index)
        return [order[i] for i in whole], {order[i]: q for i, q in caps.items()}

    def select_fitted(
        self,
        source: str,
        order: list[str],
        take: np.ndarray,
        whole: list[str],
        caps: Mapping[str, int],
        seed: int = SEED,
        members: Mapping[str, Sequence[str]] | None = None,
    ) -> Selection:
        """`select_sentences` for a level `fit_level` fitted (same `order`, `take` and
        `members`): the same selection, drawn from the rows `fit_level` read; its counts by
        the labels of `order`. Labels outside `order` go through `select_sentences`."""
        labels, cap = labels_table(whole, caps)
        if not set(labels) <= set(order):
            return self.select_sentences(source, whole, caps, seed)
        rows = self._level_rows(source, order, take, members)
        place = {lab: i for i, lab in enumerate(labels)}
        remap = np.array([place.get(lab, -1) for lab in order], dtype=np.int64)
        pos = remap[rows.pos] if remap.size else rows.pos
        mine = pos >= 0
        pos, n, sentence = pos[mine], rows.n[mine], rows.sentence[mine]
        forced = np.zeros(rows.first.size - 1, dtype=bool)
        forced[sentence[pos < int((cap < 0).sum())]] = True
        # the level's sentences (their rows stay together), forced first, then in the seeded
        # order; `draw` reads a sentence's rows in any order
        new = np.ones(sentence.size, dtype=bool)
        new[1:] = sentence[1:] != sentence[:-1]
        starts = np.flatnonzero(new)
        sizes = np.diff(np.append(starts, sentence.size))
        at = sentence[starts]
        by = _order_of(
            np.where(forced[at], 0, forced.size) + self._draw_ranks(rows, seed)[at], forced.size
        )
        starts, sizes, which = starts[by], sizes[by], at[by]
        rows_by = np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(sizes.sum())
        pos, n = pos[rows_by], n[rows_by]
        first = np.append(0, np.cumsum(sizes))
        chosen = selection(pos, n, first, forced[which], rows.keys(which), labels, cap)
        return chosen if (cap >= 0).any() else Selection(chosen.counts)  # as SQL gives it

    def _draw_ranks(self, rows: LevelRows, seed: int) -> np.ndarray:
        """Each of the rows' sentences' place in the seeded order (`_PER_SENTENCE`'s `draw`,
        its ties by corpus order, as the rows are), read once per seed."""
        ranks = rows.draws.get(seed)
        if ranks is None:
            k = np.arange(len(rows.idx), dtype=np.int64)  # typed: a level with no rows too
            sentences = pa.table({"split": rows.split, "idx": rows.idx, "k": k})
            with self._registered("_sentences", sentences):
                order = self.con.sql(_DRAW_ORDER, params=[str(seed)]).to_arrow_table()
            ranks = np.empty(len(rows.idx), dtype=np.int64)
            ranks[order.column("k").to_numpy()] = np.arange(ranks.size)
            rows.draws[seed] = ranks
        return ranks

    def _level_rows(
        self,
        source: str,
        order: list[str],
        take: object,
        members: Mapping[str, Sequence[str]] | None = None,
    ) -> LevelRows:
        """`_PER_LABEL`'s rows for `order` (`LevelRows`), kept while the plan `take` (the same
        array) lives: a level fitted again to a smaller size (`splits.fitting.equal_sizes`)
        reads them once per build (about 27 MB for a NuNER level of 2.4M rows). A write to the
        store and `without_sentences` (entered or left) forget them all."""
        stored = _stored(order, members)
        cache: dict[int, tuple[str, _Stored, LevelRows]]
        cache = self.__dict__.setdefault("_per_label_cache", {})
        hit = cache.get(id(take))
        if hit is not None and hit[0] == source and hit[1] == stored:
            return hit[2]
        rows = LevelRows.of(self._per_label(source, *stored), len(order))
        if isinstance(take, np.ndarray):  # an array can be watched: forgotten when it is
            cache[id(take)] = (source, stored, rows)
            weakref.finalize(take, cache.pop, id(take), None)
        return rows

    def _per_label(self, source: str, labels: Sequence[str], pos: Sequence[int]) -> pa.Table:
        """Each (sentence, label) of stored `labels`, each at its place `pos`, with the
        label's mentions in it (columns split, idx, pos, n), a sentence's rows together, in
        corpus order, then by place."""
        selected = pa.table(
            {"label": pa.array(labels, pa.string()), "pos": pa.array(pos, pa.int32())}
        )
        with self._registered("_selected", selected):
            return count_runs(self.con.sql(_PER_LABEL, params=[source]).to_arrow_table())

    @contextmanager
    def source_reader(
        self, source: str, split: str, batch_rows: int = 100_000
    ) -> Iterator[pa.RecordBatchReader]:
        """Every sentence of one stored split, in corpus order, in `subset_rows`' columns: its
        mentions, label-level and span-level negatives as stored (none left out), as record
        batches. Read it whole inside the block."""
        sql = _SOURCE_SQL.format(empty_spans=_EMPTY_SPANS)
        with self._reader(sql, [source, split], batch_rows) as reader:
            yield reader

    @contextmanager
    def _reader(
        self, sql: str, params: list[str], batch_rows: int
    ) -> Iterator[pa.RecordBatchReader]:
        rel = self.con.sql(sql, params=params)
        # DuckDB 2 names it to_arrow_reader (fetch_arrow_reader deprecated); 1.x has only that
        reader = (getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader)(batch_rows)
        try:
            yield reader
        finally:  # the connection takes no other work while a result is open
            reader.close()

    def split_labels(self, source: str, split: str) -> list[str]:
        """The distinct labels of one split's mentions, sorted."""
        rows = self.con.execute(
            "SELECT DISTINCT label FROM mentions WHERE source = ? AND split = ? ORDER BY label",
            [source, split],
        ).fetchall()
        return [r[0] for r in rows]

    @contextmanager
    def _rows(
        self,
        source: str,
        labels: list[str],
        caps: Mapping[str, int] | None,
        chosen: Selection | None,
        seed: int,
    ) -> Iterator[str]:
        """`_ROWS` with its tables registered: the labels, and the sentences kept."""
        if chosen is None and caps:
            chosen = self.select_sentences(source, labels, caps, seed)
        every = sorted({*labels, *(caps or {})})
        selected = pa.table({"label": pa.array(every, pa.string())})
        sentences = chosen.sentences if chosen is not None else None
        sql = _ROWS.format(
            chosen=_CHOSEN_JOIN if sentences is not None else "",
            s_order=SPLIT_ORDER_SQL.format(col="s.split"),
            empty_spans=_EMPTY_SPANS,
        )
        chosen_table = (
            nullcontext() if sentences is None else self._registered("_chosen", sentences)
        )
        with self._registered("_selected", selected), chosen_table:
            yield sql

    @contextmanager
    def _registered(self, name: str, table: pa.Table) -> Iterator[None]:
        self.con.register(name, table)
        try:
            yield
        finally:
            self.con.unregister(name)


def _stored(order: list[str], members: Mapping[str, Sequence[str]] | None) -> _Stored:
    """The stored labels of a level's order and each one's place in the order (two lists, not
    a pair a label: a NuNER order has 80k labels, and comparing lists of the same strings
    is fast where making as many pairs is not)."""
    if not members:
        return list(order), list(range(len(order)))
    pairs = [(m, i) for i, lab in enumerate(order) for m in members.get(lab, [lab])]
    return [m for m, _ in pairs], [i for _, i in pairs]


def _order_of(keys: np.ndarray, n: int) -> np.ndarray:
    """`np.argsort` of distinct keys in [0, 2n) (the draw's: a sentence's place among the
    level's `n` in the seeded order, past all `n` where it is not forced), by placing each at
    its key: linear, where a sort of NuNER's 900k sentences takes about 80 ms a level."""
    slot = np.full(2 * n, -1, dtype=np.int64)
    slot[keys] = np.arange(keys.size)
    return slot[slot >= 0]
