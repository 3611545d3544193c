"""Levels placed by their Familiarity (METHOD.md section 8): windows of the familiarity
ranking, disjoint, of one size, ordered with a gap, at requested values or refused with the
range the corpus reaches. Every figure here is recomputed with the reference Familiarity."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders.errors import BuildersError
from builders.shift.coverage import familiarity_ranking
from builders.shift.familiarity import familiarity_reference
from builders.splits import SplitConfig
from builders.splits.dial import FULL_SCAN, Dial, Unreachable, choose, largest_size, place
from builders.splits.strategies.familiarity import FamiliarityOptions


def _corpus(seed: int, n_train: int = 400, n_eval: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """Similarities with a few close labels per evaluation label and a long tail, counts
    with a Zipf-like spread (a few big labels, many small ones)."""
    rng = np.random.default_rng(seed)
    sims = rng.uniform(0, 0.45, size=(n_train, n_eval))
    close = rng.integers(0, n_train, size=3 * n_eval)
    sims[close, np.repeat(np.arange(n_eval), 3)] = rng.uniform(0.6, 1.0, size=3 * n_eval)
    counts = np.maximum(1, (2000 / np.arange(1, n_train + 1) ** 0.9).astype(int))
    return sims, rng.permutation(counts)


def _check(placed, sims: np.ndarray, counts: np.ndarray, k: int, size: int) -> list[float]:
    """The promises of a placement, with Familiarity recomputed literally; its values."""
    seen: set[int] = set()
    values = []
    for p in placed:
        labels = p.labels.tolist()
        assert not seen & set(labels), "levels share labels"
        seen |= set(labels)
        assert int(p.take.sum()) == size
        assert all(0 < t <= min(counts[d], k) for d, t in zip(labels, p.take, strict=True))
        take = np.zeros(counts.size, dtype=np.int64)
        take[p.labels] = p.take
        f = familiarity_reference(sims.T, take, k=k).mean()
        assert f == pytest.approx(p.familiarity, abs=1e-9)
        values.append(f)
    return values


@settings(max_examples=30)  # each example searches every start open to the levels at several sizes
@given(seed=st.integers(0, 500))
def test_default_levels_fall_with_the_gap_at_one_size(seed: int) -> None:
    sims, counts = _corpus(seed)
    ranking = familiarity_ranking(sims, counts, k=200)
    dial, placed = choose(
        ranking, sims.T.copy(), ("low", "medium", "high"), targets=None, min_gap=0.05,
        tolerance=0.02, size=None, smallest=50, k=200, weighting="zipf", min_labels=3,
    )  # fmt: skip
    low, medium, high = _check(placed, sims, counts, 200, dial.size)
    assert low - medium >= 0.05 and medium - high >= 0.05
    assert [p.level for p in placed] == ["low", "medium", "high"]
    assert all(p.stop - p.start >= 3 for p in placed)


def test_targets_are_met_within_the_tolerance() -> None:
    sims, counts = _corpus(1)
    ranking = familiarity_ranking(sims, counts, k=200)
    levels = ("low", "medium", "high")
    dial, free = choose(
        ranking, sims.T.copy(), levels, targets=None, min_gap=0.05, tolerance=0.02,
        size=None, smallest=50, k=200, weighting="zipf",
    )  # fmt: skip
    low, medium, high = (p.familiarity for p in free)
    targets = (low - 0.01, medium + 0.005, high + 0.01)
    placed = place(dial, levels, targets, 0.05, 0.02)
    values = _check(placed, sims, counts, 200, dial.size)
    assert all(abs(v - t) <= 0.02 for v, t in zip(values, targets, strict=True))
    assert [p.target for p in placed] == list(targets)
    assert values[0] - values[1] >= 0.05 and values[1] - values[2] >= 0.05


def test_unreachable_targets_name_the_range() -> None:
    sims, counts = _corpus(2)
    ranking = familiarity_ranking(sims, counts, k=200)
    with pytest.raises(Unreachable) as e:
        choose(
            ranking, sims.T.copy(), ("low", "medium", "high"), targets=(0.99, 0.5, 0.1),
            min_gap=0.05, tolerance=0.02, size=None, smallest=50, k=200, weighting="zipf",
        )  # fmt: skip
    assert "reach Familiarity" in str(e.value) and "low 0.990" in str(e.value)
    assert 0 < e.value.low < e.value.high < 0.99


def test_a_size_that_does_not_fit_is_refused_with_the_largest_that_does() -> None:
    sims, counts = _corpus(3)
    ranking = familiarity_ranking(sims, counts, k=200)
    top = largest_size(ranking, 3, 50)
    with pytest.raises(Unreachable, match=f"the largest size that fits is {top:,}"):
        choose(
            ranking, sims.T.copy(), ("low", "medium", "high"), targets=None, min_gap=0.05,
            tolerance=0.02, size=top + 1, smallest=50, k=200, weighting="zipf",
        )  # fmt: skip


def test_two_levels_take_the_ends() -> None:
    sims, counts = _corpus(4)
    ranking = familiarity_ranking(sims, counts, k=200)
    dial = Dial(ranking, sims.T.copy(), 3000, k=200, weighting="zipf", min_labels=3)
    low, high = place(dial, ("low", "high"), None, 0.05, 0.02)
    values = dial.evaluated()
    admissible = [v for s, v in values.items() if dial.labels_at(s) >= 3]
    assert low.familiarity == max(admissible) and high.familiarity == min(admissible)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"targets": (0.5, 0.4, 0.3)}, "use --strategy familiarity"),
        ({"strategy": "familiarity", "targets": (0.5, 0.4)}, "gives 2 values for 3 levels"),
        ({"strategy": "familiarity", "targets": (0.5, 0.48, 0.3)}, "at least --min-gap 0.05"),
        ({"strategy": "familiarity", "targets": (0.3, 0.4, 0.5)}, "at least --min-gap"),
        ({"strategy": "familiarity", "targets": (1.5, 0.4, 0.1)}, r"must lie in \[0, 1\]"),
        ({"strategy": "familiarity", "low_quantile": 0.9}, "--low-quantile is an option of"),
        ({"strategy": "familiarity", "match": "mentions"}, "--match is an option of"),
        ({"strategy": "familiarity", "protocol": "paper"}, "--protocol is an option of"),
        ({"strategy": "familiarity", "level_mentions": 10}, "below --min-mentions"),
        ({"strategy": "familiarity", "levels": ("high", "low"), "targets": (0.3, 0.5)}, "order"),
        ({"check_model": "all-mpnet-base-v2"}, "is the build's own --model"),
        ({"strategy": "familiarity", "targets": "0.5,x,0.3"}, "'x' is not a number"),
    ],
)
def test_familiarity_options_are_checked_before_anything_is_read(
    changes: dict, message: str
) -> None:
    with pytest.raises(BuildersError, match=message):
        SplitConfig.from_dict({"source": "pilener", **changes})


def test_check_models_from_a_name_a_list_and_the_recorded_command() -> None:
    """A scenario or an older build.json names one check model as a string; the command line
    repeats --check-model; a model named twice, or the build's own, is refused."""
    assert SplitConfig("mine", check_model="all-MiniLM-L6-v2").check_model == ("all-MiniLM-L6-v2",)
    assert SplitConfig("mine", check_model=None).check_model == ()
    cfg = SplitConfig("mine", check_model=["all-MiniLM-L6-v2", "/models/other"])
    assert cfg.check_model == ("all-MiniLM-L6-v2", "/models/other")
    command = cfg.command_line()
    assert "--check-model all-MiniLM-L6-v2 --check-model /models/other" in command
    with pytest.raises(BuildersError, match="is named twice"):
        SplitConfig(
            "mine", check_model=["all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"]
        )
    with pytest.raises(BuildersError, match="is the build's own --model"):
        SplitConfig(
            "mine", check_model=["all-MiniLM-L6-v2", "sentence-transformers/all-mpnet-base-v2"]
        )


