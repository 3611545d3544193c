"""Several inputs, nothing lost: repeated paths and globs, shards, --append, and the refusal to
replace a split's data silently; split names checked and taken from file names."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import json_result

from builders.cli.main import cli
from builders.errors import BuildersError, UnknownNameError
from builders.store import Store
from builders.store.ingest import ingest

TRAIN = "gliner/train-shaped.json"
# GLiNER training records of the excerpt: sentences and mentions per shard below
SHARDS = {"processed_output1.json": (0, 4), "processed_output2.json": (4, 7)}
SHARDS["processed_output10.json"] = (7, 10)


@pytest.fixture
def shards(tmp_path: Path, data_dir: Path) -> Path:
    """The 10 records of the excerpt cut into three shards, named like the issue's corpus."""
    lines = [
        line.rstrip(",\n")
        for line in (data_dir / TRAIN).read_text(encoding="utf-8").splitlines()
        if line.startswith("{")
    ]
    folder = tmp_path / "shards"
    folder.mkdir()
    for name, (a, b) in SHARDS.items():
        (folder / name).write_text("[\n" + ",\n".join(lines[a:b]) + "\n]\n", encoding="utf-8")
    return folder


def counts(res) -> list[tuple]:
    return [(s.split, s.status, s.sentences, s.mentions) for s in res.splits]


def test_folder_of_shards_is_read_as_train(db: Path, shards: Path) -> None:
    with Store(db) as store:
        res = ingest(store, "gliner", shards)
        ids = [r[0] for r in store.con.execute("SELECT raw_id FROM sentences").fetchall()]
    assert counts(res) == [("train", "ingested", 10, 44)]
    assert res.notes == [
        f"{shards}: no file name says a split; its 3 files are read as train, one corpus in shards"
    ]
    # natural order: 1, 2, 10
    assert [Path(f).name for f in res.splits[0].files] == list(SHARDS)
    assert len(ids) == 10


def test_repeated_paths_and_globs_read_everything(db: Path, shards: Path) -> None:
    with Store(db) as store:
        both = ingest(store, "gliner", [shards / "processed_output1.json", shards / "*10.json"])
        assert counts(both) == [("train", "ingested", 7, 36)]
        glob = ingest(store, "gliner", str(shards / "processed_output*.json"), name="g")
        assert counts(glob) == [("train", "ingested", 10, 44)]
        with pytest.raises(BuildersError, match=re.escape("nothing*.json: no file matches")):
            ingest(store, "gliner", str(shards / "nothing*.json"), name="h")


def test_a_different_input_is_refused_then_appended(db: Path, shards: Path) -> None:
    one, two, ten = (shards / n for n in SHARDS)
    with Store(db) as store:
        first = ingest(store, "gliner", one)
        assert counts(first) == [("train", "ingested", 4, 11)]
        before = store.checksums()
        with pytest.raises(BuildersError) as err:
            ingest(store, "gliner", two)
        assert str(err.value) == (
            "gliner/train already holds 4 sentences and 11 mentions from "
            f"{one.resolve()} (4); this ingest reads {two.resolve()}. Pass --replace to "
            "replace what is stored, --append to add to it, or --name NAME to store it apart"
        )
        assert store.checksums() == before
        added = ingest(store, "gliner", [two, ten], append=True)
        assert counts(added) == [("train", "appended", 10, 44)]
        assert [Path(f).name for f in added.splits[0].files] == list(SHARDS)
        # sentence ids continue where the stored ones end
        idx = [r[0] for r in store.con.execute("SELECT idx FROM sentences ORDER BY idx").fetchall()]
        assert idx == list(range(10))
        again = ingest(store, "gliner", shards, append=True)
        assert counts(again) == [("train", "unchanged", 10, 44)]
        replaced = ingest(store, "gliner", two, replace=True)
        assert counts(replaced) == [("train", "ingested", 3, 8)]


