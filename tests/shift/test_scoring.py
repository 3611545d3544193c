"""Scoring training labels (max, entropy) and quantile selection of label-shift levels."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from builders.shift.scoring import (
    MEDIUM_QUANTILES,
    QUANTILES,
    LevelRule,
    SelectionRule,
    default_rule,
    entropy_scores,
    max_scores,
    profile_for,
    select,
)


def direct_entropy(M: np.ndarray, t: float) -> np.ndarray:
    e = np.exp(M.astype(np.float64) / t)
    p = e / e.sum(axis=1, keepdims=True)
    return -(p * np.log(p)).sum(axis=1)


def test_max_scores():
    M = np.array([[0.1, 0.7, 0.3], [0.0, 0.0, 0.2]])
    np.testing.assert_array_equal(max_scores(M), [0.7, 0.2])


@settings(max_examples=200, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(1, 30), st.integers(1, 12)), elements=st.floats(0, 1)),
    st.sampled_from([0.01, 0.05, 1.0]),
)
def test_entropy_equals_direct_computation(M, t):
    # Values in [0, 1] and T >= 0.01 keep exp(M / T) <= e^100: the direct formula is safe.
    np.testing.assert_allclose(entropy_scores(M, t, chunk_rows=7), direct_entropy(M, t), atol=1e-9)


def test_entropy_limits():
    z = 80
    one_hot = np.zeros((1, z))
    one_hot[0, 3] = 1.0
    assert entropy_scores(one_hot)[0] == pytest.approx(0.0, abs=1e-30)
    assert entropy_scores(np.full((2, z), 0.4))[0] == pytest.approx(np.log(z), abs=1e-12)
    # Far beyond what exp() can hold directly: the log-softmax stays finite.
    assert np.isfinite(entropy_scores(np.array([[1.0, 0.0]]), temperature=1e-4)).all()


def test_entropy_chunks_do_not_change_result():
    M = np.random.default_rng(0).random((1000, 9)).astype(np.float32)
    np.testing.assert_array_equal(entropy_scores(M, chunk_rows=64), entropy_scores(M))


def test_matrix_errors():
    with pytest.raises(ValueError, match=re.escape("M must have shape (D, Z) with Z >= 1")):
        max_scores(np.zeros(4))
    with pytest.raises(ValueError, match="temperature must be > 0, got 0"):
        entropy_scores(np.zeros((2, 2)), temperature=0)
    with pytest.raises(ValueError, match="M contains NaN"):
        entropy_scores(np.array([[np.nan, 0.1]]))


def test_profiles_are_the_paper_table():
    assert QUANTILES["pilener"] == {"max": (0.99, 0.05), "entropy": (0.01, 0.95)}
    assert QUANTILES["nuner"] == {"max": (0.995, 0.005), "entropy": (0.005, 0.995)}
    assert MEDIUM_QUANTILES == (0.495, 0.505)
    assert profile_for(13_000) == "pilener"
    assert profile_for(49_999) == "pilener"
    assert profile_for(50_000) == "nuner"
    assert profile_for(190_000) == "nuner"


def test_levels_sides():
    assert default_rule("pilener", "max").levels() == {
        "low": LevelRule("ge", (0.99,)),
        "medium": LevelRule("between", (0.495, 0.505)),
        "high": LevelRule("le", (0.05,)),
    }
    levels = default_rule("nuner", "entropy").levels()
    assert levels["low"] == LevelRule("le", (0.005,))
    assert levels["high"] == LevelRule("ge", (0.995,))


def test_select_counts_on_known_scores():
    scores = np.arange(1001, dtype=float)  # q(x) = 1000 * x exactly
    res = select(scores, "max", default_rule("pilener", "max"))
    assert res["low"].thresholds == (990.0,) and res["low"].count == 11
    assert res["high"].thresholds == (50.0,) and res["high"].count == 51
    assert res["medium"].thresholds == (495.0, 505.0) and res["medium"].count == 11
    ent = select(scores, "entropy", default_rule("pilener", "entropy"))
    assert ent["low"].count == 11 and ent["high"].count == 51
    assert ent["low"].indices.max() == 10 and ent["high"].indices.min() == 950
    assert res["low"].to_dict() == {
        "level": "low",
        "side": "ge",
        "quantiles": [0.99],
        "thresholds": [990.0],
        "count": 11,
        "tied": 0,
    }


def _paper_masks(scores: np.ndarray, strategy: str) -> dict[str, np.ndarray]:
    """The paper's quantile rule, literally (METHOD.md section 3)."""
    low_q, high_q = QUANTILES["pilener"][strategy]
    q = lambda x: np.quantile(scores, x, method="linear")  # noqa: E731
    band = (scores >= q(0.495)) & (scores <= q(0.505))
    if strategy == "max":
        return {"low": scores >= q(low_q), "medium": band, "high": scores <= q(high_q)}
    return {"low": scores <= q(low_q), "medium": band, "high": scores >= q(high_q)}


