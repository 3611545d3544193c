"""Real column files the reader refused before (issue 22): GermEval 2014 (comment lines, an
index column, outer and nested tags, a trailing tab) reads with no options; MIT Movie
trivia10k13 with a few space-separated rows is refused naming `-o sep=space`, and reads with
it. Every refusal names the file, the line, the value and the option that reads the file.

The expected counts are computed here from the raw text with plain string operations, not by
the reader, and agree with the figures written in tests/data/README.md."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from builders.errors import BuildersError, SourceFormatError
from builders.sources import get_source
from builders.sources.base import ReadReport
from builders.sources.columns import read
from builders.store import Store
from builders.store.ingest import ingest

GERMEVAL = "germeval2014/NER-de-test.excerpt.tsv"
TRIVIA_TRAIN = "mit-movie-trivia/trivia10k13train.spaces.excerpt.bio"
TRIVIA_TEST = "mit-movie-trivia/trivia10k13test.spaces.excerpt.bio"


def germeval_counts(path: Path, column: int) -> tuple[int, int, int, int, int]:
    """(comment lines, sentences, rows, mentions, types) of a GermEval file, from its text:
    a sentence starts at index 1, a mention at a `B-` tag in `column` (0-based)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    comments = [ln for ln in lines if ln.startswith("#\t")]
    rows = [ln.split("\t") for ln in lines if ln and not ln.startswith("#")]
    begins = [r[column][2:] for r in rows if r[column].startswith("B-")]
    sentences = sum(r[0] == "1" for r in rows)
    return len(comments), sentences, len(rows), len(begins), len(set(begins))


