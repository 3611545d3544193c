"""Levels are clean training data: every sentence a level keeps carries every mention its input
file has in it of the level's labels (METHOD.md section 4), in every strategy.

The check reads the input file with its own small BIO parser (not the toolkit's reader), maps
each written row back to its sentence by the row id (`source/split/index`), and compares the
row's spans with the file's spans of the level's labels (`scores.parquet`'s `selected`).
Before levels kept sentences whole, the bundled sample's familiarity levels left 1,242 / 946 /
36 mentions of their own labels unannotated (all-mpnet-base-v2), and these tests failed.
"""

from __future__ import annotations

import lzma
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import SIZE_MATCHED

from builders.shift.specs import EmbeddingSpec
from builders.splits import SplitConfig, build
from builders.splits.strategies.quantile import QuantileOptions
from builders.store import Store
from builders.store.ingest import ingest

MINILM = "all-MiniLM-L6-v2"
SAMPLE = Path(__file__).parents[2] / "builders/data/sample/pilener-391xALL-dev.bio.xz"
LEVELS = ("low", "medium", "high")
Span = tuple[int, int, str]


def bio_sentences(text: str) -> list[list[Span]]:
    """Each sentence's spans (token offsets, end exclusive, raw tag text) of a
    `token<TAB>tag` BIO file; an I- tag that does not continue an entity of its type opens
    one (as `--repair` reads it)."""
    sentences: list[list[Span]] = []
    spans: list[Span] = []
    open_at, open_tag, i = -1, "", 0

    def close() -> None:
        nonlocal open_at
        if open_at >= 0:
            spans.append((open_at, i, open_tag))
        open_at = -1

    for line in [*text.splitlines(), ""]:
        if not line.strip():
            if i:
                close()
                sentences.append(spans)
            spans, open_at, i = [], -1, 0
            continue
        tag = line.rsplit("\t", 1)[1].strip()
        if tag == "O" or not tag:
            close()
        elif tag.startswith("B-") or open_at < 0 or tag[2:] != open_tag:
            close()
            open_at, open_tag = i, tag[2:]
        i += 1
    return sentences


def stripped(folder: Path, config: str, spans: list[list[Span]], label_of: dict[str, str]) -> dict:
    """Per level folder: rows, and the mentions of the level's labels that the input has in
    a kept sentence and its row does not (or the row has and the input does not)."""
    scores = pq.read_table(folder / config / "scores.parquet", columns=["label", "selected"])
    labels = {
        lab for lab, keep in zip(*(c.to_pylist() for c in scores.columns), strict=True) if keep
    }
    rows = pq.read_table(next((folder / config).glob("train-*.parquet")), columns=["id", "spans"])
    missing: Counter[str] = Counter()
    extra = 0
    for rid, row in zip(*(c.to_pylist() for c in rows.columns), strict=True):
        idx = int(rid.rsplit("/", 1)[1])
        given = {(a, b, label_of[t]) for a, b, t in spans[idx] if label_of[t] in labels}
        written = {(s["start"], s["end"], s["label"]) for s in row}
        missing.update(lab for _, _, lab in given - written)
        extra += len(written - given)
    return {"rows": rows.num_rows, "missing": missing, "extra": extra, "labels": len(labels)}


def _label_map(store: Store, source: str) -> dict[str, str]:
    """Raw tag -> stored label (the verbalisation, which is not what is checked here)."""
    rows = store.con.execute(
        "SELECT DISTINCT raw_label, label FROM mentions WHERE source = ?", [source]
    ).fetchall()
    return dict(rows)


def _check(
    out: Path, source: str, config: str, spans: list, label_of: dict, min_labels: int = 3
) -> list[dict]:
    found = [stripped(out / f"{source}-{lv}-shift", config, spans, label_of) for lv in LEVELS]
    for lv, f in zip(LEVELS, found, strict=True):
        assert f["rows"] > 0 and f["labels"] >= min_labels, (lv, f)
        assert not f["missing"], f"{source} {config} {lv}: stripped {dict(f['missing'])}"
        assert f["extra"] == 0, (lv, f)
    return found


@pytest.fixture(scope="module")
def sample_spans() -> list[list[Span]]:
    with lzma.open(SAMPLE, "rt", encoding="utf-8") as f:
        spans = bio_sentences(f.read())
    assert len(spans) == 2217
    return spans


