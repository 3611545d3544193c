"""The store's level queries: which sentences a level keeps, and their rows.

    chosen = store.select_sentences("pilener", whole, caps, seed=0)   # sentences + counts
    rows = store.subset_rows("pilener", labels, chosen=chosen)        # every row, in memory
    with store.subset_reader("pilener", labels, chosen=chosen) as reader: ...   # streamed

A level keeps a sentence whole: every mention the corpus has in it of the level's labels
(METHOD.md section 4). A label the level keeps in part (`caps`: label -> mentions) is cut by
keeping fewer of its sentences, never fewer of its mentions:

1. the sentences with a mention of a label kept whole are kept (the label needs all of them);
   the mentions they hold of capped labels count towards those labels' caps;
2. the other sentences (they hold capped labels only) are walked in a seeded random order
   (the md5 of the seed and the sentence's key, so the order is the same on every machine
   and DuckDB version, and not the corpus's own, which is often sorted by topic or source);
   a sentence is kept when its mentions keep every capped label it holds within its cap.

A capped label therefore ends at its cap, or a little under it where no sentence left fits
(each would pass its cap or another label's), or above it where the sentences of whole labels
already hold more of it than its cap (that part is counted, not cut).
`Store` inherits these methods (`builders.store.db`).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import duckdb
import numpy as np
import pyarrow as pa

from builders.defaults import SEED
from builders.store.schema import SPLIT_ORDER_SQL


@dataclass(frozen=True)
class Selection:
    """The sentences a level keeps and each of its labels' mentions in them.

    `sentences` (split, idx) is None when the level keeps every sentence with a mention of
    one of its labels (no label is capped)."""

    counts: dict[str, int]
    sentences: pa.Table | None = field(default=None, repr=False)
    #: Sentences drawn for the capped labels (the others hold a label kept whole).
    drawn: int = 0

    @property
    def mentions(self) -> int:
        return sum(self.counts.values())

    def over(self, caps: Mapping[str, int]) -> dict[str, int]:
        """Capped labels with more mentions than their cap (the sentences of whole labels
        hold them), and by how many."""
        return {
            lab: self.counts.get(lab, 0) - n
            for lab, n in sorted(caps.items())
            if self.counts.get(lab, 0) > n
        }


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

#: Each (sentence, label of the level's order) with the label's mentions in it, a sentence's
#: rows together (`fit_level`).
_PER_LABEL = f"""
SELECT m.split, m.idx, c.pos, count(*)::INTEGER AS n
FROM mentions m JOIN _selected c ON m.label = c.label
WHERE m.source = $1
GROUP BY m.split, m.idx, c.pos
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
_CHOSEN_JOIN = "JOIN _chosen k ON m.split = k.split AND m.idx = k.idx"
_EMPTY_SPANS = """[]::STRUCT("start" INTEGER, "end" INTEGER, label VARCHAR)[]"""


def _labels_table(whole: list[str], caps: Mapping[str, int]) -> tuple[list[str], np.ndarray]:
    """The selected labels, whole ones first (each once; a label both whole and capped is
    whole), and each one's cap (-1: whole)."""
    whole = sorted(set(whole))
    kept = set(whole)
    capped = sorted((lab, int(n)) for lab, n in caps.items() if lab not in kept)
    labels = [*whole, *(lab for lab, _ in capped)]
    cap = np.array([-1] * len(whole) + [n for _, n in capped], dtype=np.int64)
    return labels, cap


