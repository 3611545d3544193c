"""Export to GLiNER: the training keys its trainer reads, inclusive ends, its evaluation layout,
determinism and round trips. `gliner_reference` is GLiNER's own loading code (source noted there).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from gliner_reference import (
    batch_generate_class_mappings,
    create_dataset,
    load_json_data,
    open_content,
    prepare_span_idx,
    prepare_span_labels,
    process,
)
from helpers import DATA, json_result

from builders.cli.main import cli
from builders.errors import BuildersError
from builders.hub.export import eval_record, export_flair, export_gliner, export_gliner_benchmark
from builders.hub.folder import PARQUET_NAME, subset_features, write_parquet
from builders.hub.windows import Limits
from builders.store import Store
from builders.store.ingest import ingest

SPANS_EXCERPT = "gliner/train-negative-ner.json"
#: Rows written whole: these tests check the layout row by row (windows: test_windows.py).
WHOLE = Limits(windows=False)


@pytest.fixture(scope="module")
def folder(sample_build: Path) -> Path:
    """The low-shift subset of the bundled sample, entropy and max configs (built once)."""
    return sample_build / "pilener-sample-low-shift"


@pytest.fixture(scope="module")
def negatives_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A subset folder with negatives on some rows: the store's subset rows of every label of
    `tests/data/gliner/train-shaped.json` (its first three sentences carry negatives)."""
    root = tmp_path_factory.mktemp("negatives")
    with Store(root / "s.duckdb") as store:
        ingest(store, "gliner", DATA / "gliner/train-shaped.json", name="shaped")
        labels = [lab for lab, _, _ in store.label_counts("shaped")]
        rows = store.subset_rows("shaped", labels)
    (root / "shaped-low-shift" / "entropy").mkdir(parents=True)
    path = root / "shaped-low-shift/entropy" / PARQUET_NAME.format(split="train")
    write_parquet(rows, path, subset_features())
    return root / "shaped-low-shift"


