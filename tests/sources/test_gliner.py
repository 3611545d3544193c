"""GLiNER json: training (token spans, inclusive end) and benchmark (character spans) shapes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import assert_failed_ingest_keeps_store, stored_rows

from builders.errors import SourceFormatError
from builders.store import Store
from builders.store.ingest import ingest

BENCH = "gliner/CrossNER_AI-test-excerpt.json"
TRAIN = "gliner/train-shaped.json"


def write(tmp_path: Path, records: object, name: str = "test.json") -> Path:
    f = tmp_path / name
    f.write_text("[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n", encoding="utf-8")
    return f


def read_one(
    db: Path, tmp_path: Path, sentence: str, entities: list[dict]
) -> tuple[dict[str, int], list[str], list[tuple]]:
    """Ingest one GLiNER benchmark record: its report counts, tokens and (start, stop, label)s."""
    f = write(tmp_path, [{"sentence": sentence, "entities": entities}])
    with Store(db) as store:
        res = ingest(store, "gliner", f)
        sentences, mentions, _ = stored_rows(store, "gliner")
    return res.splits[0].report["counts"], sentences[0][1], [m[1:] for m in mentions]


def test_benchmark_json(db: Path, data_dir: Path) -> None:
    with Store(db) as store:
        res = ingest(store, "gliner", data_dir / BENCH)
        assert (res.sentences, res.mentions, res.negatives, res.types) == (10, 44, 0, 7)
        assert res.splits[0].report == {
            "counts": {},
            "notes": ["CrossNER_AI-test-excerpt.json: GLiNER benchmark json"],
        }
        sentences, mentions, _ = stored_rows(store, "gliner")
    assert sentences[0][1][5:8] == ["naive", "Bayes", "classifier"]
    assert [m[1:] for m in mentions if m[0] == 0] == [
        (5, 8, "algorithm"),
        (10, 13, "algorithm"),
        (15, 17, "algorithm"),
    ]
    # "e.g." is one token, as in GLiNER's evaluation (`sentence.split()`) and in the BIO file
    # the sentence came from; "gradient descent" is annotated once, at its first occurrence
    assert sentences[7][1][12:14] == ["(", "e.g."]
    assert [m[1:] for m in mentions if m[0] == 7] == [
        (15, 17, "algorithm"),
        (19, 22, "algorithm"),
        (31, 33, "field"),
        (42, 44, "algorithm"),
        (45, 48, "algorithm"),
    ]


def test_training_json_matches_the_benchmark_it_was_built_from(db: Path, data_dir: Path) -> None:
    with Store(db) as store:
        ingest(store, "gliner", data_dir / BENCH, name="bench")
        res = ingest(store, "gliner", data_dir / TRAIN, name="train")
        assert (res.sentences, res.mentions, res.negatives) == (10, 44, 9)
        bench, train = stored_rows(store, "bench"), stored_rows(store, "train")
    assert train[:2] == bench[:2]
    assert train[2][:3] == [(0, "conference"), (0, "else"), (0, "product")]


def test_training_negative_key_and_duplicates(db: Path, tmp_path: Path) -> None:
    f = write(
        tmp_path,
        [
            # GLiNER's process_pilener.py writes "negative" (singular)
            {
                "tokenized_text": ["Ada", "met", "Alan"],
                "ner": [[2, 2, "person"], [0, 0, "person"], [0, 0, "person"]],
                "negative": ["city", "city"],
            },
            {"tokenized_text": ["in", "New", "York"], "ner": [], "negatives": ["person"]},
        ],
        name="train.json",
    )
    with Store(db) as store:
        res = ingest(store, "gliner", f)
        _, mentions, negatives = stored_rows(store, "gliner")
    assert mentions == [(0, 0, 1, "person"), (0, 2, 3, "person")]
    assert negatives == [(0, "city"), (1, "person")]
    assert res.splits[0].report["counts"] == {"duplicate_spans": 1}


def test_benchmark_moves_an_entity_found_inside_another_word(db: Path, tmp_path: Path) -> None:
    """GLiNER's mit-movie test record 'give me rated r movies ...': its "r" sits at [8, 9],
    inside "rated" (the first `str.find`); the annotated word is the later token "r"."""
    entities = [
        {"name": "r", "type": "rating", "pos": [8, 9]},  # inside "rated"
        {"name": "r", "type": "rating", "pos": [8, 9]},  # the second "r", same find
        {"name": "rated", "type": "rating", "pos": [34, 39]},
    ]
    counts, _, mentions = read_one(
        db, tmp_path, "give me rated r movies that are r rated", entities
    )
    assert mentions == [(3, 4, "rating"), (7, 8, "rating"), (8, 9, "rating")]
    assert counts == {"char_spans_moved_to_whole_words": 2}


def test_a_moved_entity_never_takes_the_words_of_one_listed_after_it(
    db: Path, tmp_path: Path
) -> None:
    """GLiNER's CoNLL-2003 train record 12124: the first "Iran" sits inside "Iranian", the
    second names the "Iran" at [65, 69] exactly; the first belongs to the last "Iran"."""
    s = (
        "An Iranian embassy spokesman said in response to an inquiry that Iran had formally "
        "requested Banisadr 's extradition for hijacking the military aircraft which he "
        "commandeered to flee Iran in July 1981 ."
    )
    entities = [
        {"name": "Banisadr", "type": "person", "pos": [93, 101]},
        {"name": "Iranian", "type": "else", "pos": [3, 10]},
        {"name": "Iran", "type": "location", "pos": [3, 7]},
        {"name": "Iran", "type": "location", "pos": [65, 69]},
    ]
    counts, tokens, mentions = read_one(db, tmp_path, s, entities)
    iran = [i for i, t in enumerate(tokens) if t == "Iran"]
    assert [m for m in mentions if m[2] == "location"] == [
        (iran[0], iran[0] + 1, "location"),
        (iran[1], iran[1] + 1, "location"),
    ]
    assert len(mentions) == 4
    assert counts == {"char_spans_moved_to_whole_words": 1}


def test_sentences_not_single_spaced_are_counted_and_read(db: Path, tmp_path: Path) -> None:
    s = "Ada  met\tAlan ."  # GLiNER's `process` would misplace "Alan" (it assumes single spaces)
    entities = [{"name": "Alan", "type": "person", "pos": [9, 13]}]
    counts, tokens, mentions = read_one(db, tmp_path, s, entities)
    assert tokens == ["Ada", "met", "Alan", "."]
    assert mentions == [(2, 3, "person")]
    assert counts == {"sentences_not_single_spaced": 1}


def test_benchmark_snaps_char_spans_and_counts_name_mismatches(db: Path, tmp_path: Path) -> None:
    entities = [
        {"name": "Paris", "type": "city", "pos": [4, 9]},  # inside "Paris-based"
        {"name": "UNESCO", "type": "organization", "pos": [16, 22]},
        {"name": "Roma", "type": "city", "pos": [30, 34]},
        {"name": "NESC", "type": "organization", "pos": [17, 21]},  # snaps to UNESCO
    ]
    counts, tokens, mentions = read_one(
        db, tmp_path, "The Paris-based UNESCO met in Rome .", entities
    )
    assert tokens == ["The", "Paris-based", "UNESCO", "met", "in", "Rome", "."]
    assert mentions == [(1, 2, "city"), (2, 3, "organization"), (5, 6, "city")]
    assert counts == {
        "char_spans_snapped": 2,
        "duplicate_spans": 1,
        "entity_name_mismatch": 1,
    }


GOOD_TRAIN = {"tokenized_text": ["Ada", "."], "ner": [[0, 0, "person"]]}
GOOD_BENCH = {"sentence": "Ada .", "entities": [{"name": "Ada", "type": "person", "pos": [0, 3]}]}


def bad_cases() -> list[tuple[str, list | str, str]]:
    """(id, records or raw text, expected message after '<path>:')."""
    ent = {"name": "Ada", "type": "person"}
    return [
        ("empty", "", " empty file"),
        (
            "invalid",
            '[\n{"sentence": "x",}\n]',
            "2: record 1: invalid JSON: Expecting property name "
            "enclosed in double quotes (column 18): '}\\n]'",
        ),
        (
            "not-a-list",
            '{"sentence": "x"}',
            '1: expected a JSON list of records, found an object: \'{"sentence": "x"}\'',
        ),
        (
            "unknown-shape",
            [{"text": "x", "spans": []}],
            "2: record 1: neither GLiNER training "
            "('tokenized_text', 'ner') nor benchmark ('sentence', 'entities') json; keys: "
            '["spans", "text"]',
        ),
        (
            "mixed-shapes",
            [GOOD_TRAIN, GOOD_BENCH],
            '3: record 2: no \'tokenized_text\' key: ["entities", "sentence"]',
        ),
        (
            "no-ner",
            [GOOD_TRAIN, {"tokenized_text": ["x"]}],
            "3: record 2: no 'ner' key: [\"tokenized_text\"]",
        ),
        (
            "tokens-not-strings",
            [{"tokenized_text": ["x", 1], "ner": []}],
            "2: record 1: 'tokenized_text' is not a list of strings: [\"x\", 1]",
        ),
        (
            "pair",
            [GOOD_TRAIN, {"tokenized_text": ["x"], "ner": [[0, 0]]}],
            "3: record 2: ner item is not [start, end, label]: [0, 0]",
        ),
        (
            "float-offset",
            [{"tokenized_text": ["x"], "ner": [[0, 0.0, "person"]]}],
            '2: record 1: ner offsets are not integers: [0, 0.0, "person"]',
        ),
        (
            "bool-offset",
            [{"tokenized_text": ["x"], "ner": [[0, True, "person"]]}],
            '2: record 1: ner offsets are not integers: [0, true, "person"]',
        ),
        (
            "label",
            [{"tokenized_text": ["x"], "ner": [[0, 0, None]]}],
            "2: record 1: ner label is not a string: [0, 0, null]",
        ),
        (
            "reversed",
            [{"tokenized_text": ["x", "y"], "ner": [[1, 0, "person"]]}],
            '2: record 1: ner end before start (end is inclusive): [1, 0, "person"]',
        ),
        (
            "out-of-range",
            [{"tokenized_text": ["x", "y"], "ner": [[1, 2, "person"]]}],
            "2: record 1: ner span outside the 2 tokens of 'tokenized_text' (end is inclusive): "
            '[1, 2, "person"]',
        ),
        (
            "negatives",
            [{"tokenized_text": ["x"], "ner": [], "negatives": "city"}],
            "2: record 1: 'negatives' is not a list of strings: \"city\"",
        ),
        (
            "both-negative-keys",
            [{"tokenized_text": ["x"], "ner": [], "negatives": [], "negative": []}],
            "2: record 1: label-level negatives under several keys (negatives, negative): "
            '["negative", "negatives", "ner", "tokenized_text"]',
        ),
        (
            "entities",
            [{"sentence": "x", "entities": {}}],
            "2: record 1: 'entities' is not a list: {}",
        ),
        (
            "entity-keys",
            [{"sentence": "x", "entities": [{"name": "x", "pos": [0, 1]}]}],
            "2: record 1: entity is not an object with name, type and pos: "
            '{"name": "x", "pos": [0, 1]}',
        ),
        (
            "pos-shape",
            [GOOD_BENCH, {"sentence": "Ada .", "entities": [ent | {"pos": [0, 3, 4]}]}],
            "3: record 2: entity pos is not [char_start, char_end]: "
            '{"name": "Ada", "type": "person", "pos": [0, 3, 4]}',
        ),
        (
            "pos-beyond",
            [{"sentence": "Ada .", "entities": [ent | {"pos": [0, 9]}]}],
            "2: record 1: entity pos outside the sentence of 5 characters (or empty): "
            '{"name": "Ada", "type": "person", "pos": [0, 9]}',
        ),
        (
            "pos-empty",
            [{"sentence": "Ada .", "entities": [ent | {"pos": [2, 2]}]}],
            "2: record 1: entity pos outside the sentence of 5 characters (or empty): "
            '{"name": "Ada", "type": "person", "pos": [2, 2]}',
        ),
        (
            "pos-on-space",
            [{"sentence": "Ada  .", "entities": [ent | {"pos": [3, 5]}]}],
            "2: record 1: entity pos covers no token: "
            '{"name": "Ada", "type": "person", "pos": [3, 5]}',
        ),
    ]


@pytest.mark.parametrize(
    ("records", "message"), [c[1:] for c in bad_cases()], ids=[c[0] for c in bad_cases()]
)
def test_bad_input_names_file_record_and_value(
    db: Path, tmp_path: Path, records: list | str, message: str
) -> None:
    if isinstance(records, str):
        f = tmp_path / "test.json"
        f.write_text(records, encoding="utf-8")
    else:
        f = write(tmp_path, records)
    with (
        Store(db) as store,
        pytest.raises(SourceFormatError, match=f"^{re.escape(f'{f}:{message}')}$"),
    ):
        ingest(store, "gliner", f)


def test_failed_ingest_leaves_the_store_unchanged(db: Path, tmp_path: Path, data_dir: Path) -> None:
    bad = tmp_path / "bad" / "test.json"
    bad.parent.mkdir()
    lines = (data_dir / BENCH).read_text(encoding="utf-8").splitlines(keepends=True)
    assert '"pos": [87, 90]' in lines[3]  # record 3: "HMM"
    lines[3] = lines[3].replace('"pos": [87, 90]', '"pos": [87, 900]')
    bad.write_text("".join(lines), encoding="utf-8")
    assert_failed_ingest_keeps_store(
        db, "gliner", data_dir / BENCH, bad, f"{bad}:4: record 3: entity pos outside"
    )


# records (= sentences) and mentions after reading, per benchmark test file; mentions fall short
# of the entity count where two entities snap to the same token span (CoNLL2003: 5,648 -> 5,646).
# Against the BIO files of ../shared/data/README.md (e.g. CrossNER AI test 431 / 1,809), GLiNER's
# published json lacks every entity that ends its sentence with no final punctuation: its BIO
# conversion never closes a final entity (AI: "PSOLA", "website", "Confusion matrix",
# "hinge loss", "Kismet" -> 1,804). MIT Movie / Restaurant json have one sentence fewer each.
GLINER_TEST_FILES = {
    "CoNLL2003": (3453, 5648),  # 10 entities moved to their words: 2 no longer collide
    "CrossNER_AI": (431, 1804),
    "CrossNER_literature": (416, 2263),
    "CrossNER_music": (465, 3334),
    "CrossNER_politics": (650, 4200),
    "CrossNER_science": (543, 3088),
    "mit-movie": (2442, 5338),
    "mit-restaurant": (1520, 3150),
}


def test_gliner_benchmark_test_files(db: Path, shared: Path) -> None:
    files = sorted((shared / "gliner-format").glob("*/test.json"))
    assert sorted(f.parent.name for f in files) == sorted(GLINER_TEST_FILES)
    with Store(db) as store:
        for f in files:
            records = json.loads(f.read_text(encoding="utf-8"))
            res = ingest(store, "gliner", f, name=f.parent.name)
            assert res.sentences == len(records)
            assert (res.sentences, res.mentions) == GLINER_TEST_FILES[f.parent.name]
            assert res.splits[0].report["counts"].get("entity_name_mismatch", 0) == 0


@pytest.mark.shared
def test_gliner_mit_movie_reads_like_its_bio_file(db: Path, shared: Path) -> None:
    """GLiNER's mit-movie test json against MIT's own BIO file: the same tokens and the same
    mention positions in every one of its 2,442 sentences (95 of its entities sit inside
    another word in the json and are moved to theirs; the BIO file has one sentence more)."""
    with Store(db) as store:
        res = ingest(store, "gliner", shared / "gliner-format/mit-movie/test.json", name="g")
        ingest(store, "mit-movie", shared / "mit-movie")

        def rows(source: str, split: str | None) -> list[tuple[list[str], list[tuple[int, int]]]]:
            got = store.sentences_with_spans(source, split)
            return [(tokens, [(s, e) for s, e, _ in spans]) for _, _, tokens, spans in got]

        ours, bio = rows("g", None), rows("mit-movie", "test")
    assert res.splits[0].report["counts"] == {"char_spans_moved_to_whole_words": 95}
    assert (len(ours), len(bio)) == (2442, 2443)
    assert ours == bio[: len(ours)]
