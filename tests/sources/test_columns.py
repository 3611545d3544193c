"""Column files (BIO / IO / BIOES): real excerpts, strict errors, and span round trips."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders.errors import SourceFormatError
from builders.sources.base import ReadReport
from builders.sources.columns import read


def spans_of(path: Path, **opts) -> list[list[tuple[int, int, str]]]:
    return [ex.spans for ex in read(path, ReadReport(), **opts)]


def test_crossner_token_first(data_dir: Path) -> None:
    exs = list(
        read(data_dir / "crossner/ai-test.txt", ReadReport(), columns="token,tag", scheme="bio")
    )
    assert len(exs) == 3
    first = exs[0]
    assert first.tokens[:4] == ["Typical", "generative", "model", "approaches"]
    names = [(" ".join(first.tokens[a:b]), lab) for a, b, lab in first.spans]
    assert names == [
        ("naive Bayes classifier", "algorithm"),
        ("Gaussian mixture model", "algorithm"),
        ("variational autoencoders", "algorithm"),
    ]
    assert first.line == 1


def test_mit_label_first(data_dir: Path) -> None:
    report = ReadReport()
    exs = list(read(data_dir / "mit-movie/engtest.bio", report, scheme="bio"))
    assert report.notes == ["engtest.bio: columns detected as tag,token (column 1 holds the tags)"]
    assert exs[0].tokens == [
        "are",
        "there",
        "any",
        "good",
        "romantic",
        "comedies",
        "out",
        "right",
        "now",
    ]
    assert exs[0].spans == [(4, 6, "GENRE"), (7, 9, "YEAR")]
    assert exs[1].spans == [(5, 8, "PLOT")]
    assert exs[1].line == 11


def test_conll_four_columns_and_docstart(data_dir: Path) -> None:
    report = ReadReport()
    exs = list(read(data_dir / "conll2003/valid.txt", report, columns="token,pos,chunk,tag"))
    assert all(ex.tokens[0] != "-DOCSTART-" for ex in exs)
    assert exs[0].tokens == [
        "CRICKET",
        "-",
        "LEICESTERSHIRE",
        "TAKE",
        "OVER",
        "AT",
        "TOP",
        "AFTER",
        "INNINGS",
        "VICTORY",
        ".",
    ]
    assert exs[0].spans == [(2, 3, "ORG")]
    # 85 token rows: the POS and chunk columns are named in the report, not dropped silently
    assert report.counts == {"columns_not_read": 170}
    assert report.notes == [
        "valid.txt: tag scheme detected as BIO",
        "valid.txt: columns not read: chunk (85), pos (85)",
    ]


def test_pilener_lax_tag_is_an_error_without_repair(data_dir: Path) -> None:
    path = data_dir / "pilener-bio/pilener-391xALL-dev.excerpt.bio"
    with pytest.raises(SourceFormatError) as err:
        list(read(path, ReadReport(), sep="\t", scheme="bio"))
    assert str(err.value) == (
        f"{path}:17: I- tag after an entity of type 'characteristic' "
        "(expected B-symptom; use repair to read it as B-, with --repair or -o repair=true): 'I-symptom'"
    )


def test_pilener_repair_counts_rows(data_dir: Path) -> None:
    path = data_dir / "pilener-bio/pilener-391xALL-dev.excerpt.bio"
    report = ReadReport()
    exs = list(read(path, report, sep="\t", scheme="bio", repair=True))
    assert report.counts["repaired_tags"] == 1
    spans = {(" ".join(exs[0].tokens[a:b]), lab) for a, b, lab in exs[0].spans}
    assert ("refractory", "characteristic") in spans
    assert ("symptoms", "symptom") in spans  # the repaired I- opens its own entity
    assert "field of study" in {lab for _, lab in spans}


def test_auto_scheme_detects_io(tmp_path: Path) -> None:
    f = tmp_path / "io.txt"
    f.write_text("Paris\tlocation-GPE\nLyon\tlocation-GPE\nis\tO\nnice\tO\n\n", encoding="utf-8")
    report = ReadReport()
    (ex,) = read(f, report, columns="token,tag")
    # IO cannot separate two adjacent entities of one type: they merge.
    assert ex.spans == [(0, 2, "location-GPE")]
    assert report.notes == ["io.txt: tag scheme detected as IO"]


def test_auto_layout_and_scheme_on_real_io(data_dir: Path) -> None:
    """Few-NERD's IO file has bare types and no B-: the tag column is the one where O is the
    most frequent value."""
    report = ReadReport()
    exs = list(read(data_dir / "fewnerd/dev.txt", report))
    assert report.notes == [
        "dev.txt: columns detected as token,tag (column 2 holds the tags)",
        "dev.txt: tag scheme detected as IO",
    ]
    assert (len(exs), sum(len(e.spans) for e in exs)) == (5, 5)


def test_bioes(tmp_path: Path) -> None:
    f = tmp_path / "bioes.txt"
    f.write_text("New B-LOC\nYork E-LOC\nand O\nParis S-LOC\n\n", encoding="utf-8")
    (ex,) = read(f, ReadReport())
    assert ex.spans == [(0, 2, "LOC"), (3, 4, "LOC")]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "EU B-ORG\nrejects O extra\n\n",
            "{p}:2: expected 2 columns (--columns token,tag), found 3: 'rejects O extra'",
        ),
        ("EU X-ORG\n\n", "{p}:1: tag is not O, B-<type> or I-<type>: 'X-ORG'"),
        (
            "EU B-ORG\nGerman I-MISC\n\n",
            "{p}:2: I- tag after an entity of type 'ORG' (expected B-MISC; use repair to read it as B-, with --repair or -o repair=true): 'I-MISC'",
        ),
        (
            "EU O\nGerman I-MISC\n\n",
            "{p}:2: I- tag after O (expected B-MISC; use repair to read it as B-, with --repair or -o repair=true): 'I-MISC'",
        ),
    ],
)
def test_bad_rows(tmp_path: Path, content: str, message: str) -> None:
    f = tmp_path / "bad.txt"
    f.write_text(content, encoding="utf-8")
    with pytest.raises(SourceFormatError, match=re.escape(message.format(p=f))):
        list(read(f, ReadReport(), columns="token,tag", scheme="bio"))


def test_bioes_unclosed(tmp_path: Path) -> None:
    f = tmp_path / "bad.txt"
    f.write_text("New B-LOC\nYork O\n\n", encoding="utf-8")
    with pytest.raises(
        SourceFormatError,
        match=re.escape(f"{f}:2: BIOES entity 'LOC' not closed by E- before O: 'O'"),
    ):
        list(read(f, ReadReport(), columns="token,tag", scheme="bioes"))


def test_non_utf8_byte(tmp_path: Path) -> None:
    f = tmp_path / "latin1.txt"
    f.write_bytes(b"EU B-ORG\n" + "Caf\xe9 O\n".encode("latin-1"))
    with pytest.raises(
        SourceFormatError, match=re.escape(f"{f}:2: not UTF-8 (byte e9 at column 4): b'\\xe9'")
    ):
        list(read(f, ReadReport(), scheme="bio"))


def test_one_column(tmp_path: Path) -> None:
    f = tmp_path / "bad.txt"
    f.write_text("\nEU\n\n", encoding="utf-8")
    with pytest.raises(
        SourceFormatError,
        match=re.escape(
            f"{f}:2: expected at least 2 columns (token and tag), cut by tabs or spaces; "
            "-o sep=CHAR reads columns cut by another character: 'EU'"
        ),
    ):
        list(read(f, ReadReport()))


# ---------------------------------------------------------------- property tests
LABELS = st.sampled_from(["PER", "LOC", "field of study", "person-artist/author"])


@st.composite
def sentences(draw: st.DrawFn) -> tuple[int, list[tuple[int, int, str]]]:
    n = draw(st.integers(1, 25))
    spans: list[tuple[int, int, str]] = []
    i = 0
    while i < n:
        if draw(st.booleans()):
            length = draw(st.integers(1, min(4, n - i)))
            spans.append((i, i + length, draw(LABELS)))
            i += length
        else:
            i += 1
    return n, spans


def encode(n: int, spans: list[tuple[int, int, str]], scheme: str) -> list[str]:
    tags = ["O"] * n
    for a, b, lab in spans:
        for i in range(a, b):
            if scheme == "bio":
                tags[i] = ("B-" if i == a else "I-") + lab
            elif scheme == "bioes":
                tags[i] = (
                    "S-" if b - a == 1 else "B-" if i == a else "E-" if i == b - 1 else "I-"
                ) + lab
            else:
                tags[i] = lab
    return tags


@pytest.mark.parametrize("scheme", ["bio", "bioes"])
@settings(max_examples=150, deadline=None)
@given(case=sentences())
def test_decode_encode_round_trip(
    tmp_path_factory: pytest.TempPathFactory, scheme: str, case
) -> None:
    n, spans = case
    tags = encode(n, spans, scheme)
    f = tmp_path_factory.mktemp("rt") / "f.txt"
    f.write_text("".join(f"t{i}\t{t}\n" for i, t in enumerate(tags)) + "\n", encoding="utf-8")
    (ex,) = read(f, ReadReport(), columns="token,tag", scheme=scheme, sep="\t")
    assert ex.spans == spans
    assert all(0 <= a < b <= n for a, b, _ in ex.spans)


@settings(max_examples=150, deadline=None)
@given(case=sentences())
def test_io_round_trip_merges_neighbours(tmp_path_factory: pytest.TempPathFactory, case) -> None:
    n, spans = case
    f = tmp_path_factory.mktemp("io") / "f.txt"
    f.write_text(
        "".join(f"t{i}\t{t}\n" for i, t in enumerate(encode(n, spans, "io"))) + "\n",
        encoding="utf-8",
    )
    (ex,) = read(f, ReadReport(), columns="token,tag", scheme="io", sep="\t")
    merged: list[tuple[int, int, str]] = []
    for a, b, lab in spans:
        if merged and merged[-1][1] == a and merged[-1][2] == lab:
            merged[-1] = (merged[-1][0], b, lab)
        else:
            merged.append((a, b, lab))
    assert ex.spans == merged