@pytest.fixture(scope="module")
def spans_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A subset folder with span-level negatives: the store's subset rows of every label of
    `tests/data/gliner/train-negative-ner.json` (44 negative spans, 42 of them of its labels)."""
    root = tmp_path_factory.mktemp("negative-spans")
    with Store(root / "s.duckdb") as store:
        ingest(store, "gliner", DATA / SPANS_EXCERPT, name="spans")
        labels = [lab for lab, _, _ in store.label_counts("spans")]
        rows = store.subset_rows("spans", labels)
    (root / "spans-low-shift" / "entropy").mkdir(parents=True)
    path = root / "spans-low-shift/entropy" / PARQUET_NAME.format(split="train")
    write_parquet(rows, path, subset_features())
    return root / "spans-low-shift"


FOLDERS = {"sample": "folder", "negatives": "negatives_folder", "spans": "spans_folder"}


@pytest.fixture(params=list(FOLDERS))
def any_folder(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue(FOLDERS[request.param])


def _rows(folder: Path, config: str) -> list[dict]:
    return pq.read_table(folder / config / "train-00000-of-00001.parquet").to_pylist()


def test_export_writes_the_keys_gliner_reads(any_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "train.json"
    counts = export_gliner(any_folder, "entropy", out, limits=WHOLE)
    records = json.loads(out.read_text(encoding="utf-8"))
    rows = _rows(any_folder, "entropy")
    assert counts["rows"] == len(records) == len(rows) > 0
    assert counts["mentions"] == sum(len(r["spans"]) for r in rows)
    assert counts["negatives"] == sum(len(r["negatives"]) for r in rows)
    assert counts["negative_spans"] == sum(len(r["negative_spans"]) for r in rows)
    if any_folder.name.startswith(("shaped", "spans")):
        assert [bool(r["negatives"]) for r in rows] == [True] * 3 + [False] * 7
    if any_folder.name.startswith("spans"):
        assert counts["negative_spans"] == 42  # 44 stored; 2 of `organization` (no mention)
    for rec, row in zip(records, rows, strict=True):
        keys = ["tokenized_text", "ner"] + (["ner_negatives"] if row["negatives"] else [])
        keys += ["negative_ner"] if row["negative_spans"] else []
        assert list(rec) == keys
        assert rec["tokenized_text"] == row["tokens"]
        assert rec["ner"] == [[s["start"], s["end"] - 1, s["label"]] for s in row["spans"]]
        assert rec.get("ner_negatives", []) == row["negatives"]
        assert rec.get("negative_ner", []) == [
            [s["start"], s["end"] - 1, s["label"]] for s in row["negative_spans"]
        ]


def test_gliner_trainer_reads_the_export(any_folder: Path, tmp_path: Path) -> None:
    """GLiNER's own code: the trainer's json load, its per-record candidate types (explicit
    negatives from `ner_negatives`) and its span labels (inclusive ends)."""
    out = tmp_path / "train.json"
    export_gliner(any_folder, "entropy", out, limits=WHOLE)
    batch = load_json_data(str(out))
    rows = _rows(any_folder, "entropy")
    random.seed(0)
    class_to_ids, id_to_classes = batch_generate_class_mappings(
        batch, max_neg_type_ratio=1, max_types=10_000
    )
    for rec, row, classes, names in zip(batch, rows, class_to_ids, id_to_classes, strict=True):
        positives = {s["label"] for s in row["spans"]}
        if row["negatives"]:  # explicit negatives: exactly positives + these, nothing sampled
            assert set(classes) == positives | set(row["negatives"])
        else:
            assert positives <= set(classes)
        width = max(b - a + 1 for a, b, _ in rec["ner"])
        idx = prepare_span_idx(len(rec["tokenized_text"]), width)
        labels, idx = prepare_span_labels(rec["ner"], classes, len(rec["tokenized_text"]), idx)
        got = {
            (s, e): names[lab]
            for (s, e), lab in zip(idx.tolist(), labels.tolist(), strict=True)
            if lab > 0
        }
        want = {(s["start"], s["end"] - 1): s["label"] for s in row["spans"]}
        assert got == want


def test_export_is_deterministic_and_defaults_to_entropy(folder: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    export_gliner(folder, None, a)
    export_gliner(folder, "entropy", b)
    assert a.read_bytes() == b.read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_round_trip_through_the_gliner_reader(any_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "train.json"
    export_gliner(any_folder, "entropy", out, limits=WHOLE)
    rows = _rows(any_folder, "entropy")
    with Store(tmp_path / "rt.duckdb") as store:
        ingest(store, "gliner", out, name="rt")
        spans = store.sentences_with_spans("rt")
        negs = store.con.execute(
            "SELECT idx, list(raw_label ORDER BY raw_label) FROM negatives WHERE source = 'rt' "
            "GROUP BY idx ORDER BY idx"
        ).fetchall()
        neg_spans = store.con.execute(
            "SELECT idx, list((start, stop, raw_label) ORDER BY start, stop, raw_label) "
            "FROM negative_spans WHERE source = 'rt' GROUP BY idx ORDER BY idx"
        ).fetchall()
        stored = store.stored_splits("rt")["train"]
    assert [(tokens, s) for _, _, tokens, s in spans] == [
        (r["tokens"], [(s["start"], s["end"], s["label"]) for s in r["spans"]]) for r in rows
    ]
    assert negs == [(i, sorted(r["negatives"])) for i, r in enumerate(rows) if r["negatives"]]
    assert neg_spans == [
        (i, [(s["start"], s["end"], s["label"]) for s in r["negative_spans"]])
        for i, r in enumerate(rows)
        if r["negative_spans"]
    ]
    assert stored.negatives == sum(len(r["negatives"]) for r in rows)
    assert stored.negative_spans == sum(len(r["negative_spans"]) for r in rows)


def test_export_of_a_fewnerd_layout_folder(tmp_path: Path) -> None:
    feats = datasets.Features(
        {k: v for k, v in subset_features().items() if k not in ("negatives", "negative_spans")}
    )
    (tmp_path / "fewnerd-inter" / "data").mkdir(parents=True)
    table = pa.table(
        {
            "id": ["test/0"],
            "tokens": [["in", "Paris", "today"]],
            "spans": [[{"start": 1, "end": 2, "label": "location-GPE"}]],
        }
    )
    write_parquet(table, tmp_path / "fewnerd-inter/data/test-00000-of-00001.parquet", feats)
    out = tmp_path / "test.json"
    counts = export_gliner(tmp_path / "fewnerd-inter", None, out, split="test")
    assert {
        k: counts[k] for k in ("rows", "windows", "mentions", "negatives", "negative_spans")
    } == {
        "rows": 1,
        "windows": 1,
        "mentions": 1,
        "negatives": 0,
        "negative_spans": 0,
    }
    assert json.loads(out.read_text()) == [
        {"tokenized_text": ["in", "Paris", "today"], "ner": [[1, 1, "location-GPE"]]}
    ]
    with pytest.raises(BuildersError, match=r"no train-\*\.parquet \(splits: test\)"):
        export_gliner(tmp_path / "fewnerd-inter", None, out)


def test_bad_span_is_an_error_not_a_repair(tmp_path: Path) -> None:
    (tmp_path / "x" / "entropy").mkdir(parents=True)
    table = pa.table(
        {
            "id": ["train/0"],
            "tokens": [["a", "b"]],
            "spans": [[{"start": 1, "end": 3, "label": "thing"}]],
            "negatives": [[]],
            "negative_spans": [[]],
        }
    )
    write_parquet(table, tmp_path / "x/entropy/train-00000-of-00001.parquet", subset_features())
    with pytest.raises(BuildersError, match=r"span \[1, 3\) 'thing' is outside its 2 tokens"):
        export_gliner(tmp_path / "x", None, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()
    bad_negative = table.set_column(
        2, "spans", pa.array([[{"start": 0, "end": 1, "label": "thing"}]])
    ).set_column(4, "negative_spans", pa.array([[{"start": 2, "end": 2, "label": "place"}]]))
    write_parquet(
        bad_negative, tmp_path / "x/entropy/train-00000-of-00001.parquet", subset_features()
    )
    with pytest.raises(BuildersError, match=r"row 'train/0': span \[2, 2\) 'place' is outside"):
        export_gliner(tmp_path / "x", None, tmp_path / "x.json")


def test_unknown_config_and_missing_folder(folder: Path, tmp_path: Path) -> None:
    with pytest.raises(BuildersError, match=r"no config 'maxx'\. Valid: entropy, max"):
        export_gliner(folder, "maxx", tmp_path / "o.json")
    with pytest.raises(BuildersError, match="no such folder"):
        export_gliner(tmp_path / "nope", None, tmp_path / "o.json")


def test_cli_export(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.json"
    res = CliRunner().invoke(
        cli, ["export-gliner", str(folder), "--config", "max", "--out", str(out), "--json"]
    )
    assert res.exit_code == 0, res.output
    summary = json_result(res.output)
    assert summary["rows"] == len(_rows(folder, "max")) and summary["out"] == str(out)
    res = CliRunner().invoke(
        cli, ["export-gliner", str(folder), "--config", "x", "--out", str(out)]
    )
    assert res.exit_code == 1
    assert "Error: " in res.output and "no config 'x'. Valid: entropy, max" in res.output
    res = CliRunner().invoke(cli, ["export-gliner", "--out", str(out)])
    assert res.exit_code == 2 and "give one of FOLDER (a built folder or Hub repo), --source" in (
        res.output
    )


def test_cli_export_counts_the_negatives_it_writes(spans_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.json"
    res = CliRunner().invoke(cli, ["export-gliner", str(spans_folder), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    summary = json_result(res.output)
    assert {k: summary[k] for k in ("rows", "mentions", "negatives", "negative_spans")} == {
        "rows": 10,
        "mentions": 44,
        "negatives": 9,
        "negative_spans": 42,
    }
    res = CliRunner().invoke(cli, ["export-gliner", str(spans_folder), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "10 rows, 44 mentions, 9 negatives, 42 negative spans -> " in res.output


def test_cli_help_has_an_example() -> None:
    res = CliRunner().invoke(cli, ["export-gliner", "--help"])
    assert res.exit_code == 0 and "Example: builders export-gliner" in res.output
    assert "--benchmark crossner-ai" in res.output


def test_a_missing_repo_is_a_clear_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        cli, ["export-gliner", "no-org/no-repo", "--out", str(tmp_path / "o.json")]
    )
    assert res.exit_code == 1
    assert "no-org/no-repo: no such local folder, and the Hub dataset repo" in res.output


# ---------------------------------------------------------------------- evaluation layout
@pytest.fixture
def crossner_excerpt(tmp_path: Path, data_dir: Path) -> Path:
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        ingest(store, "crossner-ai", data_dir / "crossner/ai-test.txt", split="test")
    return db


def test_eval_layout_equals_gliners_own_benchmark_records(
    crossner_excerpt: Path, data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three CrossNER AI test sentences from the BIO file give GLiNER's own records, bytes
    and all (its `CrossNER_AI/test.json` starts with them)."""
    out = tmp_path / "CrossNER_AI"
    with Store(crossner_excerpt, read_only=True) as store:
        res = export_gliner_benchmark(store, "crossner-ai", out)
    assert res["rows"] == {"test": 3} and res["negatives_left_out"] == 0
    assert sorted(p.name for p in out.iterdir()) == ["labels.json", "test.json"]
    theirs = (data_dir / "gliner/CrossNER_AI-test-excerpt.json").read_text(encoding="utf-8")
    first3 = [line.rstrip(",") for line in theirs.splitlines()[1:4]]
    assert (out / "test.json").read_text(encoding="utf-8") == "[" + ", ".join(first3) + "]"
    labels = json.loads((out / "labels.json").read_text(encoding="utf-8"))
    assert labels == sorted({e["type"] for line in first3 for e in json.loads(line)["entities"]})
    monkeypatch.chdir(tmp_path)  # open_content matches 'test' anywhere in the path
    _, _, test, got_labels = open_content("CrossNER_AI")
    assert [process(r) for r in test] == [process(json.loads(line)) for line in first3]
    assert got_labels == labels
    again = tmp_path / "again"
    with Store(crossner_excerpt, read_only=True) as store:
        export_gliner_benchmark(store, "crossner-ai", again)
    assert (again / "test.json").read_bytes() == (out / "test.json").read_bytes()


