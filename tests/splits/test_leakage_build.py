"""Leakage in the splitter: build.json's `leakage`, the card's section, `decontaminate`.

The corpus is the bundled Pile-NER sample with three sentences of the CrossNER AI test excerpt
planted in it (two verbatim, one with its last token replaced); the benchmark is that excerpt,
stored as `crossner-ai`.
"""

from __future__ import annotations

import json
import lzma
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import DATA, SAMPLE_MEDIUM

from builders.shift.specs import EmbeddingSpec
from builders.splits import SplitConfig, build
from builders.splits.strategies.quantile import QuantileOptions
from builders.store import Store
from builders.store.ingest import ingest

MINILM = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def leaky_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("leaky")
    sample = resources.files("builders.data").joinpath("sample/pilener-391xALL-dev.bio.xz")
    text = lzma.decompress(sample.read_bytes()).decode("utf-8").rstrip("\n") + "\n\n"
    bench = (DATA / "crossner" / "ai-test.txt").read_text(encoding="utf-8").split("\n\n")
    edited = bench[2].rsplit("\n", 1)[0] + "\n!\tO"
    (tmp / "leaky.bio").write_text(text + "\n\n".join([bench[0], bench[1], edited]) + "\n", "utf-8")
    db = tmp / "s.duckdb"
    with Store(db) as store:
        ingest(store, "columns", tmp / "leaky.bio", name="leaky", options={"repair": True})
        ingest(store, "crossner-ai", DATA / "crossner" / "ai-test.txt")
    return db


def _build(db: Path, out: Path, **kw: object) -> list:
    kw = {"benchmarks": ("crossner-ai",), **kw}
    cfg = SplitConfig(
        "leaky",
        "max",
        embedding=EmbeddingSpec(MINILM),
        options=QuantileOptions(medium_band=SAMPLE_MEDIUM),
        **kw,
    )  # type: ignore[arg-type]
    with Store(db) as store:
        return build(store, cfg, out)


def test_build_records_and_cards_leakage(leaky_store: Path, tmp_path: Path) -> None:
    [res] = _build(leaky_store, tmp_path)
    full = res.leakage["full"]["per_benchmark"]["crossner-ai"]
    assert (full["exact_sentences"], full["ngram_sentences"]) == (2, 3)
    assert res.leakage["decontaminated"] is None
    for sub in res.subsets:
        record = json.loads((tmp_path / sub.name / "max" / "build.json").read_text())
        assert record["leakage"]["full"] == res.leakage["full"]
        assert record["leakage"]["subset"] == res.leakage["levels"][sub.level]
        card = (tmp_path / sub.name / "README.md").read_text()
        assert "## Leakage" in card and "| crossner-ai | 3 |" in card
        assert "Decontaminated" not in card
    # a level keeps a planted sentence only if it keeps one of its labels: the verbatim
    # copies hold algorithm and conference mentions, the edited one algorithm mentions
    for level, rep in res.leakage["levels"].items():
        figures = rep["per_benchmark"]["crossner-ai"]
        alg, conf = (lab in res.selected(level) for lab in ("algorithm", "conference"))
        assert figures["exact_sentences"] == alg + conf, level
        assert figures["ngram_sentences"] == 2 * alg + conf, level


def test_decontaminate_drops_the_overlapping_sentences(leaky_store: Path, tmp_path: Path) -> None:
    [plain] = _build(leaky_store, tmp_path / "plain", leakage=False)
    assert plain.leakage is None
    record = json.loads(
        (tmp_path / "plain" / plain.subsets[0].name / "max" / "build.json").read_text()
    )
    assert "leakage" not in record
    [res] = _build(leaky_store, tmp_path / "clean", decontaminate=True)
    assert res.leakage["decontaminated"] == {"dropped_sentences": 3}
    assert res.full.sentences == plain.full.sentences - 3
    assert res.leakage["full"]["union"]["exact_sentences"] == 2  # the corpus as stored
    for level, rep in res.leakage["levels"].items():
        assert rep["union"]["exact_sentences"] == rep["union"]["ngram_sentences"] == 0, level
    card = (tmp_path / "clean" / res.subsets[0].name / "README.md").read_text()
    assert "**Decontaminated:** 3 training sentences" in card
    assert "--decontaminate" in card  # the rebuild command
    with Store(leaky_store) as store:  # nothing was deleted
        assert store.count_sentences("leaky") == plain.full.sentences