def test_targets_from_a_scenario_string_and_the_recorded_command() -> None:
    cfg = SplitConfig(
        "mine", strategy="familiarity", options=FamiliarityOptions(targets="0.55, 0.42,0.3")
    )
    assert cfg.options.targets == (0.55, 0.42, 0.3)
    command = cfg.command_line()
    assert "--targets 0.55,0.42,0.3" in command and "--min-gap 0.05" in command


def _exactly(ranking, sims: np.ndarray, size: int, targets=None) -> list | None:
    """A placement at `size` over every start (the test corpora are small enough for the
    search to scan them all too), or None."""
    dial = Dial(ranking, sims.T.copy(), size, k=200, weighting="zipf", min_labels=3)
    assert dial.last + 1 <= FULL_SCAN
    try:
        return place(dial, ("low", "medium", "high"), targets, 0.05, 0.02)
    except Unreachable:
        return None


def test_the_default_size_is_the_largest_that_places_the_levels() -> None:
    """A size 15% larger than the one chosen does not place the levels (it did: the sizes
    were tried in 10% steps and passed over unless medium sat in the middle); none is under
    K mentions."""
    for seed in range(4):
        sims, counts = _corpus(seed)
        ranking = familiarity_ranking(sims, counts, k=200)
        dial, placed = choose(
            ranking, sims.T.copy(), ("low", "medium", "high"), targets=None, min_gap=0.05,
            tolerance=0.02, size=None, smallest=50, k=200, weighting="zipf", min_labels=3,
        )  # fmt: skip
        assert dial.size >= 200
        assert _check(placed, sims, counts, 200, dial.size)
        larger = int(dial.size * 1.15)
        assert larger > largest_size(ranking, 3, 1) or _exactly(ranking, sims, larger) is None


