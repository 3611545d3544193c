"""The splitter on real data: subset rules (METHOD.md section 4), cuts, Familiarity ordering."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import SAMPLE_MEDIUM, assert_composition_reported

from builders.errors import BuildersError
from builders.labels import union_labels
from builders.shift.benchmarks import evaluation_sets
from builders.shift.report import LabelTable
from builders.shift.scoring import default_rule
from builders.shift.specs import EmbeddingSpec
from builders.splits import SplitConfig, build
from builders.splits.strategies.quantile import QuantileOptions
from builders.store import Store
from builders.store.ingest import ingest

MINILM = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def sample_store(sample_results: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the session's sample store (its embedding cache is warm)."""
    import shutil

    db = tmp_path_factory.mktemp("splits") / "s.duckdb"
    shutil.copy(sample_results["db"], db)
    return db


@pytest.fixture(scope="module")
def builds(sample_results: dict) -> dict:
    return sample_results


def test_materialise_rules(sample_store: Path) -> None:
    with Store(sample_store) as store:
        rows = store.subset_rows("pilener-sample", ["person", "date"]).to_pylist()
        n_person_date_sentences = store.con.execute(
            "SELECT count(DISTINCT idx) FROM mentions WHERE source='pilener-sample' "
            "AND label IN ('person', 'date')"
        ).fetchall()[0][0]
    assert len(rows) == n_person_date_sentences
    with Store(sample_store) as store:
        n_mentions = store.con.execute(
            "SELECT count(*) FROM mentions WHERE source='pilener-sample' AND label IN ('person', 'date')"
        ).fetchall()[0][0]
    assert sum(len(row["spans"]) for row in rows) == n_mentions  # every selected mention kept
    assert all(row["spans"] for row in rows)  # every kept sentence has a selected mention
    assert {s["label"] for row in rows for s in row["spans"]} == {"person", "date"}
    ids = [int(r["id"].rsplit("/", 1)[1]) for r in rows]
    assert ids == sorted(ids)  # corpus order
    for row in rows:
        for s in row["spans"]:
            assert 0 <= s["start"] < s["end"] <= len(row["tokens"])


def test_materialise_keeps_only_selected_negatives(tmp_path: Path, data_dir: Path) -> None:
    with Store(tmp_path / "n.duckdb") as store:
        ingest(store, "pilener", data_dir / "pilener/CrossNER_AI-excerpt.json")
        con = store.con
        mention_labels = [
            r[0]
            for r in con.execute(
                "SELECT label FROM mentions GROUP BY label ORDER BY count(*) DESC, label"
            ).fetchall()
        ]
        # a type asked about in sentences that do have a kept mention
        neg = con.execute(
            "SELECT n.label FROM negatives n JOIN mentions m USING (source, split, idx) "
            "WHERE m.label = ? GROUP BY n.label ORDER BY count(*) DESC, n.label LIMIT 1",
            [mention_labels[0]],
        ).fetchall()[0][0]
        keep = [mention_labels[0], neg]
        rows = store.subset_rows("pilener", keep).to_pylist()
        expected_negs = con.execute(
            "SELECT count(*) FROM negatives n WHERE n.label IN (?, ?) AND (n.split, n.idx) IN "
            "(SELECT (split, idx) FROM mentions WHERE label IN (?, ?))",
            [*keep, *keep],
        ).fetchall()[0][0]
        only_negative = [
            lab
            for lab in (
                r[0]
                for r in con.execute("SELECT DISTINCT label FROM negatives ORDER BY 1").fetchall()
            )
            if lab not in mention_labels
        ]
        assert only_negative
        # a sentence whose only selected label is a negative is not kept
        assert store.subset_rows("pilener", only_negative[:1]).num_rows == 0
    assert rows
    for row in rows:
        assert {s["label"] for s in row["spans"]} <= set(keep)
        assert set(row["negatives"]) <= set(keep)
    assert expected_negs > 0
    assert sum(len(row["negatives"]) for row in rows) == expected_negs
    assert any(neg in row["negatives"] for row in rows)