@pytest.mark.library_surface
def test_decontaminate_that_cannot_scan_a_benchmark_is_refused(
    leaky_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A benchmark whose sentences the scan cannot read (a label file; a packaged one neither
    stored nor with a local copy) would have none of its overlaps dropped while the card
    says the corpus was decontaminated: refused before any work, naming them and the fixes,
    as the library and the command line spell the options."""
    from builders.cli.main import cli
    from builders.errors import CannotBuild

    monkeypatch.delenv("LABELSHIFT_DATA", raising=False)
    labels = tmp_path / "medical.txt"
    labels.write_text("disease\nchemical\n", encoding="utf-8")
    benches = ("crossner-ai", f"file:{labels}")
    with pytest.raises(CannotBuild) as err:
        _build(leaky_store, tmp_path / "lib", decontaminate=True, benchmarks=benches)
    assert "decontaminate= cannot scan 1 of the build's 2 benchmarks" in str(err.value)
    assert "medical (file benchmark" in str(err.value)
    assert "benchmarks=crossner-ai (only the benchmarks it can scan)" in str(err.value)
    assert not (tmp_path / "lib").exists()
    out = tmp_path / "cli"
    res = CliRunner().invoke(
        cli,
        ["build-splits", "--source", "leaky", "--strategy", "max", "--model", MINILM,
         "--decontaminate", "--db", str(leaky_store), "--out", str(out)],
    )  # fmt: skip
    assert res.exit_code == 1, res.output
    said = " ".join(res.output.split())
    assert "--decontaminate cannot scan 6 of the build's 7 benchmarks" in said
    assert "crossner-science, mit-movie, mit-restaurant (not in the store, no local copy)" in said
    assert "LABELSHIFT_DATA" in said and "builders ingest SOURCE --path" in said
    assert "--benchmarks crossner-ai (only the benchmarks it can scan)" in said
    assert not out.exists()


def test_user_benchmarks_are_named_in_cards_and_changelogs(
    leaky_store: Path, tmp_path: Path
) -> None:
    from builders.hub.changelog import subset_metrics

    labels = tmp_path / "medical.txt"
    labels.write_text("disease\nchemical\n", encoding="utf-8")
    cfg = SplitConfig(
        "leaky",
        "max",
        benchmarks=("mine=crossner-ai:test", f"file:{labels}"),
        embedding=EmbeddingSpec(MINILM),
        options=QuantileOptions(medium_band=SAMPLE_MEDIUM),
    )
    with Store(leaky_store) as store:
        [res] = build(store, cfg, tmp_path)
    assert list(res.benchmarks) == ["mine", "medical"]
    folder = tmp_path / res.subsets[0].name
    card = (folder / "README.md").read_text()
    assert "| mine | " in card and "| medical | " in card  # Familiarity rows
    assert "| mine | 3 |" in card  # its leakage row
    assert "Not scanned (no evaluation sentences" in card and "lists only): medical." in card
    record = json.loads((folder / "max" / "build.json").read_text())
    metrics = subset_metrics(record)
    assert {"familiarity mine", "familiarity medical"} <= set(metrics)


def test_a_cold_build_loads_the_model_once(
    leaky_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan embeds the seen surfaces' labels with the build's own embedder, so a cold
    cache loads the model once, not once for the scan and again for the build."""
    import shutil

    import sentence_transformers

    db = tmp_path / "cold.duckdb"
    shutil.copy(leaky_store, db)
    with Store(db) as store:
        store.con.execute("DELETE FROM embeddings")
    loads = []
    real = sentence_transformers.SentenceTransformer

    def counted(*args: object, **kwargs: object) -> object:
        loads.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", counted)
    [res] = _build(db, tmp_path / "out")
    assert res.leakage["full"]["per_benchmark"]["crossner-ai"]["seen_mentions"] > 0
    assert res.embedded_new > 0 and len(loads) == 1
