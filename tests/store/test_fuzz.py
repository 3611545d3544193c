"""Malformed variants of every format through `ingest`: each is refused with a `BuildersError`
naming the file and leaves every table's checksum as it was, or it is read and its counts
match a count made here, independently of the readers.

Variants come from a seeded generator (the same ones on every run): truncations at random
bytes, bad bytes, swapped columns or keys, changed offsets, dropped and doubled lines.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from builders.errors import BuildersError
from builders.store import Store
from builders.store.ingest import ingest

VARIANTS = 14  # per format
SEED = 9


# ---------------------------------------------------------------- independent counts
def column_rows(text: str) -> list[list[list[str]]]:
    """Sentences as rows of cells: blank lines end a sentence, -DOCSTART- lines are skipped;
    cells are cut on tabs when the first row has one (and stripped), else on whitespace."""
    sentences: list[list[list[str]]] = [[]]
    tab = None
    for line in text.removeprefix("\ufeff").splitlines():
        if not line.strip():
            sentences.append([])
            continue
        if line.startswith("-DOCSTART-"):
            continue
        if tab is None:
            tab = "\t" in line
        sentences[-1].append([c.strip() for c in line.split("\t")] if tab else line.split())
    return [s for s in sentences if s]


def is_tag(v: str) -> bool:
    return v == "O" or (len(v) > 2 and v[1] == "-" and v[0] in "BIES")


def count_columns(text: str, tag: int | None, mode: str) -> tuple[int, int]:
    """(sentences, mentions): BIO counts B- tags, `repair` also I-x that opens an entity, IO
    counts runs of one type. `tag` None: the column whose values are all tags."""
    sents = column_rows(text)
    if tag is None:
        width = len(sents[0][0])
        tag = next(i for i in range(width) if all(is_tag(r[i]) for s in sents for r in s))
    mentions = 0
    for s in sents:
        prev = "O"
        for row in s:
            t = row[tag]
            if mode == "io":
                mentions += t != "O" and t != prev
            elif t.startswith("B-") or (
                mode == "repair" and t.startswith("I-") and prev[2:] != t[2:]
            ):
                mentions += 1
            prev = t
    return len(sents), mentions


def count_gliner(text: str) -> tuple[int, int]:
    records = json.loads(text.removeprefix("\ufeff"))
    if records and "tokenized_text" in records[0]:
        return len(records), sum(len({tuple(x) for x in r["ner"]}) for r in records)
    return len(records), -1  # benchmark: mentions depend on tokenisation; sentences only


def count_pilener(text: str) -> tuple[int, int]:
    groups, last, types = 0, None, set()
    for r in json.loads(text.removeprefix("\ufeff")):
        turns = r["conversations"]
        asked = {turns[i]["value"] for i in range(2, len(turns), 2)}
        if turns[0]["value"] != last or asked & types:
            groups, last, types = groups + 1, turns[0]["value"], set()
        types |= asked
    return groups, -1


def count_nuner(text: str) -> tuple[int, int]:
    rows = list(csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline="")))
    return sum(1 for r in rows[1:] if r), -1


# ---------------------------------------------------------------- mutations
def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(1, len(data))]


def bad_byte(data: bytes, rng: random.Random) -> bytes:
    i = rng.randrange(len(data))
    return data[:i] + rng.choice([b"\xff", b"\xc3", b"\xe2\x82", b"\x80"]) + data[i:]


def swap_columns(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    picked = set(rng.sample(range(len(lines)), max(1, len(lines) // rng.choice([1, 3, 10]))))
    return b"\n".join(
        b"\t".join(reversed(line.split(b"\t"))) if i in picked else line
        for i, line in enumerate(lines)
    )


def drop_or_double_line(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    i = rng.randrange(len(lines))
    lines[i : i + 1] = [] if rng.random() < 0.5 else [lines[i], lines[i]]
    return b"\n".join(lines)


def bad_offset(data: bytes, rng: random.Random) -> bytes:
    numbers = list(re.finditer(rb"-?\d+", data))
    m = rng.choice(numbers)
    new = str(rng.choice([-1, 0, 1, 2, 7, 19, 40, 200, int(m.group()) + 1])).encode()
    return data[: m.start()] + new + data[m.end() :]


def swap_keys(data: bytes, rng: random.Random) -> bytes:
    keys = sorted(set(re.findall(rb'"([a-z_]+)":', data)))
    a, b = rng.sample(keys, 2)
    return (
        data.replace(b'"' + a + b'":', b"\0")
        .replace(b'"' + b + b'":', b'"' + a + b'":')
        .replace(b"\0", b'"' + b + b'":')
    )


COLUMN_MUTATIONS = [truncate, bad_byte, swap_columns, drop_or_double_line]
JSON_MUTATIONS = [truncate, bad_byte, bad_offset, swap_keys, drop_or_double_line]
CSV_MUTATIONS = [truncate, bad_byte, drop_or_double_line, swap_columns]

Counter = Callable[[str], tuple[int, int]]
# (source, excerpt, file name, mutations, independent count)
FORMATS: list[tuple[str, str, str, list, Counter]] = [
    ("crossner-ai", "crossner/ai-test.txt", "test.txt", COLUMN_MUTATIONS,
     lambda t: count_columns(t, 1, "bio")),
    ("mit-restaurant", "mit-restaurant/restauranttrain-head.bio", "restauranttrain.bio",
     COLUMN_MUTATIONS, lambda t: count_columns(t, None, "bio")),
    ("conll2003", "conll2003/valid.txt", "valid.txt", COLUMN_MUTATIONS,
     lambda t: count_columns(t, 3, "bio")),
    ("pilener-sample", "pilener-bio/pilener-391xALL-dev.excerpt.bio", "pilener-391xALL-dev.bio",
     COLUMN_MUTATIONS, lambda t: count_columns(t, 1, "repair")),
    ("fewnerd", "fewnerd/dev.txt", "dev.txt", COLUMN_MUTATIONS,
     lambda t: count_columns(t, 1, "io")),
    ("gliner", "gliner/negative-ner.json", "train.json", JSON_MUTATIONS, count_gliner),
    ("gliner", "gliner/CrossNER_AI-test-excerpt.json", "test.json", JSON_MUTATIONS, count_gliner),
    ("pilener", "pilener/CrossNER_AI-excerpt.json", "CrossNER_AI.json", JSON_MUTATIONS,
     count_pilener),
    ("nuner", "nuner/excerpt.csv", "train.csv", CSV_MUTATIONS, count_nuner),
]  # fmt: skip


@pytest.mark.parametrize(
    ("source", "rel", "name", "mutations", "count"),
    FORMATS,
    ids=[f"{f[0]}:{Path(f[1]).name}" for f in FORMATS],
)
def test_malformed_variants(
    tmp_path: Path,
    data_dir: Path,
    source: str,
    rel: str,
    name: str,
    mutations: list,
    count: Counter,
) -> None:
    rng = random.Random(f"{SEED}:{rel}")
    raw = (data_dir / rel).read_bytes()
    outcomes = {"refused": 0, "read": 0}
    with Store(tmp_path / "s.duckdb") as store:
        ingest(store, source, _write(tmp_path / "base", name, raw), name="base")
        for i in range(VARIANTS):
            mutate = mutations[i % len(mutations)]
            data = mutate(raw, rng)
            f = _write(tmp_path / f"v{i}", name, data)
            before = store.checksums()
            try:
                res = ingest(store, source, f, name="variant", replace=True)
            except BuildersError as exc:
                assert str(f) in str(exc), (mutate.__name__, str(exc))
                assert store.checksums() == before, mutate.__name__
                outcomes["refused"] += 1
                continue
            sentences, mentions = count(data.decode("utf-8"))
            assert res.sentences == sentences, (mutate.__name__, data)
            if mentions >= 0:
                assert res.mentions == mentions, (mutate.__name__, data)
            outcomes["read"] += 1
    assert outcomes["refused"] > 0  # the generator does produce malformed input


def _write(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir()
    (folder / name).write_bytes(data)
    return folder / name


def test_malformed_hf_json_lines(tmp_path: Path, data_dir: Path) -> None:
    """The `hf` reader's local data files: refused naming the folder, or read right."""
    rows = [
        {"tokens": [r[0] for r in s], "ner_tags": [r[1] for r in s]}
        for s in column_rows((data_dir / "crossner/ai-test.txt").read_text(encoding="utf-8"))
    ]
    raw = "".join(json.dumps(r) + "\n" for r in rows).encode()
    rng = random.Random(f"{SEED}:hf")
    refused = 0
    with Store(tmp_path / "s.duckdb") as store:
        for i, mutate in enumerate([truncate, bad_byte, swap_keys, drop_or_double_line] * 2):
            data = mutate(raw, rng)
            folder = _write(tmp_path / f"v{i}", "train.jsonl", data).parent
            before = store.checksums()
            try:
                res = ingest(store, "hf", str(folder), name="variant", replace=True)
            except BuildersError as exc:
                assert str(folder) in str(exc), (mutate.__name__, str(exc))
                assert store.checksums() == before
                refused += 1
                continue
            lines = [json.loads(x) for x in data.decode().splitlines() if x.strip()]
            assert res.sentences == len(lines)
            assert res.mentions == sum(t.startswith("B-") for x in lines for t in x["ner_tags"])
    assert refused > 0
