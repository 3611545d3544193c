"""The NuNER CSV reader: literal parsing, mention matching, CSV layout and exact error messages.

`tests/data/nuner/excerpt.csv` is NuNER's published format filled with real Pile-NER and
CrossNER sentences (see `tests/data/nuner/README.md`).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from helpers import DATA
from hypothesis import given
from hypothesis import strategies as st

from builders.errors import SourceFormatError
from builders.sources import nuner
from builders.sources.base import ReadReport, tokenize_with_offsets
from builders.sources.nuner import LiteralError, parse_list_literal
from builders.store import Store
from builders.store.ingest import ingest

EXCERPT = DATA / "nuner" / "excerpt.csv"


def _read(path: Path) -> tuple[list, ReadReport]:
    report = ReadReport()
    return list(nuner.read(path, report)), report


def _write(tmp_path: Path, text: str | bytes, name: str = "nuner.csv") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _mentions(ex) -> list[tuple[str, int, int, str]]:
    return [(" ".join(ex.tokens[a:b]), a, b, label) for a, b, label in ex.spans]


# ---------------------------------------------------------------- the literal parser
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[]", []),
        ("  [ ]  ", []),
        ("['Apple <> company', \"O'Neil <> person\"]", ["Apple <> company", "O'Neil <> person"]),
        (r"['it\'s \"x\" <> y', 'a\\b <> c']", ['it\'s "x" <> y', "a\\b <> c"]),
        (r"['\x41\u00e9\n <> t']", ["A\u00e9\n <> t"]),
        ("['a', ]", ["a"]),
        ("['a'\n, \"b\"]", ["a", "b"]),
        ("[u'a', 'b' 'c']", ["a", "bc"]),  # unusual but valid: ast.literal_eval
    ],
)
def test_parse_list_literal(text: str, expected: list[str]) -> None:
    assert parse_list_literal(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[",
        "['a'",
        "[1]",
        "['a' + 'b']",
        "__import__('os').system('true')",
        "['a\nb']",
        "[,]",
        "[b'x']",
        "('a',)",
    ],
)
def test_parse_list_literal_rejects(text: str) -> None:
    with pytest.raises(LiteralError):
        parse_list_literal(text)


@given(st.lists(st.text()))
def test_parse_repr_roundtrip(items: list[str]) -> None:
    assert parse_list_literal(repr(items)) == items


@given(st.lists(st.text()))
def test_parse_json_style_roundtrip(items: list[str]) -> None:
    # json.dumps' escapes (\" \\ \n \t \uXXXX for control characters) mean the same in Python;
    # ensure_ascii would write astral characters as surrogate pairs, which Python reads apart.
    assert parse_list_literal(json.dumps(items, ensure_ascii=False)) == items


# ---------------------------------------------------------------- the excerpt
def test_excerpt() -> None:
    examples, report = _read(EXCERPT)
    assert [ex.line for ex in examples] == [2, 3, 4, 5, 6, 7, 8, 9, 11]  # row 8 spans lines 9-10
    assert report.counts == {"mentions_not_found": 1}  # 'Austria' in the last row
    assert sum(len(ex.spans) for ex in examples) == 58
    first, gross, ole, quote, donna, jack, poison, multi, berlin = examples
    assert _mentions(first) == [
        ("Conor", 4, 5, "person"),
        ("Insidiously Mad", 6, 8, "nickname"),
        ("The Dreamer", 9, 11, "title"),
        ("AbnorMALifaux", 12, 13, "organization"),
    ]
    # a mention occurring twice gives two spans
    assert [m for m in _mentions(gross) if m[0] in ("Großlobming", "Murtal")] == [
        ("Großlobming", 0, 1, "location"),
        ("Großlobming", 1, 2, "location"),
        ("Murtal", 9, 10, "district"),
        ("Murtal", 33, 34, "district"),
    ]
    assert [m[1:3] for m in _mentions(ole) if m[0] == "Ole Rasmussen"] == [
        (0, 2),
        (2, 4),
        (8, 10),
        (26, 28),
    ]
    assert quote.tokens[0] == '"' and ("year", 22, 23, "date") in _mentions(quote)
    # apostrophes in a mention: repr's "..." and an escaped '...\'...'
    assert ("Donna D ' Errico", 5, 9, "person") in _mentions(donna)
    assert ("Jack O ' Connell", 10, 14, "person") in _mentions(jack)
    # escaped double quotes inside "..."
    assert ('" A very expensive poison "', 9, 15, "title") in _mentions(poison)
    # a quoted field over two lines
    assert multi.tokens[:3] == ["Rullstorf", "Rullstorf", "is"]
    assert _mentions(multi)[:2] == [
        ("Rullstorf", 0, 1, "municipality"),
        ("Rullstorf", 1, 2, "municipality"),
    ]
    assert ("Berlin", 8, 9, "city") in _mentions(berlin)


def test_tokens_are_gliner_tokens() -> None:
    examples, _ = _read(EXCERPT)
    with EXCERPT.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [ex.tokens for ex in examples] == [tokenize_with_offsets(r["input"])[0] for r in rows]


def test_ingest_excerpt_end_to_end(db: Path) -> None:
    with Store(db) as store:
        result = ingest(store, "nuner", EXCERPT)
    split = result.splits[0]
    assert (split.split, split.sentences, split.mentions) == ("train", 9, 58)
    # row 1 is CrossNER AI's (tests/data/nuner/README.md): its tag `misc` is verbalised, counted
    assert split.report["counts"] == {"mentions_not_found": 1, "labels_verbalised": 1}
    assert split.report["notes"] == ["1 label verbalised by the packaged table: misc -> else"]
    assert result.types == 20


# ---------------------------------------------------------------- matching rules
def test_matching_rules(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "input,output\n"
        "Apple and apple pie; APPLE.,\"['apple <> company', 'Apple <> company', 'apple <> company', "
        "'a <> b <> relation', ' <> nothing', 'apple pie <> food']\"\n",
    )
    (ex,), report = _read(path)
    assert ex.spans == [(0, 1, "company"), (2, 3, "company"), (2, 4, "food"), (5, 6, "company")]
    # 'a <> b' is split on the last ' <> ': mention 'a <> b' is not in the text
    assert report.counts == {"duplicate_items": 2, "empty_mentions": 1, "mentions_not_found": 1}


def test_occurrences_do_not_overlap(tmp_path: Path) -> None:
    path = _write(tmp_path, "input,output\nla la la la,['la la <> sound']\n")
    (ex,), _ = _read(path)
    assert ex.spans == [(0, 2, "sound"), (2, 4, "sound")]


def test_extra_columns_crlf_and_bom(tmp_path: Path) -> None:
    path = _write(tmp_path, b"\xef\xbb\xbfid,output,input\r\n7,['Paris <> city'],Paris is big.\r\n")
    (ex,), _ = _read(path)
    assert (ex.tokens, ex.spans, ex.line) == (["Paris", "is", "big", "."], [(0, 1, "city")], 2)


def test_gzip(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "nuner.csv.gz"
    path.write_bytes(gzip.compress(EXCERPT.read_bytes()))
    assert len(_read(path)[0]) == 9


# ---------------------------------------------------------------- bad input, exact messages
def _error(path: Path) -> str:
    with pytest.raises(SourceFormatError) as err:
        _read(path)
    return str(err.value)


def test_unparseable_literal(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "input,output\nParis is big.,['Paris <> city']\nRome too.,\"['Rome <> city'\"\n"
    )
    assert _error(path) == f"{path}:3: unparseable output literal: \"['Rome <> city'\""


def test_item_without_separator(tmp_path: Path) -> None:
    path = _write(tmp_path, 'input,output\n"A\nB",[]\nParis is big.,"[\'Paris - city\']"\n')
    assert _error(path) == (
        f"{path}:4: output item without ' <> ' (expected '<mention> <> <type>'): 'Paris - city'"
    )


def test_empty_type(tmp_path: Path) -> None:
    path = _write(tmp_path, "input,output\nParis is big.,\"['Paris <> ']\"\n")
    assert _error(path) == f"{path}:2: output item with an empty type: 'Paris <> '"


def test_missing_column(tmp_path: Path) -> None:
    path = _write(tmp_path, "text,output\nParis is big.,['Paris <> city']\n")
    assert _error(path) == (
        f"{path}:1: missing column input (found: text, output; expected a header row 'input,output')"
    )
    path = _write(tmp_path, "sentence\nParis is big.\n")
    assert _error(path) == (
        f"{path}:1: missing columns input, output (found: sentence; expected a header row "
        "'input,output')"
    )


def test_a_json_list_read_as_csv_is_named_in_a_short_message(tmp_path: Path) -> None:
    """The shared data's `nuner/top_tag_names.json` (924 type names, no text) read as NuNER:
    the message names a few of its fields and says the file is no CSV file."""
    path = tmp_path / "top_tag_names.json"
    path.write_text(json.dumps([f"type {i}" for i in range(924)]), encoding="utf-8")
    message = _error(path)
    assert message.startswith(f'{path}:1: missing columns input, output (found: ["type 0", ')
    assert message.endswith(
        "and 916 more; expected a header row 'input,output'; top_tag_names.json is not a .csv file)"
    )
    assert len(message) < 300 + len(str(path))


def test_empty_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "")
    assert _error(path) == f"{path}: empty file: expected a header row 'input,output'"


def test_header_only_is_empty_input(tmp_path: Path, db: Path) -> None:
    path = _write(tmp_path, "input,output\n")
    with Store(db) as store, pytest.raises(SourceFormatError) as err:
        ingest(store, "nuner", path)
    assert str(err.value) == f"{path}: empty input: no sentences found"


def test_wrong_field_count(tmp_path: Path) -> None:
    path = _write(tmp_path, "input,output\nParis is big.,['Paris <> city'],x\n")
    assert _error(path) == (
        f"{path}:2: expected 2 fields, found 3: ['Paris is big.', \"['Paris <> city']\", 'x']"
    )


def test_unclosed_quote_is_a_csv_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "input,output\n\"Paris is big.,['Paris <> city']\n")
    assert _error(path) == f"{path}:2: bad CSV: unexpected end of data"


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    body = "input,output\n" + "Paris is big.,['Paris <> city']\n" * 3
    path = _write(tmp_path, body.encode() + b"Caf\xe9 au lait.,[]\n")
    assert _error(path) == f"{path}:5: not UTF-8 (byte e9 at column 4): b'\\xe9'"


# ---------------------------------------------------------------- the helper process
def test_helper_process_gives_the_same_examples() -> None:
    serial, report0 = _read(EXCERPT)
    report1 = ReadReport()
    helper = list(nuner.read(EXCERPT, report1, workers=1))
    assert [(e.tokens, e.spans, e.line) for e in helper] == [
        (e.tokens, e.spans, e.line) for e in serial
    ]
    assert report1.counts == report0.counts


def test_helper_process_errors_are_exact(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "input,output\nParis is big.,['Paris <> city']\nRome too.,\"['Rome'\"\n"
    )
    with pytest.raises(SourceFormatError) as err:
        list(nuner.read(path, ReadReport(), workers=1))
    assert str(err.value) == f"{path}:3: unparseable output literal: \"['Rome'\""
    path = _write(tmp_path, b"input,output\nCaf\xe9,[]\n", "latin1.csv")
    with pytest.raises(SourceFormatError) as err:
        list(nuner.read(path, ReadReport(), workers=1))
    assert str(err.value) == f"{path}:2: not UTF-8 (byte e9 at column 4): b'\\xe9'"


def test_helper_process_stops_when_the_reader_does() -> None:
    examples = nuner.read(EXCERPT, ReadReport(), workers=1)
    assert next(examples).line == 2
    examples.close()  # kills and reaps the helper; must not hang