def test_gliner_benchmark_json_round_trips_through_the_store(
    data_dir: Path, tmp_path: Path
) -> None:
    """GLiNER's own benchmark records, read by the gliner reader and exported again, come back
    byte for byte: the reader splits sentences on whitespace like GLiNER's evaluation (record
    8 holds "e.g.", which GLiNER's inference regex would have made four tokens)."""
    with Store(tmp_path / "s.duckdb") as store:
        ingest(store, "gliner", data_dir / "gliner/CrossNER_AI-test-excerpt.json", name="ai")
        export_gliner_benchmark(store, "ai", tmp_path / "CrossNER_AI")
    theirs = (data_dir / "gliner/CrossNER_AI-test-excerpt.json").read_text(encoding="utf-8")
    records = [line.rstrip(",") for line in theirs.splitlines()[1:-1]]
    assert "e.g." in json.loads(records[7])["sentence"].split()
    ours = (tmp_path / "CrossNER_AI" / "test.json").read_text(encoding="utf-8")
    assert ours == "[" + ", ".join(records) + "]"


@pytest.mark.shared
def test_every_gliner_benchmark_test_file_round_trips(shared: Path, tmp_path: Path) -> None:
    """Each of GLiNER's preprocessed test files, read and exported again, reads the same through
    GLiNER's `process`, except the entities whose positions in its file fall inside a word (its
    conversion found a name inside another word: "Australia" in "Australian"), which the reader
    moves to the words that spell it (or snaps outwards) and counts."""
    with Store(tmp_path / "s.duckdb") as store:
        for f in sorted((shared / "gliner-format").glob("*/test.json")):
            name = f.parent.name
            res = ingest(store, "gliner", f, name=name)
            counts = res.splits[0].report["counts"]
            fixed = counts.get("char_spans_snapped", 0) + counts.get(
                "char_spans_moved_to_whole_words", 0
            )
            out = tmp_path / "out" / name
            export_gliner_benchmark(store, name, out)
            theirs = json.loads(f.read_text(encoding="utf-8"))
            # the store's labels are the file's types verbalised (CrossNER_music's `misc` is
            # else, as its labels.json says; METHOD.md section 6)
            label_of = {raw: lab for raw, lab, _ in store.raw_labels(name, "test")}
            for record in theirs:
                for entity in record["entities"]:
                    entity["type"] = label_of[entity["type"]]
            ours = json.loads((out / "test.json").read_text(encoding="utf-8"))
            assert [r["sentence"] for r in ours] == [r["sentence"] for r in theirs], name
            differ = sum(
                sorted(process(a)["ner"], key=str) != sorted(set(process(b)["ner"]), key=str)
                for a, b in zip(ours, theirs, strict=True)
            )
            assert differ <= fixed, (name, differ, fixed)


