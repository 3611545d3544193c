"""Training labels verbalised like the benchmarks' (METHOD.md section 6): raw tags of column
files through the packaged table, natural-language labels kept, the raw tag stored, every
change counted, a label map, an ambiguous label refused, older reads named."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from builders.cli.main import cli
from builders.errors import BuildersError, SourceFormatError
from builders.labels import normalise_label, verbalise
from builders.shift.benchmarks import evaluation_sets
from builders.store import Store
from builders.store.ingest import ingest

CONLL = Path("conll2003") / "valid.txt"  # tests/data: CoNLL-2003's own 4 columns
MOVIE = Path("mit-movie") / "engtrain.excerpt.bio"  # MIT Movie's training file
PILENER_BIO = Path("pilener-bio") / "pilener-391xALL-dev.excerpt.bio"
CONLL_TAGS = {"LOC": "location", "MISC": "else", "ORG": "organization", "PER": "person"}
FOUR = {"columns": "token,pos,chunk,tag"}


def raw_labels(store: Store, source: str) -> dict[str, str]:
    """raw tag -> stored label, over every split of a source."""
    return {
        raw: label
        for split in store.splits_of(source)
        for raw, label, _ in store.raw_labels(source, split)
    }


def test_conll_tags_become_the_benchmarks_labels(db: Path, data_dir: Path) -> None:
    with Store(db) as store:
        res = ingest(store, "columns", data_dir / CONLL, name="c", split="train", options=FOUR)
        stored = raw_labels(store, "c")
        labels = {lab for lab, _, _ in store.label_counts("c")}
    assert stored == CONLL_TAGS  # the raw tag kept beside its label
    report = res.splits[0].report
    assert report["counts"]["labels_verbalised"] == 4
    assert report["notes"][-1] == (
        "4 labels verbalised by the packaged table: LOC -> location, MISC -> else, "
        "ORG -> organization, PER -> person"
    )
    assert labels & set(evaluation_sets("conll2003")["conll2003"]) == {
        "location",
        "organization",
        "person",
    }


def test_mit_movie_training_file_reads_as_the_benchmark(db: Path, data_dir: Path) -> None:
    with Store(db) as store:
        res = ingest(store, "columns", data_dir / MOVIE, name="m")
        stored = raw_labels(store, "m")
    assert stored["RATINGS_AVERAGE"] == "average ratings"
    assert set(stored.values()) <= set(evaluation_sets("mit-movie")["mit-movie"])
    assert res.splits[0].report["counts"]["labels_verbalised"] == 1


def test_natural_language_labels_are_kept(db: Path, data_dir: Path) -> None:
    """Pile-NER's BIO conversion and GLiNER's json hold label text already: nothing changes,
    and nothing is counted."""
    with Store(db) as store:
        bio = ingest(store, "pilener-sample", data_dir / PILENER_BIO, name="p")
        g = ingest(store, "gliner", data_dir / "gliner" / "train-shaped.json", name="g")
        for name, res in (("p", bio), ("g", g)):
            assert all(lab == verbalise(raw) for raw, lab in raw_labels(store, name).items())
            assert "labels_verbalised" not in res.splits[0].report["counts"]


def _gliner(tmp_path: Path, *types: str) -> Path:
    """A GLiNER training json of one-token mentions, one sentence per type."""
    f = tmp_path / f"{len(types)}.json"
    records = [{"tokenized_text": ["It", "is", "X", "."], "ner": [[2, 2, t]]} for t in types]
    f.write_text(json.dumps(records), encoding="utf-8")
    return f


def test_tags_among_natural_language_labels(db: Path, tmp_path: Path) -> None:
    """GLiNER json whose types include tags (`PER`, `org`) reads them as tags; the table's
    natural-language key `organisation` stays, unless a tag of the table beside it says the
    file holds tags (GLiNER's own CrossNER_music json holds `misc` and `organisation`)."""
    with Store(db) as store:
        alone = ingest(store, "gliner", _gliner(tmp_path, "organisation", "person"), name="a")
        assert raw_labels(store, "a") == {"organisation": "organisation", "person": "person"}
        assert "labels_verbalised" not in alone.splits[0].report["counts"]
        res = ingest(store, "gliner", _gliner(tmp_path, "PER", "org", "organisation"), name="b")
        stored = raw_labels(store, "b")
        labels = {lab for lab, _, _ in store.label_counts("b")}
    assert stored == {"PER": "person", "org": "organization", "organisation": "organization"}
    assert labels == {"person", "organization"}  # relabelled in the store, not only counted
    assert res.splits[0].report["counts"]["labels_verbalised"] == 3


def _read(store: Store, name: str, parts: list[Path], append: bool, **kw: object) -> dict:
    """`parts` read in one ingest, or the first then each other with --append: the split's
    stored labels, label counts and report."""
    if append:
        for i, part in enumerate(parts):
            ingest(store, "gliner", part, name=name, split="train", append=i > 0, **kw)
    else:
        ingest(store, "gliner", parts, name=name, split="train", **kw)
    report = store.stored_splits(name)["train"].report
    notes = [n for n in report["notes"] if "verbalised by" in n or "not in the packaged" in n]
    return {
        "raw": raw_labels(store, name),
        "counts": sorted(store.label_counts(name)),
        "report": {k: v for k, v in report["counts"].items() if k.startswith("labels_")},
        "notes": notes,
    }


@pytest.mark.parametrize(
    "types",
    [
        [("PER", "LOC"), ("PER", "ORG")],  # PER read twice: counted once
        [("organisation", "person"), ("PER", "org")],  # the second read's tags settle the first's
        [("misc", "person"), ("misc",)],
    ],
    ids=["overlap", "settled-by-append", "nothing-new"],
)
def test_an_append_verbalises_and_counts_like_one_read(
    db: Path, tmp_path: Path, types: list[tuple[str, ...]]
) -> None:
    """An appended split's labels and their counts are the whole split's, as if its inputs
    were read in one ingest: a label in both reads counts once, and the tags of a later read
    settle an earlier read's natural-language key (relabelled in the store)."""
    parts = []
    for i, group in enumerate(types):
        (tmp_path / str(i)).mkdir()
        parts.append(_gliner(tmp_path / str(i), *group))
    mapping = {"label_map": {"LOC": "place"}}
    with Store(db) as store:
        once = _read(store, "once", parts, append=False, **mapping)
        appended = _read(store, "appended", parts, append=True, **mapping)
    assert appended == once
    n = len({t for group in types for t in group} - {"person"})
    assert sum(once["report"].values()) == n


def test_a_later_append_leaves_settled_labels_alone(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stored labels are read as stored: an append that changes no label's reading rewrites
    no stored row (a settled `organisation` is not relabelled again and again)."""
    from builders.store.batches import Buffers

    parts = []
    for i, group in enumerate([("organisation", "person"), ("PER", "org"), ("organisation",)]):
        (tmp_path / str(i)).mkdir()
        parts.append(_gliner(tmp_path / str(i), *group))
    relabelled: list[tuple[str, str]] = []
    relabel = Buffers.relabel
    monkeypatch.setattr(
        Buffers, "relabel", lambda self, con, raw, label: (
            relabelled.append((raw, label)), relabel(self, con, raw, label)
        )[-1],
    )  # fmt: skip
    with Store(db) as store:
        for i, part in enumerate(parts):
            ingest(store, "gliner", part, name="s", split="train", append=i > 0)
            assert relabelled == ([] if i == 0 else [("organisation", "organization")])
        assert raw_labels(store, "s")["organisation"] == "organization"


def test_an_ambiguous_label_is_refused_and_a_label_map_decides(
    db: Path, data_dir: Path, tmp_path: Path
) -> None:
    """A column file of natural-language labels (Pile-NER's BIO conversion) that also holds
    `organisation`: CrossNER's tag or a label of its own? The refusal names the option."""
    text = (data_dir / PILENER_BIO).read_text(encoding="utf-8")
    f = tmp_path / "mixed.bio"
    f.write_text(text + "\nAcme\tB-organisation\nhires\tO\n", encoding="utf-8")
    line = len(text.splitlines()) + 2
    with Store(db) as store:
        with pytest.raises(SourceFormatError) as err:
            ingest(store, "columns", f, name="x", options={"repair": True})
        assert not store.has_source("x")
        assert str(err.value).startswith(f"{f}:{line}: 'organisation' is a benchmark tag")
        assert "say which with --label-map FILE" in str(err.value)
        keep = {"organisation": "organisation"}
        res = ingest(store, "columns", f, name="x", options={"repair": True}, label_map=keep)
        assert raw_labels(store, "x")["organisation"] == "organisation"
    assert res.splits[0].report["counts"]["labels_mapped"] == 1


def test_a_label_map_is_part_of_the_fingerprint(db: Path, data_dir: Path) -> None:
    path = data_dir / CONLL
    with Store(db) as store:
        ingest(store, "columns", path, name="c", options=FOUR)
        again = ingest(store, "columns", path, name="c", options=FOUR, label_map={"PER": "human"})
        assert again.status == "ingested"  # another map: read again
        assert raw_labels(store, "c")["PER"] == "human"
        assert again.splits[0].report["notes"][-2:] == [
            "1 label verbalised by the label map: PER -> human",
            "3 labels verbalised by the packaged table: LOC -> location, MISC -> else, "
            "ORG -> organization",
        ]
        same = ingest(store, "columns", path, name="c", options=FOUR, label_map={"per": "Human"})
        assert same.status == "unchanged"  # the same map, spelled otherwise
        stored = store.stored_splits("c")["dev"].options
    assert stored == {**FOUR, "label_map": {"per": "human"}}


def test_a_label_map_does_not_apply_to_fewnerd_types(db: Path, data_dir: Path) -> None:
    with Store(db) as store, pytest.raises(BuildersError, match="--label-map does not apply"):
        ingest(store, "fewnerd", data_dir, label_map={"person-actor": "actor"})


def test_a_split_read_before_tags_were_verbalised_is_named_and_read_again(
    db: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose column file was read as `per` keeps working: commands name the split,
    and the next ingest reads it again (the reader's version is in the fingerprint)."""
    from builders import sources

    now = sources.SOURCES["columns"]
    older = dataclasses.replace(now, loader_version="1")
    with monkeypatch.context() as m:
        m.setattr(sources, "SOURCES", {**sources.SOURCES, "columns": older})
        with Store(db) as store:
            ingest(store, "columns", data_dir / CONLL, name="c", options=FOUR)
    with Store(db) as store:
        assert store.older_reads() == [("c", "dev", "columns", "1", now.loader_version)]
        res = ingest(store, "columns", data_dir / CONLL, name="c", options=FOUR)
        assert res.status == "ingested" and store.older_reads() == []
        assert raw_labels(store, "c") == CONLL_TAGS


def test_cli_ingest_label_map_and_labels(tmp_path: Path, data_dir: Path) -> None:
    db = str(tmp_path / "s.duckdb")
    mapping = tmp_path / "tags.toml"
    mapping.write_text('[verbalise]\nMISC = "miscellaneous"\n', encoding="utf-8")
    runner = CliRunner()
    path = str(data_dir / CONLL)
    args = ["ingest", "columns", "--path", path, "--name", "c", "--columns", FOUR["columns"]]
    args += ["--db", db]
    res = runner.invoke(cli, [*args, "--label-map", str(mapping)])
    assert res.exit_code == 0, res.output
    assert "labels mapped: 1" in res.stderr and "3 labels verbalised by the packaged" in res.stderr
    assert "labels verbalised: 3" not in res.stderr  # the count the note spells out, once
    assert "1 label verbalised by the label map: MISC -> miscellaneous" in res.stderr
    shown = runner.invoke(cli, ["labels", "c", "--db", db])
    assert shown.exit_code == 0, shown.output
    for line in ("PER -> person", "LOC -> location", "MISC -> miscellaneous"):
        assert line in shown.output
    rows = json.loads(runner.invoke(cli, ["labels", "c", "--db", db, "--json"]).output)["result"]
    assert {r["label"]: r["raw"] for r in rows}["person"] == ["PER"]
    bad = runner.invoke(cli, [*args, "--label-map", str(tmp_path / "none.json")])
    assert bad.exit_code == 1 and "no such label map file" in bad.output


# ---------------------------------------------------------------- the real corpora
def test_conll_train_through_columns(db: Path, shared: Path) -> None:
    """The issue's case: CoNLL-2003's training file read as any column file."""
    with Store(db) as store:
        res = ingest(
            store, "columns", shared / "conll2003" / "train.txt", name="t",
            options=FOUR,
        )  # fmt: skip
        counts = store.label_counts("t")
        assert raw_labels(store, "t") == CONLL_TAGS
    assert counts == [
        ("location", 7140, 5127),
        ("person", 6600, 4373),
        ("organization", 6321, 4587),
        ("else", 3438, 2698),
    ]
    assert res.splits[0].report["counts"]["labels_verbalised"] == 4


def test_mit_movie_train_through_columns(db: Path, shared: Path) -> None:
    with Store(db) as store:
        ingest(store, "columns", shared / "mit-movie" / "engtrain.bio", name="t")
        labels = {lab for lab, _, _ in store.label_counts("t")}
    assert labels == set(evaluation_sets("mit-movie")["mit-movie"])


def test_crossner_train_through_columns_reads_as_the_benchmark(db: Path, shared: Path) -> None:
    for domain in ("ai", "literature", "music", "politics", "science"):
        with Store(db) as store:
            ingest(store, "columns", shared / "crossner" / domain / "train.txt", name=domain)
            labels = {lab for lab, _, _ in store.label_counts(domain)}
        bench = f"crossner-{domain}"
        assert labels == set(evaluation_sets(bench, keep_misc=True)[bench]), domain


def test_the_evidence_for_natural_language_sources(shared: Path) -> None:
    """What METHOD.md section 6 says of the real corpora: Pile-NER's 455 frequent types change
    in `org` and `misc` only; NuNER's 924 and Pile-NER's 391 top types, and the types of
    GLiNER's benchmark json, not at all."""
    pile = json.loads((shared / "pilener" / "ne_types_list.json").read_text(encoding="utf-8"))
    changed = {
        t: verbalise(t, natural=True)
        for t in pile
        if verbalise(t, natural=True) != normalise_label(t)
    }
    assert changed == {"org": "organization", "misc": "else"}
    assert "organisation" in pile and "organization" in pile
    nuner = json.loads((shared / "nuner" / "top_tag_names.json").read_text(encoding="utf-8"))
    top = (shared / "pilener" / "pilener-391-labels.txt").read_text(encoding="utf-8").split("\n")
    for label in [*nuner, *filter(None, top)]:
        assert verbalise(label, natural=True) == normalise_label(label)
    for f in sorted((shared / "gliner-format").glob("*/train.json")):
        records = json.loads(f.read_text(encoding="utf-8"))
        types = {e["type"] for r in records for e in r["entities"]}
        assert all(verbalise(t, natural=True) == normalise_label(t) for t in types), f


def test_gliner_benchmark_json_reads_as_its_labels_file(db: Path, shared: Path) -> None:
    """GLiNER's CrossNER_music test and dev files hold the raw tags `organisation` and `misc`
    where its labels.json says organization and else: read, every file gives the labels of its
    labels.json."""
    with Store(db) as store:
        for folder in sorted(p for p in (shared / "gliner-format").iterdir() if p.is_dir()):
            listed = json.loads((folder / "labels.json").read_text(encoding="utf-8"))
            for split in ("train", "dev", "test"):
                name = f"{folder.name}-{split}"
                ingest(store, "gliner", folder / f"{split}.json", name=name)
                labels = {lab for lab, _, _ in store.label_counts(name)}
                assert labels == {normalise_label(t) for t in listed}, name


def test_a_stored_benchmark_keeps_the_labels_its_ingest_gave(db: Path, data_dir: Path) -> None:
    """A benchmark ingested with --label-map is evaluated with the labels that map gave; a
    command's own map still names a raw tag first."""
    from builders.shift.benchmarks import resolve

    with Store(db) as store:
        ingest(store, "columns", data_dir / CONLL, name="c", options=FOUR,
               label_map={"PER": "human"})  # fmt: skip
        (plain,) = resolve("c:dev", store=store)
        (mapped,) = resolve("c:dev", store=store, mapping={"per": "someone"})
    assert "human" in plain.labels and "person" not in plain.labels
    assert {"location", "organization"} <= set(plain.labels)
    assert "someone" in mapped.labels and "human" not in mapped.labels
