"""Subsets that mean what they say (METHOD.md section 4): exact matches, disjoint levels of a
minimum size, verdicts, size-matched levels, all-or-nothing writes and deterministic bytes."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pytest
from helpers import LABELS_A, SAMPLE_MEDIUM, SIZE_MATCHED, bio_corpus

from builders.errors import BuildersError
from builders.shift.embedder import Embedder
from builders.shift.report import similarity_matrix
from builders.shift.specs import EmbeddingSpec
from builders.splits import SplitConfig, build
from builders.splits import subsets as subsets_module
from builders.splits.strategies.quantile import QuantileOptions
from builders.store import Store
from builders.store.ingest import ingest

MINILM = "all-MiniLM-L6-v2"


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes (hidden temp folders included)."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture
def sample_db(sample_results: dict, tmp_path: Path) -> Path:
    db = tmp_path / "s.duckdb"
    shutil.copy(sample_results["db"], db)
    return db


def test_an_exact_label_has_similarity_one(sample_db: Path) -> None:
    train = ["year", "person", "film year", "genre"]
    evals = ("year", "genre", "actor")
    with Store(sample_db) as store:
        m, _ = similarity_matrix(store, Embedder(MINILM), train, evals)
    assert m[0, 0] == 1.0 and m[3, 1] == 1.0  # exactly, whatever float32 says
    assert m[2, 0] < 1.0 and m[1, 2] < 1.0  # other pairs keep their cosine


def test_verdicts_on_the_sample(sample_results: dict) -> None:
    """The bundled sample, MiniLM (numbers in the module docstring of test_splits)."""
    for strategy in ("entropy", "max"):
        res = sample_results[strategy]
        v = res.verdicts
        assert set(v.falls) == {"union", *res.benchmarks}
        union = v.falls["union"]
        assert list(union["values"]) == ["low", "medium", "high"]
        values = list(union["values"].values())
        assert union["falls"] == (values[0] > values[1] > values[2])
        assert v.overlap == {"low/medium": 0, "low/high": 0, "medium/high": 0}
        for sub in res.subsets:
            assert v.shares[sub.level]["labels"] == pytest.approx(sub.labels / res.full.labels)
            assert v.shares[sub.level]["mentions"] == pytest.approx(
                sub.mentions / res.full.mentions
            )
            assert v.versus_full[sub.level]["full"] == res.full.familiarity.union_macro
        failed = [b for b, f in v.falls.items() if not f["falls"]]
        assert bool(failed) == any("does not fall" in line for line in v.failed)
        low = res.subsets[0].familiarity.union_macro
        assert (low < res.full.familiarity.union_macro) == bool(v.notes)


def test_verdicts_reach_build_json_and_the_card(sample_results: dict) -> None:
    import json

    res = sample_results["entropy"]
    folder = Path(res.subsets[0].path)
    record = json.loads((folder / "entropy" / "build.json").read_text())
    assert record["verdicts"]["falls"]["union"]["falls"] == res.verdicts.falls["union"]["falls"]
    assert record["labels"][0] == max(
        ({"label": k, "mentions": v} for k, v in res.subsets[0].label_counts.items()),
        key=lambda r: (r["mentions"], r["label"]),
    )
    card = (folder / "README.md").read_text()
    assert "## Verdicts" in card and "## Labels" in card
    assert ("## Limitations" in card) == bool(res.verdicts.failed or res.verdicts.notes)
    for line in res.verdicts.failed + res.verdicts.notes:
        assert line in card


def test_levels_that_share_labels_are_refused_before_anything_is_written(
    sample_db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    cfg = SplitConfig(  # a low cut of half the labels overlaps the middle band
        "pilener-sample",
        "max",
        embedding=EmbeddingSpec(MINILM),
        options=QuantileOptions(low_quantile=0.5, medium_band=SAMPLE_MEDIUM),
    )
    with Store(sample_db) as store, pytest.raises(BuildersError) as err:
        build(store, cfg, out)
    msg = str(err.value)
    assert msg.startswith("pilener-sample: 368 labels cannot give disjoint low/medium/high")
    assert "the low and medium levels share" in msg and "Nothing was written" in msg
    assert "--low-quantile" in msg and "--medium-band" in msg
    assert not out.exists()


def test_levels_too_small_are_refused_with_their_numbers(tmp_path: Path) -> None:
    corpus = bio_corpus(tmp_path / "c.txt", LABELS_A[:14], 28)  # 14 labels, 2 mentions each
    out = tmp_path / "out"
    with Store(tmp_path / "s.duckdb") as store:
        ingest(store, "columns", corpus, name="tiny")
        with pytest.raises(BuildersError) as err:
            build(store, SplitConfig("tiny", "max", embedding=EmbeddingSpec(MINILM)), out)
    msg = str(err.value)
    assert "tiny: 14 labels cannot give disjoint low/medium/high levels" in msg
    assert re.search(
        r"the low level has \d labels and \d+ mentions \(at least 3 and 100 wanted\)", msg
    )
    assert "--min-labels and --min-mentions" in msg
    assert not out.exists()


def test_a_failed_build_leaves_earlier_output_byte_identical(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    cfg = SplitConfig(
        "pilener-sample",
        "entropy",
        embedding=EmbeddingSpec(MINILM),
        options=QuantileOptions(medium_band=SAMPLE_MEDIUM),
    )
    with Store(sample_db) as store:
        build(store, cfg, out)
        before = _tree(out)
        # 1. refused by the checks: nothing computed is written
        with pytest.raises(BuildersError, match="cannot give disjoint"):
            build(
                store,
                SplitConfig(
                    "pilener-sample", "entropy", embedding=EmbeddingSpec(MINILM), min_labels=50
                ),
                out,
            )
        assert _tree(out) == before
        # 2. a failure while the third folder is staged: no folder changes
        real = subsets_module._write_config
        calls = []

        def fail_third(where, res, sub, record):  # type: ignore[no-untyped-def]
            calls.append(sub.level)
            if len(calls) == 3:
                raise OSError("disk full")
            return real(where, res, sub, record)

        monkeypatch.setattr(subsets_module, "_write_config", fail_third)
        other = SplitConfig(
            "pilener-sample",
            "entropy",
            embedding=EmbeddingSpec(MINILM),
            options=QuantileOptions(medium_band=(0.4, 0.6)),
        )
        with pytest.raises(OSError, match="disk full"):
            build(store, other, out)
    assert calls == ["low", "medium", "high"]
    assert _tree(out) == before  # no half-written folder, no temp folder left behind


def test_a_failed_swap_puts_every_folder_back(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from builders.hub import folder as folder_module

    out = tmp_path / "out"
    with Store(sample_db) as store:
        cfg = SplitConfig(
            "pilener-sample",
            "entropy",
            embedding=EmbeddingSpec(MINILM),
            options=QuantileOptions(medium_band=SAMPLE_MEDIUM),
        )
        build(store, cfg, out)
        before = _tree(out)
        real, swaps = folder_module.swap_in, []

        def fail_last(tmp: Path, target: Path):  # type: ignore[no-untyped-def]
            swaps.append(target.name)
            if target.name.endswith("high-shift"):
                raise OSError("rename failed")
            return real(tmp, target)

        monkeypatch.setattr(folder_module, "swap_in", fail_last)
        other = SplitConfig(
            "pilener-sample",
            "entropy",
            embedding=EmbeddingSpec(MINILM),
            options=QuantileOptions(medium_band=(0.4, 0.6)),
        )
        with pytest.raises(OSError, match="rename failed"):
            build(store, other, out)
    assert len(swaps) == 3
    assert _tree(out) == before


def test_size_matched_levels_by_mentions(sample_db: Path) -> None:
    cfg = SplitConfig("pilener-sample", "max", embedding=EmbeddingSpec(MINILM), **SIZE_MATCHED)
    with Store(sample_db) as store:
        (res,) = build(store, cfg)
    target = res.subsets[0].selection["matched_to"]
    assert {s.selection["matched"] for s in res.subsets} == {"mentions"}
    for sub in res.subsets:
        assert sub.rows is not None
        per_sentence = pc.list_value_length(sub.rows.column("spans"))
        mentions = int(pc.sum(per_sentence).as_py())
        assert mentions == sub.mentions  # Familiarity counts what the rows hold
        # the size counted on what is written: never over it, and the levels within 1%
        assert target * 0.99 <= mentions <= target
    # each level drew from its own end of the ranking: low keeps the highest scores it had
    low = res.levels[0]
    scores = res.scores[low.selected_mask()]
    assert scores.min() >= np.sort(res.scores[res.cuts["low"].mask])[0]


def test_size_matched_levels_by_labels(sample_db: Path) -> None:
    cfg = SplitConfig(
        "pilener-sample",
        "max",
        embedding=EmbeddingSpec(MINILM),
        options=QuantileOptions(medium_band=SAMPLE_MEDIUM, match="labels"),
    )
    with Store(sample_db) as store:
        (res,) = build(store, cfg)
    n = {s.labels for s in res.subsets}
    assert len(n) == 1
    (size,) = n
    assert size == min(int(res.cuts[lv].mask.sum()) for lv in ("low", "medium", "high"))
    high = res.levels[2]  # the lowest max scores of the high cut
    kept = res.scores[high.mask]
    rest = res.scores[res.cuts["high"].mask & ~high.mask]
    assert rest.size == 0 or kept.max() <= rest.min()


def test_same_bytes_whatever_the_cache_held_before(sample_results: dict, tmp_path: Path) -> None:
    """A store whose cache was filled in other batches gives the same build.json, card and
    parquet: each label's vector is computed in a canonical batch."""
    trees = []
    for fill_first in (None, "reversed"):
        db = tmp_path / f"{fill_first}.duckdb"
        with Store(db) as store:
            ingest(store, "pilener-sample")
            if fill_first:  # embed every label first, in another order and company
                labels = [lab for lab, _, _ in store.label_counts("pilener-sample")][::-1]
                Embedder(MINILM).embed_cached(store, ["extra label", *labels[:100]])
                Embedder(MINILM).embed_cached(store, labels)
            cfg = SplitConfig(
                "pilener-sample",
                "max",
                embedding=EmbeddingSpec(MINILM),
                options=QuantileOptions(medium_band=SAMPLE_MEDIUM),
            )
            build(store, cfg, tmp_path / f"out-{fill_first}")
        trees.append(_tree(tmp_path / f"out-{fill_first}"))
    assert trees[0] == trees[1]


@pytest.mark.parametrize(
    ("counts", "share", "cap"),
    [
        ([3135, 300, 150, 78], 0.5, 528),  # one label over: capped at the others' sum
        ([100, 100, 100, 100], 0.3, None),  # 25% each: nothing over (x is 120)
        ([500, 400, 50, 50], 0.3, 75),  # two labels over: 75 = 0.3 * (75 + 75 + 100)
        ([10, 10], 0.3, None),  # fewer than 1/0.3 labels: no cap meets it
    ],
)
def test_the_share_cap_is_the_fixed_point(counts: list[int], share: float, cap: int | None) -> None:
    """The cap x with x = share * sum(min(counts, x)): the labels over it capped at it hold
    `share` of the level each, the others are kept whole."""
    from builders.splits.levels import _water_level

    got = _water_level(np.array(counts), share)
    if cap is None:
        assert got is None or got >= max(counts)
        return
    assert got is not None and abs(got - cap) <= 1
    assert got <= share * np.minimum(counts, got).sum() + 1e-9