def bio_counts(path: Path) -> tuple[int, int, int]:
    """(sentences, mentions, types) of a label-first BIO file, from its text."""
    blocks = [b for b in path.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    tags = [ln.split()[0] for b in blocks for ln in b.splitlines()]
    begins = [t[2:] for t in tags if t.startswith("B-")]
    return len(blocks), len(begins), len(set(begins))


def named(path: Path, report: ReadReport | None = None, **opts) -> list:
    exs = list(read(path, report or ReadReport(), **opts))
    return [[(" ".join(e.tokens[a:b]), lab) for a, b, lab in e.spans] for e in exs]


def write(tmp_path: Path, name: str, text: str) -> Path:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    return f


# ------------------------------------------------------------------ GermEval 2014


def test_germeval_reads_with_no_options(data_dir: Path) -> None:
    path = data_dir / GERMEVAL
    comments, sentences, rows, mentions, types = germeval_counts(path, 2)
    assert (comments, sentences, rows, mentions, types) == (6, 6, 117, 9, 4)
    report = ReadReport()
    exs = list(read(path, report))
    assert len(exs) == sentences
    assert sum(len(e.spans) for e in exs) == mentions
    assert len({lab for e in exs for *_, lab in e.spans}) == types
    assert sum(len(e.tokens) for e in exs) == rows
    assert [e.line for e in exs] == [2, 17, 41, 65, 85, 115]  # the first row, not the comment
    spans = [[(" ".join(e.tokens[a:b]), lab) for a, b, lab in e.spans] for e in exs]
    assert spans[4] == [
        ("Lehmbruck - Beuys .Zeichnungen", "OTH"),
        ("Marion Bornscheuer", "PER"),
        ("Lehmbruck-Museum", "ORG"),
    ]
    assert exs[5].tokens[:2] == ['"', "Sonst"]  # the row with a trailing tab
    name = path.name
    assert report.counts == {
        "comment_lines_skipped": 6,
        "trailing_empty_cells": 1,
        "columns_not_read": 2 * rows,
    }
    assert report.notes == [
        f"{name}: columns detected as index,token,tag,nested (column 3 holds the tags)",
        f"{name}: column 1 numbers the tokens of each sentence (1, 2, ...): an index, not read",
        f"{name}: columns 3 and 4 hold tags of the same types (outer and nested annotation); "
        "column 3 is read (the outer tags, -o tags=outer), column 4 is not read: "
        "-o tags=nested reads it instead",
        f"{name}: tag scheme detected as BIO",
        f"{name}: 6 comment lines skipped ('#' and a space or tab before a sentence; the "
        "first: line 1); -o comments=none reads them as rows",
        f"{name}: 1 row ended in empty cells past column 4 (a trailing separator; the first: "
        "line 115); read without them",
        f"{name}: columns not read: column 1 (index) (117), column 4 (nested) (117)",
    ]


@pytest.mark.parametrize("tags", ["nested", "4", 4])
def test_germeval_nested_tags_by_option(data_dir: Path, tags: object) -> None:
    path = data_dir / GERMEVAL
    _, sentences, _, mentions, types = germeval_counts(path, 3)
    assert (mentions, types) == (2, 1)
    report = ReadReport()
    spans = named(path, report, tags=tags)
    assert len(spans) == sentences
    assert spans[4] == [("Lehmbruck", "PER"), ("Beuys", "PER")]
    assert sum(map(len, spans)) == mentions
    assert f"{path.name}: tags read from column 4 (-o tags={tags})" in report.notes
    assert report.notes[0] == (
        f"{path.name}: columns detected as index,token,outer,tag (column 4 holds the tags)"
    )


@pytest.mark.parametrize(
    "opts",
    [
        {"tags": "outer"},
        {"tags": "3"},
        {"columns": "index,token,tag,nested"},  # comments still found from the tag cell
        {"columns": "index,token,tag,nested", "scheme": "bio"},  # no scan at all
    ],
)
def test_germeval_outer_tags_every_way(data_dir: Path, opts: dict) -> None:
    path = data_dir / GERMEVAL
    assert named(path, **opts) == named(path)


def test_germeval_through_the_store(db: Path, data_dir: Path) -> None:
    path = data_dir / GERMEVAL
    _, sentences, _, mentions, types = germeval_counts(path, 2)
    with Store(db) as store:
        res = ingest(store, "columns", path, name="germeval")
    assert [(s.split, s.sentences, s.mentions, s.types) for s in res.splits] == [
        ("test", sentences, mentions, types)
    ]
    assert res.splits[0].report["counts"]["comment_lines_skipped"] == 6


def test_index_that_does_not_count_is_no_index(data_dir: Path, tmp_path: Path) -> None:
    """Renumber one row: column 1 is no index any more, and the refusal says which columns
    to read (the token column, not the numbers)."""
    text = (data_dir / GERMEVAL).read_text(encoding="utf-8")
    f = write(tmp_path, "renumbered.tsv", text.replace("\n3\t1953\t", "\n7\t1953\t", 1))
    with pytest.raises(SourceFormatError) as err:
        list(read(f, ReadReport()))
    assert str(err.value) == (
        f"{f}: cannot tell which column holds the tags: columns 3 and 4 all hold tags; say it "
        "with --columns skip,token,skip,tag"
    )
    assert len(named(f, columns="skip,token,tag,skip")) == 6


def test_tag_columns_of_other_types_are_refused(tmp_path: Path) -> None:
    """Chunk and NER tags beside an index are not one annotation: no default, the refusal
    names the options, each of which reads the file."""
    f = write(tmp_path, "chunks.tsv", "1\tDie\tB-NP\tO\n2\tEU\tI-NP\tB-ORG\n3\tsagt\tB-VP\tO\n\n")
    with pytest.raises(SourceFormatError) as err:
        list(read(f, ReadReport()))
    assert str(err.value) == (
        f"{f}: cannot tell which column holds the tags: columns 3 and 4 all hold tags; say it "
        "with -o tags=outer (column 3) or -o tags=nested (column 4), or --columns "
        "skip,token,skip,tag"
    )
    assert named(f, tags="nested") == [[("EU", "ORG")]]
    assert named(f, tags="outer") == [[("Die EU", "NP"), ("sagt", "VP")]]
    assert named(f, columns="skip,token,skip,tag") == [[("EU", "ORG")]]


@pytest.mark.parametrize(
    ("text", "tags", "message"),
    [
        (
            "EU\tB-ORG\nsagt\tO\n\n",
            "nested",
            "-o tags=nested: the file has 1 column(s) of tags (2); -o tags=N names the column "
            "of tags by its number",
        ),
        ("1\tEU\tB-ORG\n2\tsagt\tO\n\n", "1", "-o tags=1: column 1 is the index columns"),
        ("EU\tB-ORG\nsagt\tO\n\n", "5", "-o tags=5: column 5 is not one of the 2 columns"),
    ],
)
def test_tags_option_names_a_column_of_the_file(
    tmp_path: Path, text: str, tags: str, message: str
) -> None:
    f = write(tmp_path, "f.tsv", text)
    with pytest.raises(SourceFormatError) as err:
        list(read(f, ReadReport(), tags=tags))
    assert str(err.value) == f"{f}: {message}"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"tags": "inner"},
            "option of the columns reader: tags='inner': give outer, nested, a column number "
            "(1, 2, ...) or auto",
        ),
        (
            {"tags": "nested", "columns": "token,tag"},
            "option of the columns reader: tags=nested and columns=token,tag: name the tag "
            "column once, with tags or with columns",
        ),
        (
            {"comments": "keep"},
            "option comments='keep' of the columns reader: expected one of auto, skip, none",
        ),
    ],
)
def test_bad_tags_and_comments_options(data_dir: Path, options: dict, message: str) -> None:
    with pytest.raises(BuildersError) as err:
        get_source("columns").plan(data_dir / GERMEVAL, None, options)
    assert str(err.value) == message