def test_levels_keep_their_negative_spans_through_export(tmp_path: Path, data_dir: Path) -> None:
    """ingest -> build-splits -> export-gliner -> ingest: each level's parquet holds the span-level
    negatives of its labels in the sentences it keeps (METHOD.md section 4), and its export
    ingests again with the same ones.

    Measured on `gliner/train-negative-ner.json` (10 sentences, 44 negative spans; MiniLM, max,
    CrossNER AI): low keeps 6 labels and 39 negative spans, high keeps `else` and none (its 3
    negative spans lie in a sentence high does not keep), 2 are of `organization`, no level's.
    """
    import pyarrow.parquet as pq

    from builders.hub.export import export_gliner

    with Store(tmp_path / "s.duckdb") as store:
        stored = ingest(store, "gliner", data_dir / "gliner/train-negative-ner.json", name="neg")
        cfg = SplitConfig(
            "neg",
            "max",
            benchmarks=("crossner-ai",),
            levels=("low", "high"),
            embedding=EmbeddingSpec(MINILM),
            min_labels=1,
            min_mentions=1,
        )
        (res,) = build(store, cfg, tmp_path / "out")
        want = {
            sub.level: store.con.execute(
                "SELECT count(DISTINCT (split, idx, start, stop, label)) FROM negative_spans "
                "WHERE source = 'neg' AND list_contains($1, label) AND (split, idx) IN "
                "(SELECT (split, idx) FROM mentions WHERE source = 'neg' "
                "AND list_contains($1, label))",
                [sorted(sub.label_counts)],
            ).fetchall()[0][0]
            for sub in res.subsets
        }
    assert stored.negative_spans == 44
    kept: dict[str, int] = {}
    for sub in res.subsets:
        rows = pq.read_table(Path(sub.path) / "max/train-00000-of-00001.parquet").to_pylist()
        negs = [s for r in rows for s in r["negative_spans"]]
        assert {s["label"] for s in negs} <= set(sub.label_counts)
        for r in rows:
            assert all(0 <= s["start"] < s["end"] <= len(r["tokens"]) for s in r["negative_spans"])
        out = tmp_path / f"{sub.level}.json"
        exported = export_gliner(Path(sub.path), "max", out)
        with Store(tmp_path / f"{sub.level}.duckdb") as store:
            again = ingest(store, "gliner", out, name="again")
        kept[sub.level] = len(negs)
        assert len(negs) == want[sub.level] == exported["negative_spans"] == again.negative_spans
    assert kept == {"low": 39, "high": 0}
    assert sorted(res.subsets[1].label_counts) == ["else"]


def test_cuts_follow_quantile_definition(builds: dict) -> None:
    import pyarrow.parquet as pq

    for strategy in ("entropy", "max"):
        rule = default_rule("pilener", strategy).with_overrides(medium=SAMPLE_MEDIUM)
        for sub in builds[strategy].subsets:
            table = pq.read_table(Path(sub.path) / strategy / "scores.parquet").to_pydict()
            scores = np.array(table["score"])
            q = rule.levels()[sub.level].quantiles
            assert sub.selection["quantiles"] == list(q)
            t = np.quantile(scores, q, method="linear")
            np.testing.assert_allclose(sub.selection["thresholds"], t, rtol=0, atol=0)
            side = sub.selection["side"]
            mask = (
                (scores >= t[0])
                if side == "ge"
                else (scores <= t[0])
                if side == "le"
                else ((scores >= t[0]) & (scores <= t[1]))
            )
            # the quantile rule, widened only by labels tied with its weakest kept label
            tied = np.array(table["selected"]) & ~mask
            assert sub.selection["tied"] == int(tied.sum())
            assert (np.array(table["selected"]) | ~mask).all()
            assert sub.labels == int(np.sum(table["selected"]))
            assert sub.mentions == int(np.array(table["mentions"])[table["selected"]].sum())


def test_subset_counts_match_written_parquet(builds: dict) -> None:
    import datasets

    for sub in builds["entropy"].subsets:
        ds = datasets.load_dataset(sub.path, "entropy", split="train")
        assert len(ds) == sub.sentences
        assert sum(len(s) for s in ds["spans"]) == sub.mentions
        assert len({s["label"] for row in ds["spans"] for s in row}) == sub.labels
        assert ds.features["spans"].feature["start"].dtype == "int32"