def test_append_refuses_a_changed_input_and_other_options(
    db: Path, tmp_path: Path, data_dir: Path
) -> None:
    f = tmp_path / "a.bio"
    shutil.copy(data_dir / "mit-restaurant/restauranttrain-head.bio", f)
    g = tmp_path / "b.bio"
    shutil.copy(data_dir / "mit-restaurant/restauranttest.bio", g)
    with Store(db) as store:
        ingest(store, "columns", f, name="r")
        before = store.checksums()
        f.write_text(f.read_text() + "O\tmore\n\n", encoding="utf-8")
        with pytest.raises(
            BuildersError, match=re.escape(f"r/train: {f.resolve()} changed since it was")
        ):
            ingest(store, "columns", [f, g], name="r", append=True)
        with pytest.raises(BuildersError, match=re.escape("r/train was read with options {}")):
            ingest(store, "columns", g, name="r", append=True, options={"scheme": "bio"})
        assert store.checksums() == before
        with pytest.raises(BuildersError, match="--replace and --append exclude each other"):
            ingest(store, "columns", g, name="r", append=True, replace=True)


def test_a_split_read_by_an_older_reader_is_named_and_never_appended_to(
    tmp_path: Path, shards: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader whose output changed bumps its loader version: a split it read before is
    re-read on its next ingest, never mixed with the new reading by --append, and commands
    that use it as stored say so."""
    import dataclasses

    from builders import sources

    one, two, _ = (shards / n for n in SHARDS)
    db = tmp_path / "s.duckdb"
    now = sources.SOURCES["gliner"]
    older = dataclasses.replace(now, loader_version=str(int(now.loader_version) - 1))
    with monkeypatch.context() as m:
        m.setattr(sources, "SOURCES", {**sources.SOURCES, "gliner": older})
        with Store(db) as store:
            ingest(store, "gliner", one, name="med")
    with Store(db) as store:
        assert store.older_reads() == [
            ("med", "train", "gliner", older.loader_version, now.loader_version)
        ]
        before = store.checksums()
        with pytest.raises(BuildersError, match=r"med/train was read by version .* re-read the"):
            ingest(store, "gliner", two, name="med", append=True)
        assert store.checksums() == before
    res = CliRunner().invoke(cli, ["stats", "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert "warning: med/train was read by version" in res.stderr
    with Store(db) as store:
        ingest(store, "gliner", two, name="other")  # read by the current reader
    args = ["familiarity", "--source", "other", "--benchmarks", "med:train", "--no-leakage"]
    res = CliRunner().invoke(cli, [*args, "--model", "all-MiniLM-L6-v2", "--db", str(db), "-q"])
    assert res.exit_code == 0, res.output
    assert res.stderr.count("warning: ") == 1 and "med/train was read by version" in res.stderr
    with Store(db) as store:
        assert counts(ingest(store, "gliner", one, name="med")) == [("train", "ingested", 4, 11)]
        assert store.older_reads() == []


@pytest.mark.parametrize(
    ("name", "split"),
    [
        ("test.txt", "test"),
        ("restauranttrain.bio", "train"),
        ("my-validation-set.bio", "dev"),
        ("corpus.bio", "train"),
    ],
)
def test_a_single_files_split_comes_from_its_name(
    db: Path, tmp_path: Path, data_dir: Path, name: str, split: str
) -> None:
    f = tmp_path / name
    shutil.copy(data_dir / "mit-restaurant/restauranttrain-head.bio", f)
    with Store(db) as store:
        res = ingest(store, "columns", f)
    assert [s.split for s in res.splits] == [split]
    said = split != "train" or "train" in name
    assert res.notes == ([] if said else [f"{name}: no split in the file name; read as train"])


def test_split_names_are_checked(db: Path, tmp_path: Path, data_dir: Path) -> None:
    f = tmp_path / "train_test.bio"
    shutil.copy(data_dir / "mit-restaurant/restauranttrain-head.bio", f)
    with Store(db) as store:
        with pytest.raises(UnknownNameError) as err:
            ingest(store, "columns", f, split="bogus")
        assert str(err.value) == (
            "unknown split 'bogus'. Valid: dev, test, testing, train, training, valid, validation"
        )
        with pytest.raises(BuildersError, match=re.escape("says several splits (test, train)")):
            ingest(store, "columns", f)
        res = ingest(store, "columns", f, split="Validation")
    assert [s.split for s in res.splits] == ["dev"]


def test_folder_notes_files_it_does_not_read(db: Path, tmp_path: Path, data_dir: Path) -> None:
    folder = tmp_path / "crossner-ai"
    folder.mkdir()
    shutil.copy(data_dir / "crossner/ai-test.txt", folder / "test.txt")
    (folder / "README.md").write_text("# notes\n", encoding="utf-8")
    (folder / "extra.txt").write_text("x\tO\n\n", encoding="utf-8")
    with Store(db) as store:
        res = ingest(store, "crossner-ai", folder)
    assert counts(res) == [("test", "ingested", 3, 8)]
    assert res.notes == [f"{folder}: not read: README.md, extra.txt"]


def test_offline_benchmark_without_path_leaves_no_store(tmp_path: Path) -> None:
    db = tmp_path / "new.duckdb"
    res = CliRunner().invoke(cli, ["ingest", "crossner-ai", "--db", str(db), "-q"])
    assert res.exit_code == 1
    assert res.output == (
        "Error: source 'crossner-ai': no local copy (no $LABELSHIFT_DATA/crossner/ai), and "
        "reading its Hub origin DFKI-SLT/cross_ner[ai] cannot be reached offline (HF_HUB_OFFLINE "
        "is set): give the files with --path (CrossNER AI: token<TAB>BIO-tag column files)\n"
    )
    assert not db.exists()
    res = CliRunner().invoke(cli, ["ingest", "mit-movie", "--db", str(db), "-q"])
    assert res.output.startswith("Error: source 'mit-movie' has no default origin: give the files")
    assert not db.exists()


def test_failed_first_ingest_leaves_no_store(tmp_path: Path) -> None:
    bad = tmp_path / "test.txt"
    bad.write_text("EU\tB-ORG\nrejects\tQ-X\n\n", encoding="utf-8")
    db = tmp_path / "s.duckdb"
    res = CliRunner().invoke(cli, ["ingest", "crossner-ai", "--path", str(bad), "--db", str(db)])
    assert res.exit_code == 1 and not db.exists()


def test_cli_repeated_path_append_and_refusal(tmp_path: Path, shards: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    run = CliRunner().invoke
    first = run(
        cli,
        ["ingest", "gliner", "--path", str(shards / "processed_output1.json"), "--db", db, "-q"],
    )
    assert first.exit_code == 0, first.output
    refused = run(
        cli,
        ["ingest", "gliner", "--path", str(shards / "processed_output2.json"), "--db", db, "-q"],
    )
    assert refused.exit_code == 1
    assert "Pass --replace to replace what is stored, --append to add to it" in refused.output
    args = ["--path", str(shards / "processed_output2.json"), "--path", str(shards / "*10.json")]
    added = run(cli, ["ingest", "gliner", *args, "--append", "--db", db, "--json", "-q"])
    summary = json_result(added.output)
    assert (summary["status"], summary["sentences"], summary["mentions"]) == ("appended", 10, 44)


def test_two_fewnerd_train_samples(shared: Path, db: Path) -> None:
    """The issue's case: the second Few-NERD train sample under the same name."""
    a, b = (shared / "fewnerd/inter" / f"train-sample-{x}.txt" for x in "ab")
    with Store(db) as store:
        assert ingest(store, "fewnerd", a).sentences == 11710
        with pytest.raises(BuildersError, match="fewnerd/train already holds 11,710 sentences"):
            ingest(store, "fewnerd", b)
        res = ingest(store, "fewnerd", b, append=True)
    assert (res.status, res.sentences) == ("appended", 11710 + 13012)


def test_a_label_the_source_refuses_names_its_file_and_line() -> None:
    """Whatever the reader, a raw label the source's spec cannot map (e.g. a Few-NERD tag
    outside its types, read through `hf`) is an error at the example's place in the file."""
    from types import SimpleNamespace

    from builders.errors import SourceFormatError
    from builders.sources.base import Example
    from builders.store.batches import Buffers, Validator

    def refuse(raw: str, mapping: object = None) -> tuple[str, str | None]:
        raise ValueError(f"not a type of this source: {raw!r}")

    spec = SimpleNamespace(map_label=refuse)
    validator = Validator(spec, Buffers("s", "train"))  # type: ignore[arg-type]
    ex = Example(tokens=["a"], spans=[(0, 1, "bogus-tag")], line=7, record=None)
    with pytest.raises(SourceFormatError) as err:
        validator.label("data/x.json", ex, "bogus-tag")
    assert str(err.value).startswith("data/x.json:7: not a type of this source")
    assert "bogus-tag" in str(err.value)
