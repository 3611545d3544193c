"""The familiarity ranking (METHOD.md section 8): a greedy on Familiarity per mention.

The fast greedy (run-length top-K, lazy gains, only labels Familiarity can read) is checked
against a literal greedy that recomputes Familiarity with the reference implementation for
every candidate at every step."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders.shift.coverage import contributors, familiarity_ranking
from builders.shift.familiarity import familiarity, familiarity_reference


def _padded_familiarity(sims_dz: np.ndarray, take: np.ndarray, k: int, weighting: str) -> float:
    """G(S): Familiarity with the positions a set does not fill counted as 0 (equal to the
    Familiarity once the set holds K mentions), literally: repeat, sort, weight."""
    if take.sum() == 0:
        return 0.0
    f = familiarity_reference(sims_dz.T, take, k=k, weighting=weighting)
    n = min(k, int(take.sum()))
    pos = np.arange(1, k + 1, dtype=np.float64)
    w = {"zipf": 1 / pos, "linear": (k - pos + 1) / k, "unweighted": np.ones(k)}[weighting]
    # familiarity_reference normalises by the first n weights (by K when unweighted)
    norm_n = float(k) if weighting == "unweighted" else w[:n].sum()
    return float((f * norm_n / w.sum()).mean())


def _read(sims_dz: np.ndarray, usable: np.ndarray, k: int) -> set[int]:
    """The labels with one of the first K positions of some evaluation label in the whole
    corpus (a label starting at position < K, with a positive similarity; ties at the K-th
    value count)."""
    out: set[int] = set()
    for z in range(sims_dz.shape[1]):
        s = sims_dz[:, z]
        order = sorted(np.flatnonzero(usable > 0), key=lambda d: (-s[d], d))
        start = 0
        kth = None
        for d in order:
            if start >= k:
                break
            if s[d] > 0:
                out.add(int(d))
                kth = s[d]
            start += usable[d]
        if kth is not None:
            out |= {int(d) for d in np.flatnonzero((s == kth) & (usable > 0))}
    return out


def _literal_greedy(sims_dz: np.ndarray, counts: np.ndarray, k: int, weighting: str) -> list[int]:
    """Among the labels Familiarity reads, take while something gains the label of the
    largest gain per mention (ties: index)."""
    usable = np.minimum(counts, k)
    read = _read(sims_dz, usable, k)
    take = np.zeros(counts.size, dtype=np.int64)
    order: list[int] = []
    current = 0.0
    while True:
        best, best_key, best_value = -1, 0.0, current
        for d in sorted(read - set(order)):  # by index: the first of equal gains wins
            take[d] = usable[d]
            value = _padded_familiarity(sims_dz, take, k, weighting)
            take[d] = 0
            gain = value - current
            key = float(f"{gain / usable[d]:.9e}") if gain > 1e-12 else 0.0  # 10 digits
            if key > best_key:
                best, best_key, best_value = int(d), key, value
        if best < 0:
            return order
        take[best] = usable[best]
        order.append(best)
        current = best_value


@given(
    seed=st.integers(0, 10_000),
    n_train=st.integers(1, 12),
    n_eval=st.integers(1, 5),
    k=st.sampled_from([1, 3, 10, 40]),
    weighting=st.sampled_from(["zipf", "linear", "unweighted"]),
    ties=st.booleans(),
)
def test_the_fast_greedy_takes_what_the_literal_one_takes(
    seed: int, n_train: int, n_eval: int, k: int, weighting: str, ties: bool
) -> None:
    """With `ties`, similarities and counts come from a few values, so that many labels gain
    exactly as much per mention: they must go by label index."""
    rng = np.random.default_rng(seed)
    sims = rng.choice([0.0, 0.2, 0.5, 0.7, 0.9, 1.0], size=(n_train, n_eval))
    if not ties:
        sims = sims * rng.uniform(0.9, 1.0, size=(n_train, n_eval))
    counts = rng.choice([0, 2, 5], size=n_train) if ties else rng.integers(0, 25, size=n_train)
    r = familiarity_ranking(sims, counts, k=k, weighting=weighting)
    literal = _literal_greedy(sims, counts, k, weighting)
    assert list(r.order[: r.greedy]) == literal
    live = np.flatnonzero(counts > 0)
    assert sorted(r.order.tolist()) == live.tolist()  # every label with a mention, once


def test_the_greedy_part_holds_the_whole_corpus_familiarity() -> None:
    """Once the greedy stops, the labels it took give every evaluation label the corpus's own
    first K positions: their Familiarity is the full corpus's."""
    rng = np.random.default_rng(7)
    sims = rng.uniform(0, 1, size=(300, 9)) ** 3
    counts = rng.integers(1, 400, size=300)
    r = familiarity_ranking(sims, counts, k=100)
    take = np.zeros(300, dtype=np.int64)
    take[r.order[: r.greedy]] = r.usable[r.order[: r.greedy]]
    full = familiarity(sims.T, counts, k=100)
    part = familiarity(sims.T, take, k=100)
    assert np.allclose(part, full, atol=1e-12)
    assert r.greedy < 300  # the rest added nothing
    read = _read(sims, np.minimum(counts, 100), 100)
    assert set(r.order[: r.greedy]) <= read == set(contributors(sims, np.minimum(counts, 100), 100))


def test_the_tail_follows_the_closest_similarity_and_ties_go_by_index() -> None:
    sims = np.array([[1.0, 0.0], [0.2, 0.1], [0.3, 0.0], [0.3, 0.1], [0.05, 0.0]])
    counts = np.array([5, 5, 5, 5, 5])
    r = familiarity_ranking(sims, counts, k=5)
    # label 0 fills the first row's five positions, label 1 the second's (label 3 ties with
    # it and adds nothing after it); the rest by their closest similarity, 2 before 3.
    assert (r.greedy, r.order.tolist()) == (2, [0, 1, 2, 3, 4])


def test_a_label_is_worth_at_most_k_mentions() -> None:
    r = familiarity_ranking(np.array([[0.9, 0.0], [0.0, 0.4]]), np.array([5000, 3]), k=1000)
    assert r.usable.tolist() == [1000, 3]
    # three mentions at 0.4 gain more per mention than a thousand at 0.9
    assert r.position.tolist() == [1, 0]


def test_labels_of_equal_gain_go_by_index() -> None:
    """Four copies of one label (same similarities, same counts) gain the same per mention,
    to the last bit or not: they are taken in index order, and so are equal tails."""
    row = np.array([0.31, 0.47, 0.05])
    sims = np.vstack([row * 0.5, row, row, row, row, row * 0.2])
    counts = np.array([3, 7, 7, 7, 7, 9])
    r = familiarity_ranking(sims, counts, k=14)
    assert r.order[: r.greedy].tolist() == [1, 2]  # two copies fill the 14 positions
    assert r.order[r.greedy :].tolist() == [3, 4, 0, 5]


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="shape"):
        familiarity_ranking(np.zeros((3, 2)), np.ones(4, dtype=int))
