"""`familiarity_of`: the authors' `compute_metric` shape, the toolkit's report, no store needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import familiarity_of
from builders.errors import BuildersError
from builders.shift.benchmarks import evaluation_sets
from builders.shift.embedder import canonical_name
from builders.shift.report import FamiliarityReport, LabelTable, measure
from builders.shift.specs import EmbeddingSpec
from builders.store import Store
from builders.store.ingest import ingest

MINILM = "all-MiniLM-L6-v2"


def _same(a: FamiliarityReport, b: FamiliarityReport) -> None:
    assert a.union_macro == pytest.approx(b.union_macro, abs=1e-6)
    assert a.per_label == pytest.approx(b.per_label, abs=1e-6)
    assert a.overlap == b.overlap
    for name, rep in a.per_benchmark.items():
        other = b.per_benchmark[name]
        assert rep.familiarity == pytest.approx(other.familiarity, abs=1e-6)
        assert rep.summary == pytest.approx(other.summary, abs=1e-6)
        assert [t.label for t in rep.top_training_labels] == [
            t.label for t in other.top_training_labels
        ]


def test_equals_the_store_path_on_the_bundled_sample(db: Path) -> None:
    sets = evaluation_sets("crossner-ai,mit-movie")
    with Store(db) as store:
        ingest(store, "pilener-sample")
        table = LabelTable.load(store, "pilener-sample")
        want = measure(store, table, sets, embedding=EmbeddingSpec(MINILM))
        counts = {lab: int(n) for lab, n in zip(table.labels, table.mentions, strict=True)}
    got = familiarity_of(counts, sets, model=MINILM)  # in-memory cache: nothing written
    assert isinstance(got, FamiliarityReport)
    _same(got, want)
    assert got.to_dict().keys() == want.to_dict().keys()
    # one label per mention, as the authors' compute_metric takes them, in any order and case
    mentions = [lab.upper() for lab, n in counts.items() for _ in range(n)][::-1]
    _same(familiarity_of(mentions, sets, model=MINILM), want)


def test_plain_list_and_cache(tmp_path: Path) -> None:
    rep = familiarity_of(
        ["person"] * 5 + ["city"], ["person", "location", "person"], model=MINILM, k=3
    )
    assert list(rep.per_benchmark) == ["evaluation"]
    assert rep.per_benchmark["evaluation"].labels == ("person", "location")
    assert rep.per_label["person"] == pytest.approx(1.0, abs=1e-6)  # top 3 are `person` (sim 1)
    assert rep.overlap == 0.5 and rep.k == 3
    cache = tmp_path / "cache.duckdb"
    again = familiarity_of(
        {"person": 5, "city": 1}, ["person", "location"], model=MINILM, k=3, cache=cache
    )
    assert again.per_label == pytest.approx(rep.per_label, abs=1e-6)
    with Store(cache) as store:
        [(key, n)] = store.stats()["embeddings"].items()
    assert key.startswith(canonical_name(MINILM) + "|torch|fp32|") and n == 3


@pytest.mark.parametrize(
    "train, evaluation, message",
    [
        ("person", ["x"], "train is one string"),
        (["person"], "x", "evaluation is one string"),
        ({"person": -1}, ["x"], "not an integer >= 0"),
        ({"person": 0}, ["x"], "no training label has a mention"),
        (["person", ""], ["x"], "training label '' is not a non-empty string"),
        (["person"], {"b": []}, "benchmark 'b' has no labels"),
        (["person"], {"b": "xy"}, "labels of 'b' are one string"),
    ],
)
def test_bad_input(train: object, evaluation: object, message: str) -> None:
    with pytest.raises(BuildersError, match=message):
        familiarity_of(train, evaluation, model=MINILM)  # type: ignore[arg-type]


def test_bad_parameters() -> None:
    with pytest.raises(BuildersError, match="unknown weighting"):
        familiarity_of(["a"], ["b"], weighting="cubic")
    with pytest.raises(BuildersError, match="k must be >= 1"):
        familiarity_of(["a"], ["b"], k=0)