def test_targets_that_a_placement_meets_are_accepted() -> None:
    """A ranking whose Familiarity does not fall along it (its back half first): targets that
    windows of some size meet are found, though the first windows are not the most familiar
    (a three-window screen that assumed they were refused them)."""
    sims, counts = _corpus(5)
    ranking = familiarity_ranking(sims, counts, k=200)
    half = ranking.order.size // 2
    turned = replace(ranking, order=np.concatenate([ranking.order[half:], ranking.order[:half]]))
    levels = ("low", "medium", "high")
    given = _exactly(turned, sims, 2000)
    assert given is not None
    targets = tuple(p.familiarity for p in given)
    dial, placed = choose(
        turned, sims.T.copy(), levels, targets=targets, min_gap=0.05, tolerance=0.02,
        size=None, smallest=50, k=200, weighting="zipf", min_labels=3,
    )  # fmt: skip
    values = _check(placed, sims, counts, 200, dial.size)
    assert all(abs(v - t) <= 0.02 for v, t in zip(values, targets, strict=True))
    assert dial.size >= 2000


def test_no_level_is_under_k_mentions() -> None:
    """Three levels of K = 200 mentions need 600 usable mentions; 450 are refused with the
    largest size that fits (the sizes went down to --min-mentions, 50 here)."""
    sims, _ = _corpus(6, n_train=30)
    ranking = familiarity_ranking(sims, np.full(30, 15), k=200)
    with pytest.raises(Unreachable, match=r"at least 200 \(K\) mentions .*fits is 150\)"):
        choose(
            ranking, sims.T.copy(), ("low", "medium", "high"), targets=None, min_gap=0.05,
            tolerance=0.02, size=None, smallest=50, k=200, weighting="zipf",
        )  # fmt: skip


def _reference(placed, sims: np.ndarray, counts: np.ndarray) -> list[float]:
    """Each placed level's Familiarity under `sims`, computed literally (K = 200)."""
    values = []
    for p in placed:
        take = np.zeros(counts.size, dtype=np.int64)
        take[p.labels] = np.minimum(p.take, counts[p.labels])
        values.append(float(familiarity_reference(sims.T, take, k=200).mean()))
    return values


