"""A UTF-8 byte-order mark at the start, and CRLF line ends, read like plain UTF-8 in every text
format: the same sentences, mentions and tokens, and no BOM inside the first token."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from builders.store import Store
from builders.store.ingest import ingest

BOM = b"\xef\xbb\xbf"

# (source, excerpt in tests/data, file name to give it, split it lands in)
FORMATS = [
    ("crossner-ai", "crossner/ai-test.txt", "test.txt"),
    ("mit-movie", "mit-movie/engtest.bio", "engtest.bio"),
    ("columns", "mit-movie-trivia/trivia10k13train.excerpt.bio", "trivia10k13train.bio"),
    ("conll2003", "conll2003/valid.txt", "valid.txt"),
    ("pilener", "pilener-bio/pilener-391xALL-dev.excerpt.bio", "pilener-391xALL-dev.bio"),
    ("pilener", "pilener/CrossNER_AI-excerpt.json", "CrossNER_AI.json"),
    ("gliner", "gliner/CrossNER_AI-test-excerpt.json", "test.json"),
    ("gliner", "gliner/negative-ner.json", "train.json"),
    ("nuner", "nuner/excerpt.csv", "nuner.csv"),
    ("fewnerd", "fewnerd/dev.txt", "dev.txt"),
]


def stored(db: Path, source: str, path: Path) -> tuple:
    with Store(db) as store:
        res = ingest(store, source, path, name="x", replace=True)
        first = store.con.execute(
            "SELECT tokens[1] FROM sentences WHERE source = 'x' ORDER BY split, idx LIMIT 1"
        ).fetchone()[0]
        rows = store.con.execute(
            "SELECT split, idx, tokens FROM sentences WHERE source = 'x' ORDER BY ALL"
        ).fetchall()
    return (res.sentences, res.mentions, res.negatives, res.negative_spans), first, rows


@pytest.mark.parametrize(
    ("source", "rel", "name"), FORMATS, ids=[f"{s}:{Path(r).name}" for s, r, _ in FORMATS]
)
def test_bom_and_crlf(tmp_path: Path, data_dir: Path, source: str, rel: str, name: str) -> None:
    raw = (data_dir / rel).read_bytes()
    plain = tmp_path / "plain" / name
    plain.parent.mkdir()
    plain.write_bytes(raw)
    want, first, rows = stored(tmp_path / "a.duckdb", source, plain)
    assert want[0] > 0
    for variant, data in [
        ("bom", BOM + raw),
        ("crlf", raw.replace(b"\n", b"\r\n")),
        ("both", BOM + raw.replace(b"\n", b"\r\n")),
    ]:
        f = tmp_path / variant / name
        f.parent.mkdir()
        f.write_bytes(data)
        got, got_first, got_rows = stored(tmp_path / f"{variant}.duckdb", source, f)
        assert (got, got_first, got_rows) == (want, first, rows), variant
        assert not got_first.startswith("\ufeff")


def test_bom_in_a_compressed_column_file(tmp_path: Path, data_dir: Path) -> None:
    f = tmp_path / "test.txt.gz"
    f.write_bytes(gzip.compress(BOM + (data_dir / "crossner/ai-test.txt").read_bytes()))
    with Store(tmp_path / "s.duckdb") as store:
        res = ingest(store, "crossner-ai", f)
        first = store.con.execute("SELECT tokens[1] FROM sentences ORDER BY idx").fetchone()[0]
    assert (res.sentences, res.mentions, first) == (3, 8, "Typical")


def test_bom_in_a_label_first_file_whose_first_line_is_a_tag(
    tmp_path: Path, data_dir: Path
) -> None:
    """The issue's case: the BOM would make the first tag `\\ufeffO`, not a tag."""
    f = tmp_path / "engtest.bio"
    f.write_bytes(BOM + (data_dir / "mit-movie/engtest.bio").read_bytes())
    with Store(tmp_path / "s.duckdb") as store:
        res = ingest(store, "columns", f)
    assert (res.sentences, res.mentions, res.types) == (3, 5, 5)


def test_bom_in_hf_json_lines(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "train.jsonl").write_bytes(
        BOM
        + b'{"tokens": ["Ada", "met", "Alan"], "ner_tags": ["B-person", "O", "B-person"]}\n'
        + b'{"tokens": ["x"], "ner_tags": ["O"]}\n'
    )
    with Store(tmp_path / "s.duckdb") as store:
        res = ingest(store, "hf", str(folder))
    assert (res.sentences, res.mentions, res.types) == (2, 2, 1)
