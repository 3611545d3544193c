"""Column layouts from evidence: label first or token first, refused when ambiguous, and an IO
reading of words refused (the MIT Movie / Restaurant misreads of issue 9)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from builders.errors import SourceFormatError
from builders.sources.base import ReadReport
from builders.sources.columns import read
from builders.store import Store
from builders.store.ingest import ingest

REST = "mit-restaurant/restauranttrain-head.bio"
REST_TOKEN_FIRST = "mit-restaurant/restauranttrain-head.token-first.bio"
TRIVIA = "mit-movie-trivia/trivia10k13train.excerpt.bio"

# the 5 sentences of the MIT Restaurant excerpt, as (text, label) per sentence
REST_SPANS = [
    [("2 start", "Rating"), ("inside dining", "Amenity")],
    [],
    [("5 star", "Rating"), ("in my town", "Location")],
    [("hong kong", "Restaurant_Name"), ("reasonable", "Price")],
    [("open till 2 a m", "Hours"), ("passims kitchen", "Restaurant_Name")],
]


def named(path: Path, **opts) -> tuple[list, ReadReport]:
    report = ReadReport()
    exs = list(read(path, report, **opts))
    return [[(" ".join(e.tokens[a:b]), lab) for a, b, lab in e.spans] for e in exs], report


@pytest.mark.parametrize(("rel", "layout"), [(REST, "tag,token"), (REST_TOKEN_FIRST, "token,tag")])
def test_both_layouts_of_mit_restaurant(data_dir: Path, rel: str, layout: str) -> None:
    spans, report = named(data_dir / rel)
    assert spans == REST_SPANS
    col = 1 if layout == "tag,token" else 2
    assert report.notes == [
        f"{Path(rel).name}: columns detected as {layout} (column {col} holds the tags)",
        f"{Path(rel).name}: tag scheme detected as BIO",
    ]


@pytest.mark.parametrize("rel", [REST, REST_TOKEN_FIRST])
def test_registered_source_reads_both_layouts(db: Path, data_dir: Path, rel: str) -> None:
    with Store(db) as store:
        res = ingest(store, "mit-restaurant", data_dir / rel)
    assert [(s.split, s.sentences, s.mentions, s.types) for s in res.splits] == [("train", 5, 8, 6)]


def test_trivia_label_first(db: Path, data_dir: Path) -> None:
    """The issue's trivia10k13 case: `B-Actor<TAB>steve` through the generic source."""
    with Store(db) as store:
        res = ingest(store, "columns", data_dir / TRIVIA, name="t")
        labels = [r[0] for r in store.label_counts("t")]
    assert (res.sentences, res.mentions, res.types) == (3, 9, 6)
    assert labels == ["plot", "actor", "character name", "director", "opinion", "year"]
    assert res.splits[0].report["notes"][0] == (
        "trivia10k13train.excerpt.bio: columns detected as tag,token (column 1 holds the tags)"
    )


def test_trivia_source(db: Path, data_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "mit-movie-trivia"
    folder.mkdir()
    shutil.copy(data_dir / TRIVIA, folder / "trivia10k13train.bio")
    with Store(db) as store:
        res = ingest(store, "mit-movie-trivia", folder)
    assert [(s.split, s.sentences, s.mentions, s.types) for s in res.splits] == [("train", 3, 9, 6)]


def test_label_first_read_token_first_is_refused(data_dir: Path) -> None:
    """The old default layout on a label-first file: words would become IO types."""
    path = data_dir / TRIVIA
    with pytest.raises(SourceFormatError) as err:
        list(read(path, ReadReport(), columns="token,tag"))
    assert str(err.value) == (
        f"{path}: column 2 read as IO tags looks like words: the token column holds only tags; "
        "its most frequent value is 'a' (4 rows). Say which column holds the tags with "
        "--columns (e.g. --columns tag,token), or pass -o scheme=io if these really are IO types"
    )
    # asked for explicitly, IO is what the user gets
    exs = list(read(path, ReadReport(), columns="token,tag", scheme="io"))
    assert exs[0].spans[0] == (0, 1, "steve")


def test_io_types_more_varied_than_tokens_are_refused(tmp_path: Path) -> None:
    f = tmp_path / "swapped.txt"
    f.write_text("O\tParis\nO\tis\nX\tbig\nO\tand\nO\told\n\n", encoding="utf-8")
    with pytest.raises(SourceFormatError) as err:
        list(read(f, ReadReport(), columns="token,tag"))
    assert "it has more distinct values (5) than the token column (2)" in str(err.value)


def test_conll_layout_is_ambiguous_without_columns(data_dir: Path) -> None:
    """CoNLL's chunk and NER columns both hold tags: refuse, naming --columns."""
    path = data_dir / "conll2003/valid.txt"
    with pytest.raises(SourceFormatError) as err:
        list(read(path, ReadReport()))
    assert str(err.value) == (
        f"{path}: cannot tell which column holds the tags: columns 3 and 4 all hold tags; "
        "say it with --columns token,skip,skip,tag"
    )


def test_two_columns_without_tags_are_ambiguous(tmp_path: Path) -> None:
    f = tmp_path / "words.txt"
    f.write_text("the cat\nsat on\n\n", encoding="utf-8")
    with pytest.raises(
        SourceFormatError,
        match=re.escape(
            f"{f}: cannot tell which column holds the tags: no column holds only tags (most "
            "frequent values: 'the', 'cat'); say it with --columns token,tag or --columns tag,token"
        ),
    ):
        list(read(f, ReadReport()))


def test_columns_option_must_match_the_rows(data_dir: Path) -> None:
    path = data_dir / "crossner/ai-test.txt"
    with pytest.raises(SourceFormatError) as err:
        list(read(path, ReadReport(), columns="token,pos,tag"))
    assert str(err.value) == (
        f"{path}: --columns names 3 columns (token,pos,tag) but the rows have 2"
    )


def test_tab_then_spaces_puts_no_spaces_into_tokens(tmp_path: Path) -> None:
    f = tmp_path / "padded.bio"
    f.write_text("B-Actor\t steve \nI-Actor\t  mcqueen\nO\tfilms\n\n", encoding="utf-8")
    (ex,) = read(f, ReadReport(), scheme="bio")
    assert ex.tokens == ["steve", "mcqueen", "films"]
    assert ex.spans == [(0, 2, "Actor")]


def test_tab_file_keeps_spaces_inside_labels(data_dir: Path) -> None:
    """Tabs decide the split for the whole file: Pile-NER's labels have spaces."""
    spans, _ = named(
        data_dir / "pilener-bio/pilener-391xALL-dev.excerpt.bio", scheme="bio", repair=True
    )
    assert "field of study" in {lab for sent in spans for _, lab in sent}


def test_crlf_and_bom(data_dir: Path, tmp_path: Path) -> None:
    raw = (data_dir / REST).read_bytes()
    f = tmp_path / "restauranttrain.bio"
    f.write_bytes(b"\xef\xbb\xbf" + raw.replace(b"\n", b"\r\n"))
    spans, _ = named(f)
    assert spans == REST_SPANS
