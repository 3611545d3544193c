"""Negatives as the corpus gives them: label-level ones (`negatives`, GLiNER's `ner_negatives`)
and span-level ones (`negative_ner`) in their own table; the schema version that added it."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from builders.cli.main import cli
from builders.errors import SourceFormatError, StoreError
from builders.store import Store
from builders.store.ingest import ingest

NEG = "gliner/negative-ner.json"


def test_span_level_negatives_are_stored(db: Path, data_dir: Path) -> None:
    with Store(db) as store:
        res = ingest(store, "gliner", data_dir / NEG, name="neg")
        frame = store.negative_spans_frame("neg")
        labels = store.con.execute(
            "SELECT idx, raw_label FROM negatives WHERE source = 'neg' ORDER BY ALL"
        ).fetchall()
        stats = store.stats()["sources"][0]
    assert (res.sentences, res.mentions, res.negatives, res.negative_spans) == (3, 8, 5, 4)
    assert frame.select("sentence_id", "start", "stop", "text", "label").rows() == [
        ("neg/train/0", 5, 8, "naive Bayes classifier", "conference"),
        ("neg/train/0", 10, 13, "Gaussian mixture model", "product"),
        ("neg/train/1", 11, 12, "LREC", "algorithm"),
        ("neg/train/2", 15, 16, "HMM", "conference"),
    ]
    # `negatives` in record 1, GLiNER's own `ner_negatives` in record 2
    assert labels == [
        (0, "conference"),
        (0, "else"),
        (0, "product"),
        (1, "algorithm"),
        (1, "product"),
    ]
    report = res.splits[0].report
    assert report["counts"] == {
        "duplicate_negative_spans": 1,
        "negative_spans_also_mentions_dropped": 1,
        "record_keys_not_read": 1,
    }
    assert report["notes"] == [
        "negative-ner.json: GLiNER training json",
        "negative-ner.json: record keys not read: ner_labels (1)",
    ]
    assert (stats["negatives"], stats["negative_spans"]) == (5, 4)


def test_bad_negative_span_names_record_and_value(db: Path, tmp_path: Path) -> None:
    f = tmp_path / "train.json"
    f.write_text(
        '[{"tokenized_text": ["a", "b"], "ner": [], "negative_ner": [[0, 0, "x"]]}, '
        '{"tokenized_text": ["a", "b"], "ner": [], "negative_ner": [[1, 2, "x"]]}]',
        encoding="utf-8",
    )
    with Store(db) as store, pytest.raises(SourceFormatError) as err:
        ingest(store, "gliner", f)
    assert str(err.value) == (
        f"{f}:1: record 2: negative_ner span outside the 2 tokens of 'tokenized_text' "
        '(end is inclusive): [1, 2, "x"]'
    )


def test_cli_shows_negative_spans(db: Path, data_dir: Path) -> None:
    res = CliRunner().invoke(
        cli, ["ingest", "gliner", "--path", str(data_dir / NEG), "--db", str(db), "-q"]
    )
    assert res.exit_code == 0, res.output
    header = next(line for line in res.output.splitlines() if "split" in line)
    assert "negative spans" in header


def test_old_schema_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    old = tmp_path / "old.duckdb"
    con = duckdb.connect(str(old))
    con.execute("CREATE TABLE meta(key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.close()
    for read_only in (False, True):
        with pytest.raises(StoreError) as err:
            Store(old, read_only=read_only)
        assert str(err.value) == (
            f"{old}: this store has schema version 1; this toolkit reads and writes version 2 "
            "(since 2: span-level negatives such as GLiNER's negative_ner, and the inputs of "
            "every split). Ingest into a new store: point --db (or $LABELSHIFT_DB) at a new "
            f"file, or delete {old} and ingest again"
        )
    con = duckdb.connect(str(old), read_only=True)
    tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
    con.close()
    assert tables == ["meta"]  # refused before anything was created
    res = CliRunner().invoke(cli, ["stats", "--db", str(old)])
    assert res.exit_code == 1 and re.match(r"Error: .*schema version 1", res.output)


def test_subset_rows_keep_the_negative_spans_of_their_labels(db: Path, data_dir: Path) -> None:
    """A level's rows keep the span-level negatives of its labels (whole or capped) in every
    sentence it keeps, like the label-level ones (METHOD.md section 4)."""
    with Store(db) as store:
        ingest(store, "gliner", data_dir / NEG, name="neg")

        def rows(labels: list[str], caps: dict[str, int] | None = None) -> list[tuple]:
            table = store.subset_rows("neg", labels, caps).to_pylist()
            return [
                (
                    r["id"],
                    r["negatives"],
                    [(s["start"], s["end"], s["label"]) for s in r["negative_spans"]],
                )
                for r in table
            ]

        every = rows(["algorithm", "conference"])
        only_conference = rows(["conference"])
        capped = rows(["algorithm"], {"conference": 1})
        schema = store.subset_rows("neg", ["conference"]).schema
    assert every == [
        ("neg/train/0", ["conference"], [(5, 8, "conference")]),  # `product` is no label here
        ("neg/train/1", ["algorithm"], [(11, 12, "algorithm")]),
        ("neg/train/2", [], [(15, 16, "conference")]),
    ]
    assert only_conference == [("neg/train/1", [], [])]  # its negative is of `algorithm`
    # `conference` capped at 1 mention: its one sentence holds 3, more than the cap, so it is
    # not drawn (never cut to 1); its negatives stay in every sentence the level keeps
    assert capped == [every[0], every[2]]
    assert str(schema.field("negative_spans").type) == (
        "list<l: struct<start: int32, end: int32, label: string>>"
    )


def test_subset_rows_leave_out_a_negative_span_equal_to_a_mention(db: Path, tmp_path: Path) -> None:
    """`Person` and `person` differ as raw labels, so the reader keeps both; normalised they are
    one label, and a row never says a span both is and is not a `person`."""
    f = tmp_path / "train.json"
    f.write_text(
        '[{"tokenized_text": ["Ada", "met", "Alan"], "ner": [[0, 0, "Person"], [2, 2, "person"]], '
        '"negative_ner": [[0, 0, "person"], [2, 2, "Person"], [1, 1, "person"]]}]',
        encoding="utf-8",
    )
    with Store(db) as store:
        res = ingest(store, "gliner", f, name="t")
        (row,) = store.subset_rows("t", ["person"]).to_pylist()
    assert res.negative_spans == 3
    assert row["negative_spans"] == [{"start": 1, "end": 2, "label": "person"}]