@pytest.mark.parametrize("strategy", ["entropy", "max"])
def test_what_makes_levels_comparable_is_what_the_parquet_holds(
    builds: dict, strategy: str
) -> None:
    """sentences_shared, effective_labels and the largest label's share of a quantile build,
    as its result, every build.json and every card report them, are what its rows give."""
    want = assert_composition_reported(builds[strategy].subsets, strategy)
    assert len(want) == 3


def test_familiarity_ordering_on_real_data(builds: dict) -> None:
    """Low-shift subsets are more familiar than high-shift ones, for both strategies.

    Measured on the bundled 368-type sample against the seven benchmarks (MiniLM):
    max      low 0.383 > medium 0.280 > high 0.219  (the expected order)
    entropy  low 0.392 > high 0.319 > medium 0.296  (medium below high)
    With all-mpnet-base-v2: max 0.367 > 0.293 > 0.218; entropy 0.328, 0.246, 0.291.
    The medium band (q0.495-q0.505) holds 4 of 368 labels and a few dozen mentions here,
    so fewer than K mentions enter its Familiarity; we report this rather than tune it away.
    """
    fam = {
        s: {sub.level: sub.familiarity.union_macro for sub in builds[s].subsets}
        for s in ("entropy", "max")
    }
    assert fam["max"]["low"] > fam["max"]["medium"] > fam["max"]["high"]
    assert fam["entropy"]["low"] > fam["entropy"]["high"]
    assert fam["entropy"]["low"] > fam["entropy"]["medium"]


def test_full_corpus_familiarity_is_macro_of_union(builds: dict) -> None:
    f = builds["entropy"].full.familiarity
    assert f.union_macro == pytest.approx(np.mean(list(f.per_label.values())))
    union = union_labels(evaluation_sets("all"))
    assert list(f.per_label) == list(union)
    assert 0 <= f.union_macro <= 1
    assert f.summary["ci_low"] <= f.union_macro <= f.summary["ci_high"]


def test_build_is_deterministic(sample_store: Path, builds: dict, tmp_path: Path) -> None:
    with Store(sample_store) as store:
        cfg = SplitConfig(
            "pilener-sample",
            "entropy",
            embedding=EmbeddingSpec(MINILM),
            options=QuantileOptions(medium_band=SAMPLE_MEDIUM),
        )
        build(store, cfg, tmp_path)
    for sub in builds["entropy"].subsets:
        a = Path(sub.path) / "entropy/train-00000-of-00001.parquet"
        b = tmp_path / Path(sub.path).name / "entropy/train-00000-of-00001.parquet"
        assert a.read_bytes() == b.read_bytes()


def test_per_benchmark_mode(sample_store: Path, tmp_path: Path) -> None:
    cfg = SplitConfig(
        "pilener-sample",
        "max",
        benchmarks=("crossner-ai", "mit-movie"),
        embedding=EmbeddingSpec(MINILM),
        per_benchmark=True,
        levels=("low",),
    )
    with Store(sample_store) as store:
        results = build(store, cfg, tmp_path)
    assert [r.subsets[0].name for r in results] == [
        "pilener-sample-crossner-ai-low-shift",
        "pilener-sample-mit-movie-low-shift",
    ]
    assert list(results[0].full.familiarity.per_benchmark) == ["crossner-ai"]


