"""brat standoff: NAME.txt with NAME.ann as one unit, fingerprinted over both; entities kept as
spans, what the span store cannot hold counted by kind; exact errors.

`tests/data/brat/docs` holds brat's own tutorial document and three CrossNER AI sentences
converted to brat (see `tests/data/brat/README.md`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import DATA, stored_rows

from builders.errors import InputError, SourceFormatError
from builders.store import Store
from builders.store.ingest import ingest

DOCS = DATA / "brat" / "docs"


def _copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(DOCS, tmp_path / "docs"))


def test_real_documents(db: Path) -> None:
    with Store(db) as store:
        res = ingest(store, "brat", DOCS)
        sentences, mentions, _ = stored_rows(store, "brat")
    split = res.splits[0]
    assert split.files == [
        str((DOCS / "000-introduction.{txt,ann}").resolve()),
        str((DOCS / "crossner-ai-excerpt.{txt,ann}").resolve()),
    ]
    assert (res.sentences, res.mentions) == (13, 15)
    assert split.report["counts"] == {
        "attributes_not_kept": 7,  # 5 A in the tutorial, an A and an M in the excerpt
        "discontinuous_entities_not_kept": 1,
        "equivalences_not_kept": 1,
        "event_triggers_not_kept": 1,
        "events_not_kept": 1,
        "normalisations_not_kept": 1,
        "notes_not_kept": 2,
        "relations_not_kept": 3,
        "tokens_split_at_entity_boundaries": 2,  # classifier|s, model|s
    }
    assert any("counted by kind (KIND_not_kept)" in n for n in split.report["notes"])
    tokens = {raw: toks for _, toks, raw in sentences}
    first = tokens["crossner-ai-excerpt@0"]
    assert first[5:12] == ["naive", "Bayes", "classifier", "s", ",", "Gaussian", "mixture"]
    by_sentence = {idx: [m[1:] for m in mentions if m[0] == idx] for idx, _, _ in sentences}
    conference = next(i for i, _, raw in sentences if raw == "crossner-ai-excerpt@134")
    # the nested `Language Resources` inside the conference's name: both kept
    assert by_sentence[conference] == [
        (6, 7, "conference"),
        (11, 12, "conference"),
        (14, 20, "conference"),
        (15, 17, "field"),
    ]
    citibank = next(i for i, _, raw in sentences if raw == "000-introduction@414")
    assert (2, 3, "Organization") in by_sentence[citibank]  # the trigger `moving` is not kept
    assert all(label != "Transfer-money" for _, _, _, label in mentions)


def test_an_edited_txt_beside_an_unchanged_ann_is_read_again(db: Path, tmp_path: Path) -> None:
    docs = _copy(tmp_path)
    with Store(db) as store:
        assert ingest(store, "brat", docs).status == "ingested"
        assert ingest(store, "brat", docs).status == "unchanged"
        before = store.stored_splits("brat")["train"].fingerprint
        txt = docs / "crossner-ai-excerpt.txt"
        txt.write_text(txt.read_text().replace("Typical", "Classic"))  # outside every entity
        assert ingest(store, "brat", docs).status == "ingested"
        assert store.stored_splits("brat")["train"].fingerprint != before
        sentences, _, _ = stored_rows(store, "brat")
    assert any(toks[0] == "Classic" for _, toks, _ in sentences)


def test_an_edited_ann_is_read_again(db: Path, tmp_path: Path) -> None:
    docs = _copy(tmp_path)
    with Store(db) as store:
        ingest(store, "brat", docs)
        ann = docs / "crossner-ai-excerpt.ann"
        ann.write_text(ann.read_text().replace("\tfield ", "\tdomain "))
        assert ingest(store, "brat", docs).status == "ingested"
        _, mentions, _ = stored_rows(store, "brat")
    assert "domain" in {m[3] for m in mentions} and "field" not in {m[3] for m in mentions}


def test_either_file_of_a_document_reads_both(db: Path) -> None:
    with Store(db) as store:
        res = ingest(store, "brat", DOCS / "000-introduction.ann")
    assert res.splits[0].files == [str((DOCS / "000-introduction.{txt,ann}").resolve())]
    assert res.mentions == 6


@pytest.mark.parametrize("missing", [".ann", ".txt"])
def test_a_document_without_its_other_file_is_refused(
    db: Path, tmp_path: Path, missing: str
) -> None:
    docs = _copy(tmp_path)
    (docs / f"000-introduction{missing}").unlink()
    other = ".txt" if missing == ".ann" else ".ann"
    with Store(db) as store, pytest.raises(InputError) as err:
        ingest(store, "brat", docs)
    assert str(err.value) == (
        f"{docs / ('000-introduction' + other)}: no 000-introduction{missing} beside it: this "
        "reader reads NAME.txt with NAME.ann (a document not annotated yet needs an empty one)"
    )


def _doc(tmp_path: Path, text: str, ann: str) -> Path:
    (tmp_path / "doc.txt").write_text(text, encoding="utf-8")
    (tmp_path / "doc.ann").write_text(ann, encoding="utf-8")
    return tmp_path / "doc.ann"


@pytest.mark.parametrize(
    ("ann", "message"),
    [
        ("T1\tPerson 0 3\tAdo\n", "doc.ann:1: entity text is not the .txt at 0 3 ('Ada'): 'Ado'"),
        ("T1\tPerson 0 99\tAda\n", "doc.ann:1: entity outside its .txt of 19 characters: '0 99'"),
        ("T1\tPerson 0 x\tAda\n", "doc.ann:1: entity offsets are not START END: '0 x'"),
        ("T1\tPerson 0 3\tAda\nX1\tfoo\n", "doc.ann:2: not a brat annotation line: 'X1\\tfoo'"),
    ],
)
def test_bad_annotations_name_the_file_line_and_value(
    db: Path, tmp_path: Path, ann: str, message: str
) -> None:
    path = _doc(tmp_path, "Ada wrote. Bo read.", ann)
    with Store(db) as store, pytest.raises(SourceFormatError) as err:
        ingest(store, "brat", path)
    assert str(err.value) == f"{tmp_path}/{message}"


def test_no_sentence_break_inside_an_entity(db: Path, tmp_path: Path) -> None:
    path = _doc(tmp_path, "Dr. Who came.\nYes.", "T1\tPerson 0 7\tDr. Who\n")
    with Store(db) as store:
        res = ingest(store, "brat", path)
        sentences, mentions, _ = stored_rows(store, "brat")
    assert [s[1] for s in sentences] == [["Dr", ".", "Who", "came", "."], ["Yes", "."]]
    assert [m[1:] for m in mentions] == [(0, 3, "Person")]
    assert res.splits[0].report["counts"] == {"sentence_breaks_inside_entities": 1}


def test_a_byte_order_mark_counts_as_brats_first_character(db: Path, tmp_path: Path) -> None:
    (tmp_path / "d.txt").write_bytes(b"\xef\xbb\xbfAda Lovelace wrote.")
    (tmp_path / "d.ann").write_text("T1\tperson 1 13\tAda Lovelace\n", encoding="utf-8")
    with Store(db) as store:
        ingest(store, "brat", tmp_path)
        sentences, mentions, _ = stored_rows(store, "brat")
    assert [s[1] for s in sentences] == [["Ada", "Lovelace", "wrote", "."]]
    assert [m[1:] for m in mentions] == [(0, 2, "person")]


def test_regenerate_sees_an_edited_txt(db: Path, tmp_path: Path) -> None:
    """`regenerate` decides as `prepare_source(exact=True)` does: the .txt's bytes count."""
    from builders.sources import get_source
    from builders.store.writer import prepare_source

    docs = _copy(tmp_path)
    spec = get_source("brat")
    with Store(db) as store:
        ingest(store, "brat", docs)
        assert not prepare_source(store, spec, spec.plan(docs), exact=True).pending
        txt = docs / "000-introduction.txt"
        txt.write_text(txt.read_text().replace("Welcome", "Welkome"))
        assert prepare_source(store, spec, spec.plan(docs), exact=True).pending
