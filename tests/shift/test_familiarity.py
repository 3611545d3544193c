"""Familiarity: reference values, closed form == literal repetition, invariants, summaries."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders.shift.familiarity import (
    Summary,
    exact_overlap,
    familiarity,
    familiarity_reference,
    summarise,
)

WEIGHTINGS = ("zipf", "linear", "unweighted")

# METHOD.md section 2 (the authors' published tests): sims, counts, K, zipf, linear, unweighted.
REFERENCE = [
    ((0.95, 0.8), (200, 200), 400, 0.93420, 0.91240, 0.875),
    ((0.95, 0.8, 0.7), (200, 500, 100), 800, 0.91956, 0.86401, 0.825),
]


@pytest.mark.parametrize("impl", [familiarity, familiarity_reference])
@pytest.mark.parametrize(("sims", "counts", "k", "zipf", "linear", "unweighted"), REFERENCE)
def test_reference_values(impl, sims, counts, k, zipf, linear, unweighted):
    s, c = np.array([sims]), np.array(counts)
    for weighting, expected in zip(WEIGHTINGS, (zipf, linear, unweighted), strict=True):
        assert impl(s, c, k, weighting)[0] == pytest.approx(expected, abs=1e-4)


def test_fewer_mentions_than_k_uses_n():
    # N = 3 < K = 10: zipf/linear average over 3 positions, unweighted divides by K.
    s, c = np.array([[0.9, 0.3]]), np.array([2, 1])
    h = 1 + 1 / 2 + 1 / 3
    assert familiarity(s, c, 10)[0] == pytest.approx((0.9 * 1.5 + 0.3 / 3) / h)
    assert familiarity(s, c, 10, "unweighted")[0] == pytest.approx(2.1 / 10)
    lin = np.array([10, 9, 8]) / 10
    assert familiarity(s, c, 10, "linear")[0] == pytest.approx((lin @ [0.9, 0.9, 0.3]) / lin.sum())


def test_negative_sims_clipped_and_zero_counts_ignored():
    s = np.array([[-0.5, 0.6, 0.99]])
    c = np.array([3, 2, 0])
    assert familiarity(s, c, 5, "unweighted")[0] == pytest.approx(0.6 * 2 / 5)


def test_empty_eval_and_float32():
    assert familiarity(np.zeros((0, 3)), np.array([1, 2, 3])).shape == (0,)
    rng = np.random.default_rng(1)
    s = rng.random((4, 50)).astype(np.float32)
    c = rng.integers(0, 9, 50)
    np.testing.assert_allclose(familiarity(s, c, 20), familiarity_reference(s, c, 20), atol=1e-12)


def test_many_ties_at_the_cut():
    # 200 columns tied at 0 (clipped) and 100 tied at 0.5 straddle the K-th position.
    s = np.concatenate([np.full(100, 0.5), np.zeros(200), np.array([0.9, 0.7])])[None, :]
    c = np.ones(302, dtype=int) * 3
    for w in WEIGHTINGS:
        for k in (1, 5, 50, 400, 2000):
            np.testing.assert_allclose(
                familiarity(s, c, k, w), familiarity_reference(s, c, k, w), atol=1e-12
            )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, "k must be an integer >= 1, got 0"),
        (
            {"weighting": "harmonic"},
            "unknown weighting 'harmonic'. Valid: zipf, linear, unweighted",
        ),
        ({"counts": np.array([1, 2])}, "counts must have shape (D,) = (3,) to match sims (2, 3)"),
        ({"counts": np.array([1, -2, 3])}, "counts must be >= 0, got -2 at index 1"),
        ({"counts": np.array([1.5, 2, 3])}, "counts must be integer-valued"),
        ({"counts": np.array([0, 0, 0])}, "no training label has a positive count"),
        ({"sims": np.zeros(3)}, "sims must have shape (Z, D), got shape (3,)"),
        ({"labels": ["a", "b"]}, "labels must have length D = 3 to match sims, got 2"),
    ],
)
def test_errors(kwargs, message):
    args = {"sims": np.full((2, 3), 0.5), "counts": np.array([1, 2, 3])} | kwargs
    for impl in (familiarity, familiarity_reference):
        with pytest.raises(ValueError, match=re.escape(message)):
            impl(**args)


@st.composite
def cases(draw):
    z = draw(st.integers(1, 3))
    d = draw(st.integers(1, 8))
    grid = draw(st.booleans())  # a coarse grid of values makes ties likely
    value = st.sampled_from([0.0, 0.25, 0.5, 0.8, 1.0]) if grid else st.floats(0, 1)
    sims = np.array(draw(st.lists(value, min_size=z * d, max_size=z * d))).reshape(z, d)
    counts = np.array(draw(st.lists(st.integers(0, 6), min_size=d, max_size=d)))
    if counts.sum() == 0:
        counts[0] = 1
    k = draw(st.integers(1, 40))  # often > sum(counts): N < K
    weighting = draw(st.sampled_from(WEIGHTINGS))
    return sims, counts, k, weighting


@settings(max_examples=200, deadline=None)
@given(cases(), st.booleans())
def test_closed_form_equals_reference(case, with_labels):
    sims, counts, k, weighting = case
    labels = [f"l{i}" for i in range(sims.shape[1])][::-1] if with_labels else None
    got = familiarity(sims, counts, k, weighting, labels)
    want = familiarity_reference(sims, counts, k, weighting, labels)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)
    assert np.all((got >= 0) & (got <= 1 + 1e-12))


@settings(max_examples=200, deadline=None)
@given(cases(), st.data())
def test_monotone_in_similarity(case, data):
    sims, counts, k, weighting = case
    row = data.draw(st.integers(0, sims.shape[0] - 1))
    col = data.draw(st.integers(0, sims.shape[1] - 1))
    raised = sims.copy()
    raised[row, col] = data.draw(st.floats(sims[row, col], 1))
    before = familiarity(sims, counts, k, weighting)
    after = familiarity(raised, counts, k, weighting)
    assert np.all(after >= before - 1e-12)


@settings(max_examples=200, deadline=None)
@given(cases(), st.randoms(use_true_random=False))
def test_invariant_to_training_label_order(case, rnd):
    sims, counts, k, weighting = case
    labels = [f"label {i}" for i in range(sims.shape[1])]
    perm = list(range(sims.shape[1]))
    rnd.shuffle(perm)
    got = familiarity(sims[:, perm], counts[perm], k, weighting, [labels[i] for i in perm])
    np.testing.assert_allclose(got, familiarity(sims, counts, k, weighting, labels), atol=1e-12)


def test_summarise_values_and_determinism():
    x = np.array([0.2, 0.4, 0.6, 0.8])
    s = summarise(x)
    assert isinstance(s, Summary)
    assert s.mean == pytest.approx(0.5)
    sigma = np.sqrt(0.05)  # population std
    assert s.std == pytest.approx(sigma)
    assert s.vb == pytest.approx({0.0: 0.5, 0.5: 0.5 - sigma / 2, 1.0: 0.5 - sigma})
    assert s.ci_low <= s.mean <= s.ci_high
    assert summarise(x, seed=0) == s
    assert summarise(x, seed=1).ci_low != s.ci_low or summarise(x, seed=1).ci_high != s.ci_high
    d = s.to_dict()
    assert d["vb_0.5"] == s.vb[0.5] and d["n"] == 4 and d["n_boot"] == 1000


def test_summarise_ci_contains_mean_on_random_data():
    x = np.random.default_rng(3).beta(2, 3, size=80)
    s = summarise(x, alphas=(0.0, 1.0), n_boot=500, seed=7)
    assert s.ci_low < s.mean < s.ci_high
    assert set(s.vb) == {0.0, 1.0}


def test_summarise_does_not_depend_on_label_order():
    x = np.random.default_rng(5).beta(2, 3, size=60)
    s = summarise(x, seed=0)
    for perm_seed in range(3):
        assert summarise(np.random.default_rng(perm_seed).permutation(x), seed=0) == s


def test_summarise_errors():
    with pytest.raises(ValueError, match=re.escape("per_label must be a non-empty 1-D array")):
        summarise(np.array([]))
    with pytest.raises(ValueError, match="n_boot must be >= 1, got 0"):
        summarise(np.array([0.5]), n_boot=0)


def test_exact_overlap():
    assert exact_overlap(["person", "city", "song", "city"], {"person", "song", "band"}) == 2 / 3
    assert exact_overlap(["x"], []) == 0.0
    with pytest.raises(ValueError, match="no evaluation labels"):
        exact_overlap([], ["a"])
