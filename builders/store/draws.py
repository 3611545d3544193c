"""NumPy over a level's (sentence, label) rows (`LevelRows`), for `builders.store.subsets`:
the walk that fits a level to its size (`walk`) and the seeded draw that keeps a capped label's
sentences within its cap (`draw`, `selection`), both METHOD.md section 4. `Selection` is what a
level keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

from builders.deferred import np, pa, pc


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


def labels_table(whole: list[str], caps: Mapping[str, int]) -> tuple[list[str], np.ndarray]:
    """The selected labels, whole ones first (each once; a label both whole and capped is
    whole), and each one's cap (-1: whole)."""
    whole = sorted(set(whole))
    kept = set(whole)
    capped = sorted((lab, int(n)) for lab, n in caps.items() if lab not in kept)
    labels = [*whole, *(lab for lab, _ in capped)]
    cap = np.array([-1] * len(whole) + [n for _, n in capped], dtype=np.int64)
    return labels, cap


def draw(
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


def sentence_starts(table: pa.Table) -> np.ndarray:
    """Where each sentence's rows start in a (split, idx)-grouped table, and the end."""
    return np.flatnonzero(_changes(table, "idx", np.ones(1, dtype=bool)))


def _changes(table: pa.Table, column: str, end: np.ndarray) -> np.ndarray:
    """Whether each row's split or `column` differs from the row before's (the first row's
    does), then `end` (splits compared by Arrow: as NumPy objects, most of the time)."""
    split, key = table.column("split"), table.column(column).to_numpy()
    new = np.empty(key.size + end.size, dtype=bool)
    new[: min(key.size, 1)] = True
    new[key.size :] = end
    if key.size > 1:
        if split.null_count:  # (none stored) compared as Python objects: None == None
            text = split.to_numpy(zero_copy_only=False)
            other = text[1:] != text[:-1]
        else:
            other = pc.not_equal(split.slice(1), split.slice(0, key.size - 1))
            other = other.to_numpy(zero_copy_only=False)
        np.not_equal(key[1:], key[:-1], out=new[1 : key.size])
        new[1 : key.size] |= other
    return new


def count_runs(table: pa.Table) -> pa.Table:
    """Sorted (split, idx, pos) rows counted: each distinct row once, with `n`, how many
    times it comes (int32, as SQL's `count(*)::INTEGER`)."""
    idx = table.column("idx").to_numpy()
    pos = table.column("pos").to_numpy()
    new = _changes(table, "idx", np.zeros(0, dtype=bool))
    new[1:] |= pos[1:] != pos[:-1]
    at = np.flatnonzero(new)
    return pa.table(
        {
            "split": table.column("split").take(pa.array(at)),
            "idx": pa.array(idx[at], pa.int32()),
            "pos": pa.array(pos[at], pa.int32()),
            "n": pa.array(np.diff(at, append=idx.size).astype(np.int32), pa.int32()),
        }
    )


def stable_argsort(pos: np.ndarray) -> np.ndarray:
    """`np.argsort(pos, kind="stable")` of label places (0 <= pos < 2**32), in one or two
    passes over 16-bit keys, which NumPy sorts by radix (about 3x faster than its merge sort
    of 64-bit keys at NuNER's 2.4M rows)."""
    by = np.argsort(pos.astype(np.uint16), kind="stable")  # the low 16 bits
    if pos.size and int(pos.max()) >= 1 << 16:
        by = by[np.argsort((pos[by] >> 16).astype(np.uint16), kind="stable")]
    return by


class WalkIndex(NamedTuple):
    """The rows label by label, as every walk over them reads them (`walk_index`)."""

    label_first: list[int]  # where each label's rows start in the two arrays below, and the end
    sentences_of: np.ndarray  # each row's sentence, label by label
    mentions_of: np.ndarray  # each row's mentions, label by label
    totals: list[int]  # each label's mentions


def walk_index(pos: np.ndarray, n: np.ndarray, first: np.ndarray, labels: int) -> WalkIndex:
    """`walk`'s view of the rows (made once for the refits of one level: `LevelRows`)."""
    sentence = np.repeat(np.arange(first.size - 1), np.diff(first))
    by_label = stable_argsort(pos)
    label_first = np.searchsorted(pos[by_label], np.arange(labels + 1)).tolist()
    totals = np.bincount(pos, weights=n, minlength=labels).astype(np.int64).tolist()
    return WalkIndex(label_first, sentence[by_label], n[by_label], totals)


def walk(
    pos: np.ndarray,
    n: np.ndarray,
    first: np.ndarray,
    take: np.ndarray,
    size: int,
    index: WalkIndex | None = None,
) -> tuple[list[int], dict[int, int]]:
    """`fit_level`'s walk over the labels in order (METHOD.md section 4, a level's size on what
    it writes): each taken as planned where the size allows it, else capped at what is left of
    the size (when its forced mentions leave room), else left out. A capped label's forced
    mentions (in the sentences kept for whole labels) are read at its turn; later only a
    sentence holding a capped label (`capped_in`) adds to them. `pos`, `n`, `first`: as in
    `LevelRows`; `index`: their `walk_index`, made here when not given."""
    labels = take.size
    if index is None or len(index.totals) != labels:
        index = walk_index(pos, n, first, labels)
    state = _Walk(pos, n, first, index, size)
    for j, t in enumerate(take.tolist()):
        if state.grown >= size:
            break
        if t > 0:
            state.label(j, t)
    caps = {j: state.cap[k] for k, j in enumerate(state.capped, start=1)}
    return state.whole, dict(sorted(caps.items()))


#: A label with at most this many rows is walked with Python lists and `bytearray`s: most
#: labels of a NuNER level hold a few sentences, where NumPy's cost per call (a dozen calls
#: a label) is most of the walk's time; larger ones with NumPy. Both give the same walk.
SMALL_LABEL = 64


class _Walk:
    """`walk`'s state. The sentences kept and those holding a capped label are `bytearray`s with
    NumPy views on the same memory; capped label k >= 1 (in the order capped) has its cap and
    forced mentions in slot k of `cap` and `forced`, each label its slot in `slot` (0: none)."""

    def __init__(
        self, pos: np.ndarray, n: np.ndarray, first: np.ndarray, index: WalkIndex, size: int
    ) -> None:
        self.pos, self.n, self.first, self.size = pos, n, first, size
        self.label_first, self.sentences_of, self.mentions_of, self.totals = index
        self.kept_b, self.capped_b = bytearray(first.size - 1), bytearray(first.size - 1)
        self.kept = np.frombuffer(self.kept_b, dtype=bool)
        self.capped_in = np.frombuffer(self.capped_b, dtype=bool)
        self.slot_np = np.zeros(len(self.totals), dtype=np.int64)
        self.slot = [0] * len(self.totals)
        self.cap, self.forced = [0], [0]
        self.capped: list[int] = []
        self.whole: list[int] = []
        self.grown = 0

    def label(self, j: int, t: int) -> None:
        """Label `j` (planned `t` mentions): whole where its gain fits, else capped where its
        forced mentions fit, else left out."""
        lo, hi = self.label_first[j], self.label_first[j + 1]
        room = self.size - self.grown
        small = hi - lo <= SMALL_LABEL
        if small:
            sent = self.sentences_of[lo:hi].tolist()
            kept = self.kept_b
            if t >= self.totals[j]:
                new = [s for s in sent if not kept[s]]
                touched = [s for s in new if self.capped_b[s]]
                if self._took(j, room, self._more_py(touched) if touched else {}):
                    for s in new:
                        kept[s] = 1
                    return
            marks = self.mentions_of[lo:hi].tolist()
            held = sum(m for s, m in zip(sent, marks, strict=True) if kept[s])
        else:
            sent_np = self.sentences_of[lo:hi]
            was = self.kept[sent_np]
            if t >= self.totals[j]:
                new_np = sent_np[~was]
                touched_np = new_np[self.capped_in[new_np]]
                if self._took(j, room, self._more_np(touched_np) if touched_np.size else {}):
                    self.kept[new_np] = True
                    return
            held = int(self.mentions_of[lo:hi][was].sum())
        if held <= room:  # in part: a draw of its sentences (none past its forced ones)
            self.capped.append(j)
            k = len(self.capped)
            self.slot[j] = self.slot_np[j] = k
            self.cap.append(min(t, room))
            self.forced.append(held)
            if small:
                for s in sent:
                    self.capped_b[s] = 1
            else:
                self.capped_in[sent_np] = True
            self.grown += max(min(t, room), held)

    def _took(self, j: int, room: int, more: dict[int, int]) -> bool:
        """Whether label `j` is taken whole: its mentions, and `more` (capped slot -> its
        mentions in the label's new sentences) past the caps they pass, fit in `room`; if
        so, the forced mentions, the size and the whole labels grow by it."""
        gain = self.totals[j]
        for k, m in more.items():
            c, f = self.cap[k], self.forced[k]
            gain += max(c, f + m) - max(c, f)
        if gain > room:
            return False
        for k, m in more.items():
            self.forced[k] += m
        self.grown += gain
        self.whole.append(j)
        return True

    def _more_py(self, touched: list[int]) -> dict[int, int]:
        """The capped labels' mentions in sentences `touched` (slot -> mentions), row by row."""
        more: dict[int, int] = {}
        first, slot = self.first, self.slot
        for s in touched:
            a, b = first[s : s + 2].tolist()
            for p, m in zip(self.pos[a:b].tolist(), self.n[a:b].tolist(), strict=True):
                k = slot[p]
                if k:
                    more[k] = more.get(k, 0) + m
        return more

    def _more_np(self, touched: np.ndarray) -> dict[int, int]:
        """`_more_py` for many sentences, in NumPy."""
        first = self.first
        starts, sizes = first[touched], first[touched + 1] - first[touched]
        rows = np.repeat(starts + sizes - sizes.cumsum(), sizes) + np.arange(sizes.sum())
        slots = self.slot_np[self.pos[rows]]
        more = np.bincount(slots, weights=self.n[rows], minlength=len(self.cap))[1:]
        at = np.flatnonzero(more)
        return dict(zip((at + 1).tolist(), more[at].astype(np.int64).tolist(), strict=True))


def selection(
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
    `first[i + 1]`): the `forced` sentences (they come first) and those `draw` keeps
    (`sentences`: each sentence's split and idx)."""
    n_forced = int(forced.sum())
    counts = np.zeros(len(labels), dtype=np.int64)
    np.add.at(counts, pos[: first[n_forced]], n[: first[n_forced]])
    rest = first[n_forced:] - first[n_forced]
    at = first[n_forced]
    drawn = draw(pos[at:], n[at:], rest, np.where(cap < 0, np.iinfo(np.int64).max, cap), counts)
    keep = np.concatenate([np.ones(n_forced, dtype=bool), drawn])
    at = np.flatnonzero(counts)  # the labels with a mention kept, in order
    return Selection(
        counts=dict(zip([labels[i] for i in at.tolist()], counts[at].tolist(), strict=True)),
        sentences=sentences.filter(pa.array(keep)).cast(
            pa.schema([("split", pa.string()), ("idx", pa.int32())])
        ),
        drawn=int(drawn.sum()),
    )


def per_sentence_selection(table: pa.Table, labels: list[str], cap: np.ndarray) -> Selection:
    """`select_sentences` from the rows of `_PER_SENTENCE`."""
    rows = LevelRows.of(table, len(labels))
    forced = table.column("forced").to_numpy(zero_copy_only=False)[rows.first[:-1]].astype(bool)
    keys = pa.table({"split": rows.split, "idx": rows.idx})
    return selection(rows.pos, rows.n, rows.first, forced, keys, labels, cap)


@dataclass
class LevelRows:
    """A level order's (sentence, label) rows (`pos`: each row's place in the order, `n`: its
    mentions; a sentence's rows from `first[i]` to `first[i + 1]`; `split`, `idx`: each
    sentence's key), and what walks and draws over them derive, made once."""

    pos: np.ndarray
    n: np.ndarray
    first: np.ndarray
    split: pa.Array
    idx: pa.Array
    labels: int
    #: seed -> each sentence's place in the seeded order (`Store._draw_ranks`)
    draws: dict[int, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(cls, table: pa.Table, labels: int) -> LevelRows:
        first = sentence_starts(table)
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
    def walk_index(self) -> WalkIndex:
        return walk_index(self.pos, self.n, self.first, self.labels)

    def keys(self, which: np.ndarray) -> pa.Table:
        """The split and idx of sentences `which` (numbers in the rows' order)."""
        at = pa.array(which)
        return pa.table({"split": self.split.take(at), "idx": self.idx.take(at)})
