"""Memory bounded by the data: Familiarity, its bootstrap, the similarity matrix and the report
work on blocks of rows, and give the same bits as one block would.

The peaks are numpy's allocations as `tracemalloc` traces them (numpy reports its buffers to
it): deterministic, unlike a process's RSS. Timings are `scripts/bench_memory_labels.py`'s.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from builders.shift import familiarity as fam
from builders.shift.embedder import cosine_clipped
from builders.shift.familiarity import bootstrap_means, familiarity, summarise
from builders.shift.report import familiarity_report

# Run by `make test` with the installed versions; CI's version-floor run skips them (the
# mocked Hub transport and the allocation ceilings depend on library versions).
pytestmark = pytest.mark.slow

MiB = 1 << 20


def _peak(step: Callable[[], Any]) -> float:
    """Bytes allocated at the peak of `step` beyond what was held before it."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        step()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _sims(z: int, d: int, seed: int = 0) -> np.ndarray:
    """Clipped-cosine-like float32 similarities with ties (exact zeros, repeated values)."""
    rng = np.random.default_rng(seed)
    s = np.maximum(rng.beta(2.0, 5.0, size=(z, d)) - 0.05, 0).astype(np.float32)
    s[:, ::7] = np.float32(0.25)
    return s


def _unit(n: int, dim: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.parametrize("weighting", ["zipf", "linear", "unweighted"])
@pytest.mark.parametrize("elements", [1, 37, 5000])
def test_blocks_of_rows_change_no_bit(
    monkeypatch: pytest.MonkeyPatch, weighting: str, elements: int
) -> None:
    s = _sims(300, 120)
    counts = np.random.default_rng(1).integers(0, 40, 120)
    labels = [f"label {i % 50}" for i in range(120)]  # repeated texts: ties by index
    whole = familiarity(s, counts, k=200, weighting=weighting, labels=labels)
    monkeypatch.setattr(fam, "CHUNK_ELEMENTS", elements)
    got = familiarity(s, counts, k=200, weighting=weighting, labels=labels)
    assert np.array_equal(got, whole)


@pytest.mark.parametrize("elements", [1, 100, 4099])
def test_bootstrap_in_blocks_is_the_one_draw(monkeypatch: pytest.MonkeyPatch, elements: int):
    x = np.random.default_rng(2).random(1001)
    rng = np.random.default_rng(7)
    one_draw = x[rng.integers(0, x.size, size=(999, x.size))].mean(axis=1)
    monkeypatch.setattr(fam, "CHUNK_ELEMENTS", elements)
    assert np.array_equal(bootstrap_means(x, 999, 7), one_draw)


def test_a_nan_in_a_label_left_out_is_still_refused() -> None:
    s = _sims(4, 3)
    s[2, 1] = np.nan
    with pytest.raises(ValueError, match="sims contains NaN"):
        familiarity(s, np.array([3, 0, 2]))


def test_familiarity_peak_does_not_grow_with_rows_times_labels() -> None:
    # 40,000 evaluation labels x 200 training labels: 32 MB of float32 sims. Working on the
    # whole matrix at once took ~80 bytes an element (640 MB); blocks take a bounded amount.
    s = _sims(40_000, 200)
    counts = np.arange(1, 201)
    peak = _peak(lambda: familiarity(s, counts, k=1000))
    assert peak < 90 * MiB, peak / MiB


def test_bootstrap_peak_does_not_grow_with_replicas_times_labels() -> None:
    x = np.random.default_rng(3).random(100_000)  # 1,000 replicas x 100,000: 1.6 GB at once
    peak = _peak(lambda: summarise(x, n_boot=1000))
    assert peak < 40 * MiB, peak / MiB


@pytest.mark.parametrize(("na", "nb"), [(50, 20_000), (20_000, 50), (300, 300), (0, 4)])
def test_cosine_transposed_is_the_same_bits_without_a_copy(na: int, nb: int) -> None:
    a, b = _unit(na, 64, 4), _unit(nb, 64, 5)
    m = cosine_clipped(a, b, dtype=np.float32)
    t = cosine_clipped(a, b, dtype=np.float32, transposed=True)
    assert t.shape == (nb, na) and t.flags.c_contiguous and np.array_equal(t, m.T)
    assert np.array_equal(cosine_clipped(b, a, dtype=np.float32), t)


def test_cosine_peak_is_the_result_and_one_block() -> None:
    a, b = _unit(368, 384, 6), _unit(40_000, 384, 7)
    result = 368 * 40_000 * 4  # 59 MB; a transposed copy would double it
    blocks = 8192 * (384 + 368) * 8  # a block of rows in float64 and its products
    peak = _peak(lambda: cosine_clipped(a, b, dtype=np.float32))
    assert peak < result + blocks + 4 * MiB, peak / MiB


def test_report_copies_nothing_the_size_of_the_matrix() -> None:
    z, d = 30_000, 200
    s = _sims(z, d)  # 24 MB
    counts = np.arange(d) % 5  # a fifth of the labels left out: a copy of the kept columns
    train = [f"t {i}" for i in range(d)]
    evals = tuple(f"e {i}" for i in range(z))
    peak = _peak(lambda: familiarity_report(s, counts, train, {"b": evals}, model="m"))
    assert peak < s.nbytes / 2 + 70 * MiB, peak / MiB


def test_report_is_the_same_as_on_the_kept_columns() -> None:
    s = _sims(500, 90, seed=8)
    counts = np.arange(90) % 4
    train = [f"t {(i * 37) % 90}" for i in range(90)]  # not in text order
    sets = {"a": tuple(f"e {i}" for i in range(300)), "b": tuple(f"e {i}" for i in range(200, 500))}
    got = familiarity_report(s, counts, train, sets, model="m").to_dict()
    keep = counts > 0
    kept = [lab for lab, k in zip(train, keep, strict=True) if k]
    want = familiarity_report(s[:, keep], counts[keep], kept, sets, model="m").to_dict()
    assert got == want
    holders = {row["label"]: row["benchmarks"] for row in got["per_label"]}
    assert holders["e 250"] == ["a", "b"] and holders["e 0"] == ["a"]