def _draw(
    pos: np.ndarray, n: np.ndarray, first: np.ndarray, cap: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """Which of the sentences (rows `first[i]` to `first[i + 1]`, in the seeded order) to keep:
    each whose mentions keep every capped label it holds within its cap (one Pile-NER passage
    can hold 26 mentions of a label). `counts` (each label's mentions kept so far) is updated
    in place."""
    keep = np.zeros(first.size - 1, dtype=bool)
    if keep.size == 0:
        return keep
    full = counts >= cap
    # a sentence holding a label already full can never be drawn: leave it out at once
    blocked = np.maximum.reduceat(full[pos].astype(np.int8), first[:-1]) > 0
    open_labels = int((~full[np.unique(pos)]).sum())  # the capped labels still wanting
    lo_all, hi_all = first[:-1].tolist(), first[1:].tolist()
    pos_l, n_l = pos.tolist(), n.tolist()
    have, limit = counts.tolist(), cap.tolist()
    for i in np.flatnonzero(~blocked).tolist():
        if open_labels == 0:
            break
        lo, hi = lo_all[i], hi_all[i]
        if any(have[p] + k > limit[p] for p, k in zip(pos_l[lo:hi], n_l[lo:hi], strict=True)):
            continue  # it would pass a cap: a sentence with fewer mentions may still fit
        keep[i] = True
        for p, k in zip(pos_l[lo:hi], n_l[lo:hi], strict=True):
            was = have[p]
            have[p] = was + k
            if was < limit[p] <= have[p]:
                open_labels -= 1
    counts[:] = have
    return keep


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
        labels, cap = _labels_table(whole, caps or {})
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
        return _per_sentence_selection(table, labels, cap)

    def subset_rows(
        self,
        source: str,
        labels: list[str],
        caps: Mapping[str, int] | None = None,
        *,
        chosen: Selection | None = None,
        seed: int = SEED,
    ) -> pa.Table:
        """The rows of a label subset, in corpus order (METHOD.md section 4).

        A sentence is kept if it has a mention of one of `labels` (or, with `caps` or
        `chosen`, if `select_sentences` keeps it), with every mention it has of the labels
        (whole and capped), and the negatives among them: label-level ones (types asked
        about with no answer) and span-level ones (spans that are NOT of their label; one
        equal to a stored mention is left out).
        Columns: id, tokens, spans [{start, end, label}] (`end` exclusive), negatives,
        negative_spans [{start, end, label}] (`end` exclusive).
        """
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
        with self._rows(source, labels, caps, chosen, seed) as sql:
            rel = self.con.sql(sql, params=[source])
            # DuckDB 2 names it to_arrow_reader (its fetch_arrow_reader is deprecated); 1.x has
            # only fetch_arrow_reader
            to_reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader
            reader = to_reader(batch_rows)
            try:
                yield reader
            finally:  # the connection takes no other work while a result is open
                reader.close()

    def fit_level(
        self, source: str, order: list[str], take: np.ndarray, size: int
    ) -> tuple[list[str], dict[str, int]]:
        """The labels of a level cut to `size` (`order`: its labels in the order it takes
        them, `take`: the mentions planned of each), taken so that the level holds `size`
        mentions counted on what it writes (METHOD.md section 4): whole (every mention) or
        capped, or left out where even its mentions in the sentences already kept would pass
        the size. Returns (whole labels, capped labels -> cap); `select_fitted` then draws.
        """
        rows = self._level_rows(source, order, take)
        take = np.asarray(take, dtype=np.int64)
        index = rows.walk_index if take.size == len(order) else None
        whole, caps = _walk(rows.pos, rows.n, rows.first, take, int(size), index)
        return [order[i] for i in whole], {order[i]: q for i, q in caps.items()}

    def select_fitted(
        self,
        source: str,
        order: list[str],
        take: np.ndarray,
        whole: list[str],
        caps: Mapping[str, int],
        seed: int = SEED,
    ) -> Selection:
        """`select_sentences` for a level `fit_level` fitted (same `order` and `take`): the
        same selection, drawn from the level's rows `fit_level` read (no query but the seeded
        order of their sentences, once per level). Labels outside `order` (stored spellings
        of a protocol's label) are selected by `select_sentences`."""
        labels, cap = _labels_table(whole, caps)
        if not set(labels) <= set(order):
            return self.select_sentences(source, whole, caps, seed)
        rows = self._level_rows(source, order, take)
        place = {lab: i for i, lab in enumerate(labels)}
        remap = np.array([place.get(lab, -1) for lab in order], dtype=np.int64)
        pos = remap[rows.pos] if remap.size else rows.pos
        mine = pos >= 0
        pos, n, sentence = pos[mine], rows.n[mine], rows.sentence[mine]
        forced = np.zeros(rows.first.size - 1, dtype=bool)
        forced[sentence[pos < int((cap < 0).sum())]] = True
        # the level's sentences (their rows stay together), forced first, then in the seeded
        # order; `_draw` reads a sentence's rows in any order
        new = np.ones(sentence.size, dtype=bool)
        new[1:] = sentence[1:] != sentence[:-1]
        starts = np.flatnonzero(new)
        sizes = np.diff(np.append(starts, sentence.size))
        at = sentence[starts]
        by = np.argsort(np.where(forced[at], 0, forced.size) + self._draw_ranks(rows, seed)[at])
        starts, sizes, which = starts[by], sizes[by], at[by]
        rows_by = np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(sizes.sum())
        pos, n = pos[rows_by], n[rows_by]
        first = np.append(0, np.cumsum(sizes))
        chosen = _selection(pos, n, first, forced[which], rows.keys(which), labels, cap)
        return chosen if (cap >= 0).any() else Selection(chosen.counts)  # as SQL gives it

    def _draw_ranks(self, rows: _LevelRows, seed: int) -> np.ndarray:
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

    def _level_rows(self, source: str, order: list[str], take: object) -> _LevelRows:
        """`_PER_LABEL`'s rows for `order` (`_LevelRows`). They are kept while the plan
        `take` (the same array) lives: a level fitted again to a smaller size (the
        pipeline's `_equal_sizes`) has the same order and plan, and its rows are read once
        per build (about 27 MB for a NuNER level of 2.4M rows). A write to the store and
        `without_sentences` (entered or left) forget them all."""
        cache: dict[int, tuple[str, list[str], _LevelRows]]
        cache = self.__dict__.setdefault("_per_label_cache", {})
        hit = cache.get(id(take))
        if hit is not None and hit[0] == source and hit[1] == order:
            return hit[2]
        selected = pa.table(
            {"label": pa.array(order, pa.string()), "pos": pa.array(range(len(order)), pa.int32())}
        )
        with self._registered("_selected", selected):
            table = self.con.sql(_PER_LABEL, params=[source]).to_arrow_table()
        rows = _LevelRows.of(table, len(order))
        if isinstance(take, np.ndarray):  # an array can be watched: forgotten when it is
            cache[id(take)] = (source, list(order), rows)
            weakref.finalize(take, cache.pop, id(take), None)
        return rows

    @contextmanager
    def source_reader(
        self, source: str, split: str, batch_rows: int = 100_000
    ) -> Iterator[pa.RecordBatchReader]:
        """Every sentence of one stored split, in corpus order, in `subset_rows`' columns: its
        mentions, label-level and span-level negatives as stored (none left out), as record
        batches. Read it whole inside the block."""
        rel = self.con.sql(_SOURCE_SQL.format(empty_spans=_EMPTY_SPANS), params=[source, split])
        to_reader = getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader
        reader = to_reader(batch_rows)
        try:
            yield reader
        finally:
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
        with self._registered("_selected", selected):
            if sentences is None:
                yield sql
                return
            with self._registered("_chosen", sentences):
                yield sql

    @contextmanager
    def _registered(self, name: str, table: pa.Table) -> Iterator[None]:
        self.con.register(name, table)
        try:
            yield
        finally:
            self.con.unregister(name)


def _sentence_starts(table: pa.Table) -> np.ndarray:
    """Where each sentence's rows start in a (split, idx)-grouped table, and the end."""
    split = table.column("split").to_numpy(zero_copy_only=False)
    idx = table.column("idx").to_numpy()
    new = np.ones(idx.size, dtype=bool)
    new[1:] = (idx[1:] != idx[:-1]) | (split[1:] != split[:-1])
    return np.append(np.flatnonzero(new), idx.size)


def _stable_argsort(pos: np.ndarray) -> np.ndarray:
    """`np.argsort(pos, kind="stable")` of label places (0 <= pos < 2**32), in one or two
    passes over 16-bit keys, which NumPy sorts by radix (about 3x faster than its merge sort
    of 64-bit keys at NuNER's 2.4M rows)."""
    by = np.argsort(pos.astype(np.uint16), kind="stable")  # the low 16 bits
    if pos.size and int(pos.max()) >= 1 << 16:
        by = by[np.argsort((pos[by] >> 16).astype(np.uint16), kind="stable")]
    return by


class _WalkIndex(NamedTuple):
    """The rows label by label, as every walk over them reads them (`_walk_index`)."""

    label_first: list[int]  # where each label's rows start in the two arrays below, and the end
    sentences_of: np.ndarray  # each row's sentence, label by label
    mentions_of: np.ndarray  # each row's mentions, label by label
    totals: list[int]  # each label's mentions


def _walk_index(pos: np.ndarray, n: np.ndarray, first: np.ndarray, labels: int) -> _WalkIndex:
    """`_walk`'s view of the rows (made once for the refits of one level: `_LevelRows`)."""
    sentence = np.repeat(np.arange(first.size - 1), np.diff(first))
    by_label = _stable_argsort(pos)
    label_first = np.searchsorted(pos[by_label], np.arange(labels + 1)).tolist()
    totals = np.bincount(pos, weights=n, minlength=labels).astype(np.int64).tolist()
    return _WalkIndex(label_first, sentence[by_label], n[by_label], totals)


def _walk(
    pos: np.ndarray,
    n: np.ndarray,
    first: np.ndarray,
    take: np.ndarray,
    size: int,
    index: _WalkIndex | None = None,
) -> tuple[list[int], dict[int, int]]:
    """`fit_level`'s walk over the labels in order: each taken as planned where the size
    allows it, else capped at what is left of the size (when its forced mentions leave
    room), else left out.

    The level's size is counted as it grows: a whole label's every mention, a capped label's
    cap or, where more, its forced mentions (those in the sentences kept for whole labels: a
    draw never cuts them). Taking a label whole keeps its sentences not yet kept; they grow
    the size by its mentions and by the capped labels' forced mentions that pass their caps
    with them. Only a sentence holding a capped label (`capped_in`) can do the latter, and a
    label's forced mentions are only read at its turn or once it is capped, so they are
    counted then (`pos`, `n`: each (sentence, label) row's label and mentions, a sentence's
    rows together from `first[i]` to `first[i + 1]`; `index`: their `_walk_index`, made
    here when not given)."""
    labels = take.size
    if index is None or len(index.totals) != labels:
        index = _walk_index(pos, n, first, labels)
    label_first, sentences_of, mentions_of, totals = index
    kept = np.zeros(first.size - 1, dtype=bool)  # the sentences of whole labels
    capped_in = np.zeros(first.size - 1, dtype=bool)  # the sentences holding a capped label
    # the capped labels in the order they were capped (slot k >= 1; 0: not capped), each
    # one's cap and forced mentions (its mentions in `kept`)
    slot = np.zeros(labels, dtype=np.int64)
    cap, forced = np.zeros(labels + 1, dtype=np.int64), np.zeros(labels + 1, dtype=np.int64)
    capped: list[int] = []
    grown = 0
    whole: list[int] = []
    for j, t in enumerate(take.tolist()):
        room = size - grown
        if room <= 0:
            break
        if t <= 0:
            continue
        lo, hi = label_first[j], label_first[j + 1]
        sent = sentences_of[lo:hi]
        was = kept[sent]
        if t >= totals[j]:
            new = sent[~was]
            gain = totals[j]
            touched = new[capped_in[new]]
            if touched.size:  # the capped labels' mentions in the new sentences
                starts, sizes = first[touched], first[touched + 1] - first[touched]
                rows = np.repeat(starts + sizes - sizes.cumsum(), sizes) + np.arange(sizes.sum())
                k = len(capped)
                more = np.bincount(slot[pos[rows]], weights=n[rows], minlength=k + 1)[1:]
                more = more.astype(np.int64)
                c, f = cap[1 : k + 1], forced[1 : k + 1]
                gain += int((np.maximum(c, f + more) - np.maximum(c, f)).sum())
            if gain <= room:
                kept[new] = True
                if touched.size:
                    forced[1 : k + 1] += more
                grown += gain
                whole.append(j)
                continue
        held = int(mentions_of[lo:hi][was].sum())
        if held <= room:  # in part: a draw of its sentences (none past its forced ones)
            capped.append(j)
            slot[j] = len(capped)
            cap[len(capped)], forced[len(capped)] = min(t, room), held
            capped_in[sent] = True
            grown += max(min(t, room), held)
    caps = {j: int(cap[k]) for k, j in enumerate(capped, start=1)}
    return whole, dict(sorted(caps.items()))


def _selection(
    pos: np.ndarray,
    n: np.ndarray,
    first: np.ndarray,
    forced: np.ndarray,
    sentences: pa.Table,
    labels: list[str],
    cap: np.ndarray,
) -> Selection:
    """The selection from (sentence, label) rows in the order the draw walks them (`pos`:
    each row's place in `labels`, `n`: its mentions; a sentence's rows from `first[i]` to
    `first[i + 1]`): the `forced` sentences (they come first) and those `_draw` keeps
    (`sentences`: each sentence's split and idx)."""
    n_forced = int(forced.sum())
    counts = np.zeros(len(labels), dtype=np.int64)
    np.add.at(counts, pos[: first[n_forced]], n[: first[n_forced]])
    rest = first[n_forced:] - first[n_forced]
    at = first[n_forced]
    drawn = _draw(pos[at:], n[at:], rest, np.where(cap < 0, np.iinfo(np.int64).max, cap), counts)
    keep = np.concatenate([np.ones(n_forced, dtype=bool), drawn])
    return Selection(
        counts={lab: int(k) for lab, k in zip(labels, counts.tolist(), strict=True) if k},
        sentences=sentences.filter(pa.array(keep)).cast(_SENTENCE_KEYS),
        drawn=int(drawn.sum()),
    )


def _per_sentence_selection(table: pa.Table, labels: list[str], cap: np.ndarray) -> Selection:
    """`select_sentences` from the rows of `_PER_SENTENCE`."""
    first = _sentence_starts(table)
    starts = pa.array(first[:-1])
    forced = table.column("forced").to_numpy(zero_copy_only=False)[first[:-1]].astype(bool)
    keys = pa.table({"split": table.column("split").take(starts), "idx": table["idx"].take(starts)})
    pos = table.column("pos").to_numpy().astype(np.int64)
    n = table.column("n").to_numpy().astype(np.int64)
    return _selection(pos, n, first, forced, keys, labels, cap)


_SENTENCE_KEYS = pa.schema([("split", pa.string()), ("idx", pa.int32())])


@dataclass
class _LevelRows:
    """A level order's (sentence, label) rows as `_PER_LABEL` reads them (`pos`: each row's
    place in the order, `n`: its mentions, int64; a sentence's rows from `first[i]` to
    `first[i + 1]`; `split`, `idx`: each sentence's key), with what walks and draws over
    them derive, made once (`Store.fit_level` and `Store.select_fitted` share them)."""

    pos: np.ndarray
    n: np.ndarray
    first: np.ndarray
    split: pa.Array
    idx: pa.Array
    labels: int
    #: seed -> each sentence's place in the seeded order (`Store._draw_ranks`)
    draws: dict[int, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(cls, table: pa.Table, labels: int) -> _LevelRows:
        first = _sentence_starts(table)
        starts = pa.array(first[:-1])
        pos = table.column("pos").to_numpy().astype(np.int64)
        n = table.column("n").to_numpy().astype(np.int64)
        split, idx = table.column("split").take(starts), table.column("idx").take(starts)
        return cls(pos, n, first, split.combine_chunks(), idx.combine_chunks(), labels)

    @cached_property
    def sentence(self) -> np.ndarray:
        """Each row's sentence (its number in the rows' order)."""
        return np.repeat(np.arange(self.first.size - 1), np.diff(self.first))

    @cached_property
    def walk_index(self) -> _WalkIndex:
        return _walk_index(self.pos, self.n, self.first, self.labels)

    def keys(self, which: np.ndarray) -> pa.Table:
        """The split and idx of sentences `which` (numbers in the rows' order)."""
        at = pa.array(which)
        return pa.table({"split": self.split.take(at), "idx": self.idx.take(at)})