def test_overrides_and_errors(sample_store: Path) -> None:
    with Store(sample_store) as store:
        (r,) = build(
            store,
            SplitConfig(
                "pilener-sample",
                "max",
                embedding=EmbeddingSpec(MINILM),
                options=QuantileOptions(low_quantile=0.9),
                levels=("low",),
            ),
        )
        assert r.subsets[0].selection["quantiles"] == [0.9]
        assert r.subsets[0].selection["profile"] == "custom"
        table = LabelTable.load(store, "pilener-sample")
        # q(0.9) keeps the top tenth of the 368 labels (ties at the threshold included)
        assert r.subsets[0].labels >= int(np.ceil(0.1 * len(table.labels))) - 1
        assert r.subsets[0].labels < len(table.labels) // 5
    with pytest.raises(
        BuildersError, match=re.escape("unknown strategy 'best'. Valid: entropy, max")
    ):
        SplitConfig("x", "best")
    with pytest.raises(BuildersError, match="unknown level 'easy'"):
        SplitConfig("x", levels=("easy",))
    with pytest.raises(BuildersError, match="--backend openvino runs --precision fp32 or bf16"):
        SplitConfig("x", embedding=EmbeddingSpec(backend="openvino", precision="fp16"))
    assert SplitConfig("x", embedding=EmbeddingSpec(backend="onnx")).to_dict()["backend"] == "onnx"


def test_build_json_records_parameters(builds: dict) -> None:
    sub = builds["max"].subsets[0]
    meta = json.loads((Path(sub.path) / "max/build.json").read_text())
    assert meta["config"]["model"] == MINILM
    assert meta["config"]["k"] == 1000 and meta["config"]["temperature"] == 0.01
    assert meta["subset"]["selection"]["thresholds"]


def test_org_names_the_repo_in_the_cards(sample_results: dict, tmp_path: Path) -> None:
    """`build-splits --org ORG`: the cards' load_dataset and export-gliner lines name ORG/FOLDER."""
    import dataclasses

    from click.testing import CliRunner

    from builders.cli.main import build_splits
    from builders.splits.subsets import write_results

    res = sample_results["entropy"]
    res = dataclasses.replace(res, subsets=[dataclasses.replace(s) for s in res.subsets])
    write_results(tmp_path, [res], org="testorg")
    card = (tmp_path / "pilener-sample-low-shift" / "README.md").read_text(encoding="utf-8")
    assert 'load_dataset("testorg/pilener-sample-low-shift", split="train")' in card
    assert "builders export-gliner testorg/pilener-sample-low-shift --config entropy" in card
    with pytest.raises(BuildersError, match="--org must be a user or organisation name"):
        write_results(tmp_path, [res], org="a/b")
    bad = CliRunner().invoke(build_splits, ["--source", "nope", "--org", "a/b"])
    assert bad.exit_code == 2  # refused while parsing, before any store or model is opened
    assert "Invalid value for '--org': must be a user or organisation name" in bad.output


def test_provenance_names_a_dataset_split_by_its_dataset_and_a_file_by_its_name(
    tmp_path: Path,
) -> None:
    """A card carries no path of the building machine: a local input, there or moved since,
    is named by its file (or folder) name; build.json's fingerprints identify it."""
    from builders.sources import SOURCES
    from builders.splits.provenance import _portable

    spec = SOURCES["columns"]
    assert _portable("org/my-data[en]/train", spec) == "org/my-data"
    assert _portable("/no/such/folder/train.bio", spec) == "train.bio"
    (tmp_path / "corpus").mkdir()
    assert _portable(str(tmp_path / "corpus"), spec) == "corpus"


def test_a_card_holds_no_path_of_the_building_machine(published: Path) -> None:
    """The `published` folder was built from a corpus in a temporary folder."""
    card = (published / "README.md").read_text(encoding="utf-8")
    root = published.parent.parent
    assert str(root) not in card and "--path corpus.txt" in card


def test_a_build_times_its_phases_and_writes_no_timing(sample_results: dict) -> None:
    """`BuildResult.timings` holds each phase's seconds (scripts/bench_splits.py reads them
    from the DEBUG log), and no file or `--json` result holds them: a build's bytes do not
    depend on the machine."""
    res = sample_results["entropy"]
    phases = ["similarities", "placement", "rows", "measure", "write", "total"]
    assert list(res.timings) == phases
    assert all(s >= 0 for s in res.timings.values())
    parts = sum(res.timings[p] for p in phases[:-1])
    assert parts <= res.timings["total"] + 1e-6
    assert "timings" not in json.dumps(res.to_dict(), default=str)
    for path in Path(sample_results["out"]).rglob("*.json"):
        assert "timings" not in path.read_text(encoding="utf-8")