def _tol(strategy: str, b: float) -> float:
    return 1e-6 if strategy == "max" else 1e-3 * abs(b)


@settings(max_examples=150, deadline=None)
@given(
    arrays(np.float64, st.integers(1, 300), elements=st.floats(0, 3)),
    st.sampled_from(["max", "entropy"]),
)
def test_select_is_the_quantile_rule_with_tie_groups_kept_whole(scores, strategy):
    res = select(scores, strategy)  # default profile: 300 labels -> PileNER
    sides = {"max": {"low": "ge", "high": "le"}, "entropy": {"low": "le", "high": "ge"}}[strategy]
    for level, paper in _paper_masks(scores, strategy).items():
        want = paper.copy()
        if paper.any():  # every label tied with a weakest kept label is kept too
            kept = scores[paper]
            side = sides.get(level, "between")
            ends = {"ge": [kept.min()], "le": [kept.max()]}.get(side, [kept.min(), kept.max()])
            for b in ends:
                want |= np.abs(scores - b) <= _tol(strategy, b)
        np.testing.assert_array_equal(res[level].mask, want)
        assert res[level].tied == int(want.sum() - paper.sum())
    # a one-sided cut always keeps the extreme score; the medium band may hold none
    assert res["low"].count >= 1 and res["high"].count >= 1


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 3000), min_size=1, max_size=300, unique=True),
    st.sampled_from(["max", "entropy"]),
)
def test_without_ties_select_is_exactly_the_quantile_rule(ints, strategy):
    # distinct scores >= 0.2% apart: no two within 1e-6 absolute, nor within 1e-3 relative
    scores = 1.002 ** np.array(ints, dtype=np.float64)
    res = select(scores, strategy)
    for level, paper in _paper_masks(scores, strategy).items():
        np.testing.assert_array_equal(res[level].mask, paper)
        assert res[level].tied == 0


def test_tie_groups_are_kept_whole():
    # an exact label read as 0.99999994 in float32 ties with the 1.0 the low cut keeps
    scores = np.concatenate([[1.0, 1.0, 0.99999994, 0.9999], np.linspace(0.0, 0.5, 96)])
    low = select(scores, "max", default_rule("pilener", "max"))["low"]
    assert low.thresholds[0] == 1.0
    assert low.mask[:3].all() and not low.mask[3] and low.tied == 1
    # entropy ties are relative: 1.0005e-12 ties with the 1e-12 that q(0.01) of 100 keeps,
    # 1.01e-12 does not
    ent = np.concatenate([[1e-12, 1.0005e-12, 1.01e-12], np.linspace(1.0, 2.0, 97)])
    low = select(ent, "entropy", default_rule("pilener", "entropy"))["low"]
    assert low.thresholds[0] < 1.0005e-12
    assert low.mask[:2].all() and not low.mask[2:].any() and low.tied == 1


def test_default_profile_follows_label_count():
    big = np.random.default_rng(0).random(60_000)
    assert select(big, "max")["low"].quantiles == (0.995,)
    assert select(big[:1000], "max")["low"].quantiles == (0.99,)


def test_overrides():
    rule = default_rule("nuner", "max").with_overrides(low=0.9, medium=(0.4, 0.6))
    assert (rule.low, rule.high, rule.medium, rule.profile) == (0.9, 0.005, (0.4, 0.6), "custom")
    assert default_rule("nuner", "max").with_overrides() == default_rule("nuner", "max")
    res = select(np.arange(11, dtype=float), "max", rule)
    assert res["low"].count == 2 and res["medium"].thresholds == (4.0, 6.0)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"low": 1.5}, "low quantile must be in [0, 1], got 1.5"),
        ({"high": -0.1}, "high quantile must be in [0, 1], got -0.1"),
        ({"medium": (0.2, 1.01)}, "medium upper quantile must be in [0, 1], got 1.01"),
        ({"medium": (0.6, 0.4)}, "medium lower quantile must be <= upper, got 0.6 > 0.4"),
    ],
)
def test_override_validation(overrides, message):
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        default_rule("pilener", "entropy").with_overrides(**overrides)


def test_select_errors():
    with pytest.raises(ValueError, match=re.escape("unknown strategy 'mean'. Valid: entropy, max")):
        select(np.ones(3), "mean")
    with pytest.raises(ValueError, match="rule is for strategy 'entropy', not 'max'"):
        select(np.ones(3), "max", default_rule("pilener", "entropy"))
    with pytest.raises(ValueError, match=re.escape("scores must be a non-empty 1-D array")):
        select(np.array([]), "max")
    with pytest.raises(ValueError, match=re.escape("unknown strategy 'min'. Valid: entropy, max")):
        SelectionRule("min", 0.1, 0.9)