def test_a_grid_search_tries_the_windows_packed_from_the_front(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At the largest size that fits, the levels can only be the windows packed one after
    another. A ranking too long to scan every start is searched on a grid of starts over the
    room each level has, packed windows included, so a corpus whose Familiarity falls along
    the ranking gets levels of that size (a grid over the whole ranking missed them)."""
    import builders.splits.dial as dial_module

    monkeypatch.setattr(dial_module, "FULL_SCAN", 0)
    sims = np.repeat(np.linspace(1.0, 0.0, 3000)[:, None], 8, axis=1)
    ranking = familiarity_ranking(sims, np.full(3000, 5), k=200)
    dial, placed = choose(
        ranking, sims.T.copy(), ("low", "medium", "high"), targets=None, min_gap=0.05,
        tolerance=0.02, size=None, smallest=50, k=200, weighting="zipf", min_labels=3,
    )  # fmt: skip
    assert dial.size == largest_size(ranking, 3, 1) == 5000
    assert [p.start for p in placed] == [0, 1000, 2000]


def _boosted(sims: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Another model's similarities: the same, but `labels` much closer to every evaluation
    label."""
    other = sims.copy()
    other[labels] = np.minimum(other[labels] + 0.4, 1.0)
    return other


def test_levels_keep_the_gap_under_every_model() -> None:
    """Levels placed by one model alone can break the gap under another (here its medium
    labels are closer under the second); placed under both, every gap holds under each."""
    levels = ("low", "medium", "high")
    options = dict(
        targets=None, min_gap=0.05, tolerance=0.02, size=None, smallest=50, k=200,
        weighting="zipf", min_labels=3,
    )  # fmt: skip
    for seed in range(3):
        sims, counts = _corpus(seed)
        ranking = familiarity_ranking(sims, counts, k=200)
        _, alone = choose(ranking, sims.T.copy(), levels, **options)
        other = _boosted(sims, alone[1].labels)
        under_other = _reference(alone, other, counts)
        assert under_other[0] - under_other[1] < 0.05  # the setup: one model alone breaks it
        dial, placed = choose(ranking, [sims.T.copy(), other.T.copy()], levels, **options)
        _check(placed, sims, counts, 200, dial.size)
        again = _reference(placed, other, counts)
        assert [p.checks for p in placed] == [(pytest.approx(v, abs=1e-9),) for v in again]
        for low, medium, high in ([p.familiarity for p in placed], again):
            assert low - medium >= 0.05 and medium - high >= 0.05


def test_a_model_that_breaks_every_gap_is_refused_with_each_models_gaps() -> None:
    sims, counts = _corpus(1)
    ranking = familiarity_ranking(sims, counts, k=200)
    flat = np.full_like(sims, 0.5)  # no window is more familiar than another under it
    with pytest.raises(Unreachable) as e:
        choose(
            ranking, [sims.T.copy(), flat.T.copy()], ("low", "medium", "high"), targets=None,
            min_gap=0.05, tolerance=0.02, size=None, smallest=50, k=200, weighting="zipf",
            models=("mine", "flat"),
        )  # fmt: skip
    text = str(e.value)
    assert "apart under every model" in text and "placed by mine alone" in text
    assert re.search(r"flat low/medium 0\.000, medium/high 0\.000", text), text


def test_a_corpus_without_contrast_is_refused_quickly() -> None:
    """Every label equally close to every evaluation label: no two windows differ, no size
    gives levels 0.05 apart; each size is searched once."""
    import builders.splits.dial as dial_module

    sims = np.full((60, 4), 0.5)
    counts = np.full(60, 20)
    ranking = familiarity_ranking(sims, counts, k=50)
    calls: list[int] = []
    real = dial_module.place

    def counted(dial, *args):
        calls.append(dial.size)
        return real(dial, *args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dial_module, "place", counted)
        with pytest.raises(Unreachable, match=r"levels at least 0\.05 apart: levels of") as e:
            choose(
                ranking, sims.T.copy(), ("low", "medium", "high"), targets=None, min_gap=0.05,
                tolerance=0.02, size=None, smallest=20, k=50, weighting="zipf",
            )  # fmt: skip
    assert "within" not in str(e.value)  # no targets were asked for
    assert len(calls) == len(set(calls))


def test_verdicts_hold_familiarity_levels_to_their_targets_and_sizes() -> None:
    from types import SimpleNamespace

    from builders.splits.levels import Verdicts, _gaps_and_sizes, _targets_missed

    def sub(level: str, value: float, mentions: int, target: float | None):
        return SimpleNamespace(
            level=level,
            mentions=mentions,
            familiarity=SimpleNamespace(union_macro=value),
            selection={"target": target, "tolerance": 0.02 if target is not None else None},
        )

    subs = [
        sub("low", 0.60, 1000, 0.55),
        sub("medium", 0.52, 1000, 0.52),
        sub("high", 0.30, 970, None),
    ]
    missed = _targets_missed(subs)  # type: ignore[arg-type]
    assert (
        len(missed) == 1 and "low level's Familiarity (0.600) misses its target 0.55" in missed[0]
    )
    failed = _gaps_and_sizes(Verdicts(), subs, 0.1)  # type: ignore[arg-type]
    assert any("are 0.080 apart, less than the 0.1 asked" in f for f in failed)
    assert any("sizes differ by 3.0%" in f for f in failed)
    assert _gaps_and_sizes(Verdicts(), subs, None) == []  # quantile builds promise neither