# ------------------------------------------------------------------ comment lines


def test_a_comment_like_line_that_reads_as_a_row_beside_comments_is_refused(
    tmp_path: Path,
) -> None:
    f = write(tmp_path, "tweets.tsv", "# a comment\nParis\tB-LOC\n\n#\tO\nrocks\tO\n\n")
    with pytest.raises(SourceFormatError) as err:
        list(read(f, ReadReport()))
    assert str(err.value) == (
        f"{f}:4: this line starts like a comment ('#' and a space or tab, before a sentence) "
        "but reads as a row of the file, while line 1 is a comment; -o comments=skip skips "
        "every such line, -o comments=none reads them all as rows: '#\\tO'"
    )
    report = ReadReport()
    assert named(f, report, comments="skip") == [[("Paris", "LOC")], []]
    assert report.counts["comment_lines_skipped"] == 2
    with pytest.raises(SourceFormatError) as err:
        list(read(f, ReadReport(), comments="none"))
    assert str(err.value) == (
        f"{f}:1: expected 2 columns, found 1; -o comments=skip skips the lines starting with "
        "'#' before a sentence: '# a comment'"
    )


def test_hash_tokens_stay_tokens(tmp_path: Path) -> None:
    """A tweet that starts with the token `#`: a row, as it always was, nothing skipped."""
    f = write(tmp_path, "tweets.tsv", "#\tO\nParis\tB-LOC\n\n#\tO\nrocks\tO\n\n")
    report = ReadReport()
    exs = list(read(f, report))
    assert [e.tokens for e in exs] == [["#", "Paris"], ["#", "rocks"]]
    assert "comment_lines_skipped" not in report.counts


def test_hash_line_inside_a_sentence_is_a_row(tmp_path: Path) -> None:
    f = write(tmp_path, "mid.tsv", "EU\tB-ORG\n# note\nrejects\tO\n\n")
    with pytest.raises(SourceFormatError) as err:
        list(read(f, ReadReport()))
    assert str(err.value) == (
        f"{f}:2: expected 2 columns, found 1; a line starting with '#' is a comment only "
        "before a sentence's first row: '# note'"
    )


