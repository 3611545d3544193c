"""Each label's F1 in context (METHOD.md section 9): the views equal numpy's fit and scipy's
r; Familiarity per label is `familiarity_of`'s; training data is read from a source, a level
folder or a count file, or refused where it reads two ways."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from builders import familiarity_of
from builders.errors import AmbiguousInput, InputError
from builders.evaluate.context import label_context, training, views
from builders.shift.specs import EmbeddingSpec, MetricSpec
from builders.store import Store

MINILM = EmbeddingSpec("all-MiniLM-L6-v2")


def points(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        seen = i % 3 == 0
        fam = rng.random()
        out.append({"familiarity": fam, "f1": min(1.0, max(0.0, 0.5 * fam + 0.3 * rng.random())),
                    "seen": seen, "mentions": rng.randrange(1, 5000) if seen else 0})  # fmt: skip
    return out


@pytest.mark.parametrize("seed", range(3))
def test_views_equal_numpy_and_scipy(seed: int) -> None:
    pts = [*points(40, seed), {"familiarity": None, "f1": 0.5, "seen": False, "mentions": 0},
           {"familiarity": 0.5, "f1": None, "seen": True, "mentions": 9}]  # fmt: skip
    v = views(pts, seed=0)
    kept = pts[:40]
    fam, f1 = np.array([p["familiarity"] for p in kept]), np.array([p["f1"] for p in kept])
    assert v["pearson"]["r"] == pytest.approx(pearsonr(fam, f1).statistic, abs=1e-12)
    assert v["spearman"]["r"] == pytest.approx(spearmanr(fam, f1).statistic, abs=1e-12)
    for name in ("pearson", "spearman"):
        lo, hi = v[name]["ci"]
        assert lo < v[name]["r"] < hi and v[name]["n"] == 40
    seen = [p for p in kept if p["seen"]]
    x, y = np.log10([p["mentions"] for p in seen]), np.array([p["f1"] for p in seen])
    slope, intercept = np.polyfit(x, y, 1)
    assert (v["fit"]["slope"], v["fit"]["intercept"]) == (
        pytest.approx(slope),
        pytest.approx(intercept),
    )
    assert v["fit"]["r2"] == pytest.approx(pearsonr(x, y).statistic ** 2) and v["fit"]["n"] == len(
        seen
    )
    assert v["seen"] == {"labels": len(seen), "mean_f1": pytest.approx(float(np.mean(y)))}
    assert v["unseen"]["labels"] == 40 - len(seen)
    assert views(pts, seed=0) == v  # the CI is drawn with the seed


def test_views_where_r_is_undefined() -> None:
    flat = [{"familiarity": f, "f1": 0.0, "seen": False, "mentions": 0} for f in (0.1, 0.2, 0.3)]
    v = views(flat, seed=0)
    assert v["pearson"] == {"n": 3, "r": None, "ci": None} and v["fit"]["slope"] is None
    assert views(flat[:2], seed=0)["spearman"]["r"] is None
    assert views([], seed=0)["seen"] == {"labels": 0, "mean_f1": None}


def test_familiarity_per_label_is_familiarity_ofs(tmp_path: Path) -> None:
    counts = {"person": 1200, "organization": 800, "programming language": 40, "city": 5}
    (tmp_path / "counts.json").write_text(json.dumps(counts), encoding="utf-8")
    sets = {
        "crossner-ai": ("person", "program language", "algorithm"),
        "mit-movie": ("actor", "year"),
    }
    with Store(tmp_path / "s.duckdb") as store:
        train = training(store, str(tmp_path / "counts.json"))
        ctx = label_context(store, train, sets, MINILM, MetricSpec())
    want = familiarity_of(counts, {k: list(v) for k, v in sets.items()}, model="all-MiniLM-L6-v2")
    assert ctx.report.per_label == pytest.approx(want.per_label, abs=1e-12)
    found = ctx.labels(train.table, ["person", "algorithm", "else"])
    person = found["person"]
    assert (person["seen"], person["mentions"], person["closest"][0]["label"]) == (
        True,
        1200,
        "person",
    )
    assert person["closest"][0]["similarity"] == 1.0
    assert found["algorithm"]["seen"] is False and ctx.runtime == "torch"
    assert found["else"] == {"familiarity": None, "seen": False, "mentions": 0, "closest": []}


def test_training_data_forms(tmp_path: Path, sample_results: dict) -> None:
    shutil.copy(sample_results["db"], tmp_path / "s.duckdb")
    folder = sample_results["out"] / "pilener-sample-low-shift"
    with Store(tmp_path / "s.duckdb", read_only=True) as store:
        assert training(store, "pilener-sample").table.mentions.sum() > 30_000
        with pytest.raises(
            AmbiguousInput, match="holds the configs entropy, max: name one with --config"
        ):
            training(store, str(folder))
        low = training(store, str(folder), "max")
        record = json.loads((folder / "max" / "build.json").read_text(encoding="utf-8"))
        assert low.describe()["level"] == "low" and low.describe()["build"] == record["build"]["id"]
        assert dict(zip(low.table.labels, low.table.mentions.tolist(), strict=True)) == {
            r["label"]: r["mentions"] for r in record["labels"]
        }
        (tmp_path / "labels.txt").write_text("person\n", encoding="utf-8")
        with pytest.raises(InputError, match="a label list without counts"):
            training(store, str(tmp_path / "labels.txt"))
        with pytest.raises(InputError, match="no config 'familiarity'"):
            training(store, str(folder), "familiarity")