def test_eval_layout_counts_the_negatives_it_cannot_hold(data_dir: Path, tmp_path: Path) -> None:
    """GLiNER's evaluation layout has no negatives: both kinds are counted, never written."""
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        ingest(store, "gliner", data_dir / SPANS_EXCERPT, name="spans")
        res = export_gliner_benchmark(store, "spans", tmp_path / "SPANS")
    assert res["rows"] == {"train": 10}
    assert (res["negatives_left_out"], res["negative_spans_left_out"]) == (9, 44)
    text = (tmp_path / "SPANS" / "train.json").read_text(encoding="utf-8")
    assert "negative" not in text
    cli_res = CliRunner().invoke(
        cli,
        ["export-gliner", "--benchmark", "spans", "--out", str(tmp_path / "B"), "--db", str(db)],
    )
    assert cli_res.exit_code == 0, cli_res.output
    assert "9 negatives and 44 negative spans (the layout has none)" in cli_res.output


def test_eval_layout_refuses_a_folder_it_would_clobber(
    crossner_excerpt: Path, tmp_path: Path
) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with Store(crossner_excerpt, read_only=True) as store:
        with pytest.raises(BuildersError, match=r"mine: exists and holds other files \(notes"):
            export_gliner_benchmark(store, "crossner-ai", tmp_path / "mine")
        with pytest.raises(BuildersError, match="builders ingest columns --path FILE --name nope"):
            export_gliner_benchmark(store, "nope", tmp_path / "x")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_eval_record_offsets_and_bad_tokens() -> None:
    rec = eval_record(["New", "York", "is", "big"], [(0, 2, "city"), (3, 4, "size")], "s/test/0")
    assert rec == {
        "sentence": "New York is big",
        "entities": [
            {"name": "New York", "type": "city", "pos": [0, 8]},
            {"name": "big", "type": "size", "pos": [12, 15]},
        ],
    }
    assert process(rec) == {
        "tokenized_text": ["New", "York", "is", "big"],
        "ner": [(0, 1, "city"), (3, 3, "size")],
    }
    with pytest.raises(BuildersError, match=r"s/test/4: token 'a\\xa0b' is empty or holds"):
        eval_record(["a\xa0b"], [], "s/test/4")
    with pytest.raises(BuildersError, match="token '' is empty"):
        eval_record(["a", ""], [], "s/test/5")