@pytest.fixture(scope="module")
def familiarity_out(sample_results: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("clean") / "out"
    with Store(sample_results["db"], read_only=True) as store:
        build(
            store,
            SplitConfig("pilener-sample", "familiarity", embedding=EmbeddingSpec(MINILM)),
            out,
        )
    return out


def test_the_parser_reads_the_sample_as_the_store_holds_it(sample_results, sample_spans) -> None:
    """The independent parser finds the store's mentions (so a miss below is the level's)."""
    with Store(sample_results["db"], read_only=True) as store:
        (n,) = store.con.execute(
            "SELECT count(*) FROM mentions WHERE source = 'pilener-sample'"
        ).fetchone()
    assert sum(len(s) for s in sample_spans) == n


def test_familiarity_levels_strip_no_mention(sample_results, familiarity_out, sample_spans) -> None:
    with Store(sample_results["db"], read_only=True) as store:
        label_of = _label_map(store, "pilener-sample")
    _check(familiarity_out, "pilener-sample", "familiarity", sample_spans, label_of)


@pytest.mark.parametrize("strategy", ["entropy", "max"])
def test_quantile_levels_strip_no_mention(sample_results, sample_spans, strategy: str) -> None:
    with Store(sample_results["db"], read_only=True) as store:
        label_of = _label_map(store, "pilener-sample")
    _check(sample_results["out"], "pilener-sample", strategy, sample_spans, label_of)


def test_size_matched_levels_strip_no_mention(sample_results, sample_spans, tmp_path) -> None:
    """`--match mentions` cuts a level's last label: by its sentences, not its mentions."""
    with Store(sample_results["db"], read_only=True) as store:
        label_of = _label_map(store, "pilener-sample")
        build(
            store,
            SplitConfig("pilener-sample", "max", embedding=EmbeddingSpec(MINILM), **SIZE_MATCHED),
            tmp_path,
        )
    _check(tmp_path, "pilener-sample", "max", sample_spans, label_of, min_labels=1)


def test_a_shared_corpus_levels_strip_no_mention(shared: Path, tmp_path: Path) -> None:
    """Few-NERD INTER train sample A (11,710 sentences, 36 types, lax I- tags read with
    --repair) as a training corpus: familiarity and entropy levels keep every mention."""
    path = shared / "fewnerd/inter/train-sample-a.txt"
    spans = bio_sentences(path.read_text(encoding="utf-8"))
    with Store(tmp_path / "s.duckdb") as store:
        ingest(store, "columns", path, name="fewnerd-a", options={"repair": True})
        label_of = _label_map(store, "fewnerd-a")
        (n,) = store.con.execute("SELECT count(*) FROM mentions").fetchone()
        assert sum(len(s) for s in spans) == n
        build(
            store,
            SplitConfig("fewnerd-a", "familiarity", embedding=EmbeddingSpec(MINILM)),
            tmp_path / "out",
        )
        quantiles = SplitConfig(
            "fewnerd-a",
            "entropy",
            embedding=EmbeddingSpec(MINILM),
            options=QuantileOptions(low_quantile=0.25, medium_band=(0.4, 0.6), high_quantile=0.75),
        )
        build(store, quantiles, tmp_path / "out")
    for config in ("familiarity", "entropy"):
        _check(tmp_path / "out", "fewnerd-a", config, spans, label_of)


def test_a_bounded_share_is_kept_on_the_rows_written(
    sample_results, sample_spans, tmp_path
) -> None:
    """`--max-label-share 0.5` on the sample's entropy levels (each carried by one label:
    86%, 91% and 68% unbounded): every level's largest label holds at most half its written
    mentions, no mention is stripped, and build.json records the bound."""
    with Store(sample_results["db"], read_only=True) as store:
        label_of = _label_map(store, "pilener-sample")
        cfg = SplitConfig(
            "pilener-sample",
            "entropy",
            embedding=EmbeddingSpec(MINILM),
            max_label_share=0.5,
            min_mentions=20,
        )
        (res,) = build(store, cfg, tmp_path)
    found = _check(tmp_path, "pilener-sample", "entropy", sample_spans, label_of)
    for sub, f in zip(res.subsets, found, strict=True):
        largest = sub.composition["largest_label"]
        assert largest["share"] <= 0.5 and sub.selection["max_label_share"] == 0.5
        assert sub.mentions == sum(sub.label_counts.values()) and f["rows"] == sub.sentences
    assert not any("max-label-share" in x for x in res.verdicts.failed)
