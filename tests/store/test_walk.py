"""`fit_level`'s walk (`draws.walk`) gives exactly what the straightforward walk gave: the
reference below is the walk as it was before it learned to skip the sentences that hold no
capped label (and to walk small labels with Python lists), compared on random inputs and on the
bundled sample's familiarity levels."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from helpers import SIZE_MATCHED

from builders.shift.specs import EmbeddingSpec
from builders.splits import SplitConfig, build
from builders.store import Store, draws, subsets
from builders.store.draws import stable_argsort, walk

MINILM = "all-MiniLM-L6-v2"


class _Walk:
    """The reference: the sentences kept for whole labels, every label's mentions in them
    (`forced`), and the level's size counted so far."""

    def __init__(self, pos: np.ndarray, n: np.ndarray, first: np.ndarray, labels: int):
        self.pos, self.n, self.first = pos, n, first
        self.sentence = np.repeat(np.arange(first.size - 1), np.diff(first))
        self.by_label = np.argsort(pos, kind="stable")
        self.label_first = np.searchsorted(pos[self.by_label], np.arange(labels + 1))
        self.totals = np.bincount(pos, weights=n, minlength=labels).astype(np.int64)
        self.kept = np.zeros(first.size - 1, dtype=bool)
        self.forced = np.zeros(labels, dtype=np.int64)
        self.cap = np.full(labels, -1, dtype=np.int64)  # -1: not capped
        self.size = 0

    def sentences_of(self, j: int) -> np.ndarray:
        return self.sentence[self.by_label[self.label_first[j] : self.label_first[j + 1]]]

    def added(self, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        starts, ends = self.first[new], self.first[new + 1]
        sizes = ends - starts
        rows = np.repeat(ends - sizes.cumsum(), sizes) + np.arange(int(sizes.sum()))
        labels, at = np.unique(self.pos[rows], return_inverse=True)
        return labels, np.bincount(at, weights=self.n[rows]).astype(np.int64)

    def whole_gain(self, j: int, labels: np.ndarray, more: np.ndarray) -> int:
        cap, forced = self.cap[labels], self.forced[labels]
        capped = cap >= 0
        cap, forced, more = cap[capped], forced[capped], more[capped]
        return int(
            self.totals[j] + (np.maximum(cap, forced + more) - np.maximum(cap, forced)).sum()
        )


def reference_walk(
    pos: np.ndarray, n: np.ndarray, first: np.ndarray, take: np.ndarray, size: int
) -> tuple[list[int], dict[int, int]]:
    w = _Walk(pos, n, first, take.size)
    whole: list[int] = []
    for j, t in enumerate(take.tolist()):
        room = size - w.size
        if room <= 0:
            break
        if t <= 0:
            continue
        if t >= w.totals[j]:
            sent = w.sentences_of(j)
            new = sent[~w.kept[sent]]
            labels, more = w.added(new)
            gain = w.whole_gain(j, labels, more)
            if gain <= room:
                w.kept[new] = True
                w.forced[labels] += more
                w.size += gain
                whole.append(j)
                continue
        cap = min(t, room)
        if w.forced[j] <= room:
            w.cap[j] = cap
            w.size += max(cap, int(w.forced[j]))
    caps = {j: int(c) for j, c in enumerate(w.cap.tolist()) if c >= 0}
    return whole, caps


def _random_rows(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """(pos, n, first, take) of a random level: sentences sharing labels (a few frequent,
    many rare, as in NuNER), one row per (sentence, label), plans that cap some labels."""
    labels = int(rng.integers(1, 60))
    sentences = int(rng.integers(1, 120))
    weights = rng.pareto(1.0, labels) + 0.05
    weights /= weights.sum()
    pos_parts, n_parts, first = [], [], [0]
    for _ in range(sentences):
        k = int(rng.integers(1, min(labels, 6) + 1))
        held = np.sort(rng.choice(labels, size=k, replace=False, p=weights))
        pos_parts.append(held)
        many = rng.random(k) < 0.1  # a passage holding many mentions of a label
        n_parts.append(np.where(many, rng.integers(5, 30, k), rng.integers(1, 4, k)))
        first.append(first[-1] + k)
    pos = np.concatenate(pos_parts).astype(np.int64)
    n = np.concatenate(n_parts).astype(np.int64)
    totals = np.bincount(pos, weights=n, minlength=labels).astype(np.int64)
    kind = rng.random(labels)
    take = np.where(kind < 0.6, totals, (totals * rng.random(labels)).astype(np.int64))
    take = np.where(kind > 0.95, 0, take)  # a label the plan takes none of
    take = np.where((kind > 0.9) & (kind <= 0.95), totals + 3, take)  # more than it has
    return pos, n, np.asarray(first, dtype=np.int64), take.astype(np.int64)


@pytest.mark.parametrize("seed", range(40))
def test_walk_is_the_reference_walk_on_random_levels(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(25):
        pos, n, first, take = _random_rows(rng)
        total = int(n.sum())
        for size in {1, total // 4 + 1, total // 2 + 1, int(total * rng.random()) + 1, total}:
            assert walk(pos, n, first, take, size) == reference_walk(pos, n, first, take, size)


@pytest.mark.parametrize("small", [0, 3, 10**9])
@pytest.mark.parametrize("seed", range(6))
def test_both_ways_of_walking_a_label_walk_alike(
    seed: int, small: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Labels of up to `SMALL_LABEL` rows are walked with Python lists, larger ones with
    NumPy: every label one way (0: NumPy, a billion: lists) or mixed, the reference walk."""
    monkeypatch.setattr(draws, "SMALL_LABEL", small)
    rng = np.random.default_rng(1000 + seed)
    for _ in range(15):
        pos, n, first, take = _random_rows(rng)
        total = int(n.sum())
        for size in {1, total // 3 + 1, int(total * rng.random()) + 1, total}:
            assert walk(pos, n, first, take, size) == reference_walk(pos, n, first, take, size)


def test_walk_of_no_rows() -> None:
    empty = np.zeros(0, dtype=np.int64)
    take = np.array([3, 0, 2], dtype=np.int64)
    first = np.zeros(1, dtype=np.int64)
    assert walk(empty, empty, first, take, 5) == reference_walk(empty, empty, first, take, 5)


@pytest.mark.parametrize("top", [10, 70_000, 300_000])
def test_stable_argsort_is_numpys(top: int) -> None:
    pos = np.random.default_rng(top).integers(0, top, 20_000)
    assert (stable_argsort(pos) == np.argsort(pos, kind="stable")).all()


@pytest.fixture(scope="module")
def sample_walks(sample_results: dict, tmp_path_factory: pytest.TempPathFactory) -> list:
    """Every walk of the bundled sample's familiarity build and of a size-matched max build
    (the inputs, and what the walk returned)."""
    seen: list = []
    mp = pytest.MonkeyPatch()

    def spy(*args):  # type: ignore[no-untyped-def]
        out = walk(*args)
        seen.append((args[:5], out))  # the sixth: the rows' walk index, made once per level
        return out

    mp.setattr(subsets, "walk", spy)  # as fit_level calls it
    try:
        with Store(sample_results["db"], read_only=True) as store:
            out = tmp_path_factory.mktemp("walks")
            build(
                store,
                SplitConfig("pilener-sample", "familiarity", embedding=EmbeddingSpec(MINILM)),
                out,
            )
            cfg = SplitConfig(
                "pilener-sample", "max", embedding=EmbeddingSpec(MINILM), **SIZE_MATCHED
            )
            build(store, cfg, out)
    finally:
        mp.undo()
    assert seen
    return seen


def test_walk_is_the_reference_walk_on_the_sample(sample_walks: list) -> None:
    capped = 0
    for (pos, n, first, take, size), out in sample_walks:
        assert out == reference_walk(pos, n, first, take, size)
        capped += len(out[1])
        for smaller in (size // 2, size // 5, size - 1):  # refits, and more caps
            got = walk(pos, n, first, take, smaller)
            assert got == reference_walk(pos, n, first, take, smaller)
            capped += len(got[1])
    assert capped, "the sample's levels cap labels: the walks go past capped ones"


def _most_frequent(store: Store, source: str, n: int) -> list[str]:
    """The source's `n` labels with the most mentions (ties by label)."""
    rows = store.con.execute(
        "SELECT label FROM mentions WHERE source = $1 GROUP BY label "
        "ORDER BY count(*) DESC, label LIMIT $2",
        [source, n],
    ).fetchall()
    return [lab for (lab,) in rows]


def test_a_refit_reads_the_level_rows_once(sample_results: dict) -> None:
    """`fit_level` keeps a level's rows while its plan (`take`) lives: fitting it again to a
    smaller size reads none, and gives what a fit from a fresh read gives."""
    source = "pilener-sample"
    with Store(sample_results["db"], read_only=True) as store:
        order = _most_frequent(store, source, 300)
        plan = np.full(len(order), 40, dtype=np.int64)
        first_fit = store.fit_level(source, order, plan, 3000)
        cache = store.__dict__["_per_label_cache"]
        rows = cache[id(plan)][2]
        smaller = store.fit_level(source, order, plan, 2000)
        assert cache[id(plan)][2] is rows  # not read again
        assert smaller != first_fit
        assert smaller == store.fit_level(source, order, plan.copy(), 2000)  # a fresh read
        assert first_fit == store.fit_level(source, order, plan.copy(), 3000)
        # another order under the same plan is read again
        other = store.fit_level(source, order[:-1], plan, 2000)
        assert cache[id(plan)][1][0] == order[:-1]  # (stored labels, places)
        assert other == store.fit_level(source, order[:-1], plan[:-1].copy(), 2000)
        key = id(plan)
        del plan
        gc.collect()
        assert key not in cache  # forgotten with the plan


def test_level_rows_read_before_a_view_change_are_not_reused(sample_results: dict) -> None:
    """A corpus seen without some sentences (`without_sentences`), or written to, has other
    level rows: rows kept for a plan are forgotten on entering and leaving the view."""
    source = "pilener-sample"
    order = ["person", "location", "organization"]
    take = np.array([5000, 5000, 5000])
    with Store(sample_results["db"], read_only=True) as store:
        fresh = store.fit_level(source, order, take.copy(), 4000)
        assert store.fit_level(source, order, take, 4000) == fresh  # kept for `take`
        ids = [
            sid
            for (sid,) in store.con.execute(
                "SELECT DISTINCT s.sentence_id FROM sentences s JOIN mentions m "
                "USING (source, split, idx) WHERE s.source = $1 AND m.label = 'person'",
                [source],
            ).fetchall()
        ]
        with store.without_sentences(source, ids):
            inside = store.fit_level(source, order, take, 4000)
            assert inside == store.fit_level(source, order, take.copy(), 4000)
        assert inside != fresh  # no person sentence inside
        assert store.fit_level(source, order, take, 4000) == fresh  # not the view's rows


def test_a_fitted_level_draws_the_sentences_select_sentences_draws(sample_results: dict) -> None:
    """`select_fitted` (the draw from the rows `fit_level` read) keeps the very sentences,
    in the same order, with the same counts, as `select_sentences` (the draw in SQL), for
    whole and capped labels and seeds; a label outside the order goes to SQL."""
    source = "pilener-sample"
    with Store(sample_results["db"], read_only=True) as store:
        order = _most_frequent(store, source, 400)
        plan = np.full(len(order), 30, dtype=np.int64)
        compared = 0
        for size, seed in ((4000, 0), (1500, 7), (300, 3)):
            whole, caps = store.fit_level(source, order, plan, size)
            assert caps, "the plan caps labels: the draw has work to do"
            got = store.select_fitted(source, order, plan, whole, caps, seed)
            want = store.select_sentences(source, whole, caps, seed)
            assert got.counts == want.counts and got.drawn == want.drawn
            assert got.sentences.equals(want.sentences)
            compared += got.drawn
        assert compared
        big = np.full(len(order), 10**9, dtype=np.int64)
        every = store.fit_level(source, order, big, 10**12)  # nothing capped: no draw
        assert not every[1] and every[0]
        got = store.select_fitted(source, order, big, every[0], {}, 0)
        assert got == store.select_sentences(source, every[0], {}, 0)
        outside = store.select_fitted(source, order[:10], plan[:10], order[10:12], {}, 0)
        assert outside == store.select_sentences(source, order[10:12], {}, 0)


def test_a_fitted_level_with_no_rows_draws_nothing(sample_results: dict) -> None:
    """A level whose labels have no mention in the source (none in its order, or none
    stored; a decontaminated corpus can lose a label's every sentence) is drawn as the SQL
    draws it: nothing, not an error on its empty seeded order."""
    with Store(sample_results["db"], read_only=True) as store:
        for order, whole, caps in (
            ([], [], {}),
            (["no such label"], [], {"no such label": 3}),
            (["no such label"], ["no such label"], {}),
        ):
            take = np.full(len(order), 5, dtype=np.int64)
            got = store.select_fitted("pilener-sample", order, take, whole, caps, 0)
            assert got == store.select_sentences("pilener-sample", whole, caps, 0)
            assert got.mentions == 0 and got.drawn == 0