# ------------------------------------------------------------------ MIT Movie trivia10k13


@pytest.mark.parametrize(
    ("rel", "line", "value", "counts"),
    [
        (TRIVIA_TRAIN, 27, "I-Plot supernatural", (3, 13, 8)),
        (TRIVIA_TEST, 7, "B-Plot  aliens", (2, 7, 6)),
    ],
)
def test_trivia_space_rows_refused_naming_sep_space(
    data_dir: Path, rel: str, line: int, value: str, counts: tuple
) -> None:
    path = data_dir / rel
    assert bio_counts(path) == counts
    with pytest.raises(SourceFormatError) as err:
        list(read(path, ReadReport(), scheme="bio"))
    assert str(err.value) == (
        f"{path}:{line}: expected 2 columns, found 1: this row has no tab, and the file's "
        "rows are cut on tabs; -o sep=space cuts every row on runs of spaces and tabs, which "
        f"reads every row of this file into 2 columns: {value!r}"
    )
    spans = named(path, sep="space", scheme="bio")
    assert (len(spans), sum(map(len, spans)), len({lab for s in spans for _, lab in s})) == counts


def test_trivia_source_with_the_named_option(db: Path, data_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mit-movie-trivia"
    folder.mkdir()
    for rel in (TRIVIA_TRAIN, TRIVIA_TEST):
        shutil.copy(data_dir / rel, folder / Path(rel).name)
    with Store(db) as store, pytest.raises(SourceFormatError, match=re.escape("-o sep=space")):
        ingest(store, "mit-movie-trivia", folder)
    with Store(db) as store:
        res = ingest(store, "mit-movie-trivia", folder, options={"sep": "space"})
    assert {s.split: (s.sentences, s.mentions) for s in res.splits} == {
        "train": bio_counts(data_dir / TRIVIA_TRAIN)[:2],
        "test": bio_counts(data_dir / TRIVIA_TEST)[:2],
    }
    assert (res.sentences, res.mentions) == (5, 20)


def test_space_row_where_sep_space_would_not_read_the_file(tmp_path: Path) -> None:
    """Pile-NER's labels have spaces: cutting on whitespace would break other rows, so the
    refusal says so instead of naming an option that fails."""
    f = write(tmp_path, "mixed.bio", "soil\tB-field of study\nscience\tI-field of study\nx O\n\n")
    with pytest.raises(SourceFormatError) as err:
        list(read(f, ReadReport()))
    assert str(err.value) == (
        f"{f}:3: expected 2 columns, found 1: this row has no tab, and the file's rows are cut "
        "on tabs; -o sep=space would not read the file either (line 1 would have 4 columns): "
        "'x O'"
    )


# ------------------------------------------------------------------ other refusals


@pytest.mark.parametrize(
    ("text", "scheme", "message"),
    [
        (
            "New B-LOC\nYork E-LOC\n\n",
            "bio",
            "tag is not O, B-<type> or I-<type> (-o scheme=bioes reads E- and S- tags): 'E-LOC'",
        ),
        (
            "New B-LOC\nYork I-LOC\n\n",
            "io",
            "tag is not O, I-<type> or a bare type (-o scheme=bio reads B- tags): 'B-LOC'",
        ),
    ],
)
def test_tag_outside_the_scheme_names_the_scheme_that_reads_it(
    tmp_path: Path, text: str, scheme: str, message: str
) -> None:
    f = write(tmp_path, "f.txt", text)
    with pytest.raises(SourceFormatError) as err:
        list(read(f, ReadReport(), columns="token,tag", scheme=scheme))
    line = 2 if scheme == "bio" else 1
    assert str(err.value) == f"{f}:{line}: {message}"
    fixed = "bioes" if scheme == "bio" else "bio"
    assert named(f, columns="token,tag", scheme=fixed) == [[("New York", "LOC")]]
