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

#: The rows of a level: every mention of its labels in the sentences it keeps (all sentences
#: with one, or `_chosen`), grouped per sentence, with the labels' negatives: label-level
#: ones (distinct labels) and span-level ones (distinct spans, none equal to a stored mention).
_ROWS = """
WITH kept AS (
    SELECT m.split, m.idx, m.start, m.stop, m.label
    FROM mentions m JOIN _selected c ON m.label = c.label {chosen}
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
#: `Store.source_reader`: one stored split's sentences with everything stored on them.
_SOURCE_SQL = """
WITH m AS (
    SELECT idx, list({{'start': start, 'end': stop, 'label': label}} ORDER BY start, stop, label)
               AS spans
    FROM mentions WHERE source = $1 AND split = $2 GROUP BY idx
), n AS (
    SELECT idx, list(label ORDER BY label) AS negatives
    FROM negatives WHERE source = $1 AND split = $2 GROUP BY idx
), ns AS (
    SELECT idx, list({{'start': start, 'end': stop, 'label': label}} ORDER BY start, stop, label)
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
        return _selection(table, labels, cap)

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
        the size. Returns (whole labels, capped labels -> cap); `select_sentences` then draws.
        """
        pos, n, first = self._per_label(source, order, take)
        take = np.asarray(take, dtype=np.int64)
        whole, caps = _walk(pos.astype(np.int64), n.astype(np.int64), first, take, int(size))
        return [order[i] for i in whole], {order[i]: q for i, q in caps.items()}

    def _per_label(
        self, source: str, order: list[str], take: object
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`_PER_LABEL`'s rows for `order`: each row's label (its place in `order`) and
        mentions (int32, as read), and where each sentence's rows start. They are kept while
        the plan `take` (the same array) lives: a level fitted again to a smaller size (the
        pipeline's `_equal_sizes`) has the same order and plan, and its rows are read once
        per build (about 27 MB for a NuNER level of 2.4M rows). A write to the store and
        `without_sentences` (entered or left) forget them all."""
        cache: dict[int, tuple[str, list[str], tuple[np.ndarray, np.ndarray, np.ndarray]]]
        cache = self.__dict__.setdefault("_per_label_cache", {})
        hit = cache.get(id(take))
        if hit is not None and hit[0] == source and hit[1] == order:
            return hit[2]
        selected = pa.table(
            {"label": pa.array(order, pa.string()), "pos": pa.array(range(len(order)), pa.int32())}
        )
        with self._registered("_selected", selected):
            table = self.con.sql(_PER_LABEL, params=[source]).to_arrow_table()
        pos, n = table.column("pos").to_numpy(), table.column("n").to_numpy()
        rows = pos, n, _sentence_starts(table)
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


def _walk(
    pos: np.ndarray, n: np.ndarray, first: np.ndarray, take: np.ndarray, size: int
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
    rows together from `first[i]` to `first[i + 1]`)."""
    labels = take.size
    sentence = np.repeat(np.arange(first.size - 1), np.diff(first))
    by_label = _stable_argsort(pos)
    label_first = np.searchsorted(pos[by_label], np.arange(labels + 1)).tolist()
    sentences_of, mentions_of = sentence[by_label], n[by_label]  # label by label
    totals = np.bincount(pos, weights=n, minlength=labels).astype(np.int64).tolist()
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


def _selection(table: pa.Table, labels: list[str], cap: np.ndarray) -> Selection:
    """`select_sentences` from the rows of `_PER_SENTENCE`."""
    pos = table.column("pos").to_numpy().astype(np.int64)
    n = table.column("n").to_numpy().astype(np.int64)
    split = table.column("split").to_numpy(zero_copy_only=False)
    idx = table.column("idx").to_numpy()
    first = _sentence_starts(table)
    forced = table.column("forced").to_numpy(zero_copy_only=False)[first[:-1]].astype(bool)
    n_forced = int(forced.sum())  # forced sentences come first
    counts = np.zeros(len(labels), dtype=np.int64)
    np.add.at(counts, pos[: first[n_forced]], n[: first[n_forced]])
    rest = first[n_forced:] - first[n_forced]
    at = first[n_forced]
    drawn = _draw(pos[at:], n[at:], rest, np.where(cap < 0, np.iinfo(np.int64).max, cap), counts)
    keep = np.concatenate([np.ones(n_forced, dtype=bool), drawn])
    starts = first[:-1][keep]
    sentences = pa.table({"split": split[starts].tolist(), "idx": pa.array(idx[starts])})
    return Selection(
        counts={lab: int(k) for lab, k in zip(labels, counts.tolist(), strict=True) if k},
        sentences=sentences.cast(pa.schema([("split", pa.string()), ("idx", pa.int32())])),
        drawn=int(drawn.sum()),
    )