def test_cli_eval_layout(crossner_excerpt: Path, tmp_path: Path) -> None:
    out = tmp_path / "CrossNER_AI"
    args = ["export-gliner", "--benchmark", "crossner-ai", "--out", str(out)]
    res = CliRunner().invoke(cli, [*args, "--db", str(crossner_excerpt)])
    assert res.exit_code == 0, res.output
    assert "crossner-ai: test 3 sentences, " in res.output
    assert "crossner-ai has no train, dev split" in res.output
    res = CliRunner().invoke(cli, [*args, "--db", str(crossner_excerpt), "--json"])
    assert json_result(res.stdout)["rows"] == {"test": 3}


@pytest.mark.shared
def test_eval_layout_of_full_crossner_ai_reads_like_gliners_own(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole benchmark from the CrossNER BIO files, through GLiNER's `create_dataset`, beside
    GLiNER's own preprocessed CrossNER_AI: the same sentences and words, and every mention of
    theirs among ours. Ours has 12 more: 9 sentence-final entities GLiNER's conversion dropped
    (1 train, 3 dev, 5 test) and 3 dev entities whose positions in its file map to no word."""
    with Store(tmp_path / "s.duckdb") as store:
        ingest(store, "crossner-ai", shared / "crossner/ai")
        export_gliner_benchmark(store, "crossner-ai", tmp_path / "ours" / "CrossNER_AI")
    monkeypatch.chdir(tmp_path / "ours")  # open_content matches names anywhere in the path
    ours = create_dataset("CrossNER_AI")
    monkeypatch.chdir(shared / "gliner-format")
    theirs = create_dataset("CrossNER_AI")
    assert sorted(ours[3]) == sorted(theirs[3])
    extra = 0
    for a, b in zip(ours[:3], theirs[:3], strict=True):
        assert [r["tokenized_text"] for r in a] == [r["tokenized_text"] for r in b]
        for ra, rb in zip(a, b, strict=True):
            mine = set(ra["ner"])
            assert {e for e in rb["ner"] if None not in e} <= mine
            extra += len(mine) - len({e for e in rb["ner"] if None not in e})
    assert extra == 12


# ------------------------------------------------------------------------- flair's columns
def _read_columns(path: Path) -> list[tuple[list[str], list[tuple[int, int, str]]]]:
    """The sentences of a column file as the toolkit's own columns reader reads them."""
    from builders.sources import columns
    from builders.sources.base import ReadReport

    report = ReadReport()
    sentences = [(ex.tokens, ex.spans) for ex in columns.read(path, report)]
    assert not report.counts, report.counts  # nothing repaired, skipped or left out
    assert report.notes == [
        f"{path.name}: columns detected as token,tag (column 2 holds the tags)",
        f"{path.name}: tag scheme detected as BIO",
    ]
    return sentences


def test_flair_export_reads_back_with_every_mention(any_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "flair"
    res = export_flair(any_folder, "entropy", out)
    rows = _rows(any_folder, "entropy")
    assert sorted(p.name for p in out.iterdir()) == ["train.txt"]  # a level has train only
    assert res["rows"] == {"train": len(rows)} and res["not_kept"] == {
        "nested": 0,
        "overlapping": 0,
    }
    assert res["mentions"] == sum(len(r["spans"]) for r in rows)
    assert res["negatives_left_out"] == sum(len(r["negatives"]) for r in rows)
    assert res["negative_spans_left_out"] == sum(len(r["negative_spans"]) for r in rows)
    tag = {lab: "_".join(lab.split()) for r in rows for lab in (s["label"] for s in r["spans"])}
    assert res["labels_renamed"] == {a: b for a, b in tag.items() if a != b}
    assert _read_columns(out / "train.txt") == [
        (r["tokens"], sorted((s["start"], s["end"], tag[s["label"]]) for s in r["spans"]))
        for r in rows
    ]


def _nested_folder(root: Path, tokens: list[str], spans: list[dict]) -> Path:
    (root / "n" / "entropy").mkdir(parents=True)
    table = pa.table(
        {
            "id": ["train/0", "train/1"],
            "tokens": [tokens, ["#", "Paris"]],  # `# O` would be a comment to flair
            "spans": [spans, [{"start": 1, "end": 2, "label": "city"}]],
            "negatives": [[], []],
            "negative_spans": [[], []],
        }
    )
    write_parquet(table, root / "n/entropy/train-00000-of-00001.parquet", subset_features())
    return root / "n"


def test_flair_export_counts_the_mentions_bio_cannot_hold(tmp_path: Path) -> None:
    spans = [
        {"start": 0, "end": 2, "label": "state"},  # inside the city: nested
        {"start": 0, "end": 3, "label": "city"},  # outermost: kept
        {"start": 2, "end": 4, "label": "building"},  # crosses the city: overlapping
        {"start": 4, "end": 5, "label": "day of week"},  # written day_of_week
    ]
    folder = _nested_folder(tmp_path, ["New", "York", "City", "Hall", "Monday"], spans)
    out = tmp_path / "out"
    res = export_flair(folder, None, out)
    assert res["not_kept"] == {"nested": 1, "overlapping": 1} and res["mentions"] == 3
    assert res["labels_renamed"] == {"day of week": "day_of_week"}
    assert (out / "train.txt").read_text() == (
        "New\tB-city\nYork\tI-city\nCity\tI-city\nHall\tO\nMonday\tB-day_of_week\n\n"
        "#\tO\nParis\tB-city\n\n"
    )
    assert _read_columns(out / "train.txt") == [
        (["New", "York", "City", "Hall", "Monday"], [(0, 3, "city"), (4, 5, "day_of_week")]),
        (["#", "Paris"], [(1, 2, "city")]),
    ]
    res = CliRunner().invoke(cli, ["export", str(folder), "--format", "flair", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "train 2 sentences, 3 mentions" in res.output
    assert "1 nested and 1 overlapping mentions" in res.output
    (out / "notes.txt").write_text("mine")
    with pytest.raises(BuildersError, match=r"holds other files \(notes.txt\)"):
        export_flair(folder, None, out)


def test_flair_export_refuses_a_token_it_cannot_hold(tmp_path: Path) -> None:
    folder = _nested_folder(tmp_path, ["New York", "City"], [])
    with pytest.raises(BuildersError, match=r"row 'train/0': token 'New York' is empty, holds"):
        export_flair(folder, None, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_export_format_gliner_is_export_gliner(folder: Path, tmp_path: Path) -> None:
    """`export` (its default format, and --format gliner) writes export-gliner's bytes and
    result; export-gliner's library function writes the same."""
    outs = [tmp_path / f"{i}.json" for i in range(3)]
    results = []
    for argv, out in zip(
        (["export-gliner"], ["export"], ["export", "--format", "gliner"]), outs, strict=True
    ):
        res = CliRunner().invoke(
            cli,
            [
                *argv,
                str(folder),
                "--config",
                "max",
                "--max-words",
                "40",
                "--out",
                str(out),
                "--json",
            ],
        )
        assert res.exit_code == 0, res.output
        results.append({**json_result(res.output), "out": None})
    export_gliner(folder, "max", tmp_path / "lib.json", limits=Limits(max_words=40))
    assert len({p.read_bytes() for p in [*outs, tmp_path / "lib.json"]}) == 1
    assert results[0] == results[1] == results[2] and results[0]["split"] == "train"


def test_export_refuses_gliners_options_with_flair(folder: Path, tmp_path: Path) -> None:
    base = ["export", str(folder), "--format", "flair", "--out", str(tmp_path / "o")]
    for extra, named in (
        (["--max-words", "10"], "the limits (--max-words, ...): read by --format gliner only"),
        (["--no-windows"], "the limits (--max-words"),
        (["--split", "train"], "--split: read by --format gliner only"),
        (["--tokenizer", "x"], "--tokenizer: read by --format gliner only"),
    ):
        res = CliRunner().invoke(cli, base + extra)
        assert res.exit_code == 2 and named in res.output, res.output
    res = CliRunner().invoke(cli, ["export", "--format", "flair", "--source", "x", "--out", "o"])
    assert res.exit_code == 2 and "--source: read by --format gliner only" in res.output
    assert not (tmp_path / "o").exists()
    res = CliRunner().invoke(cli, ["export", "--help"])
    assert "Example: builders export" in res.output and "--format flair" in res.output
