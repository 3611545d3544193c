"""Pile-NER conversation JSON: passages grouped, mentions located like GLiNER, strict errors."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from helpers import assert_failed_ingest_keeps_store, stored_rows

from builders.errors import SourceFormatError
from builders.store import Store
from builders.store.ingest import ingest

EVAL = "pilener/CrossNER_AI-excerpt.json"
TRAIN = "pilener/train-shaped.json"


def conv(passage: str, *qa: tuple[str, str], rid: str = "0") -> dict:
    turns = [
        {"from": "human", "value": f"Text: {passage}"},
        {"from": "gpt", "value": "I've read this text."},
    ]
    for label, answer in qa:
        turns.append({"from": "human", "value": f"What describes {label} in the text?"})
        turns.append({"from": "gpt", "value": answer})
    return {"id": rid, "conversations": turns}


def write(tmp_path: Path, records: object, name: str = "train.json") -> Path:
    f = tmp_path / name
    f.write_text(json.dumps(records), encoding="utf-8")
    return f


def test_evaluation_file_groups_one_question_records(db: Path, data_dir: Path) -> None:
    with Store(db) as store:
        res = ingest(store, "pilener", data_dir / EVAL)
        assert (res.sentences, res.mentions, res.negatives) == (3, 12, 35)
        assert res.splits[0].report["counts"] == {"mentions_matched_more_than_once": 1}
        sentences, mentions, negatives = stored_rows(store, "pilener")
    # 39 records, 13 questions per passage -> 3 passages, each keeping its first record's id
    assert [(s[0], s[2], len(s[1])) for s in sentences] == [
        (0, "CrossNER_AI_0", 20),
        (1, "CrossNER_AI_13", 21),
        (2, "CrossNER_AI_91", 52),
    ]
    assert sentences[0][1][5:8] == ["naive", "Bayes", "classifier"]
    assert [m for m in mentions if m[0] == 0] == [
        (0, 5, 8, "algorithm"),
        (0, 10, 13, "algorithm"),
        (0, 15, 17, "algorithm"),
    ]
    # "gradient descent" is found twice, once inside "stochastic gradient descent"
    assert [m[1:] for m in mentions if m[0] == 2] == [
        (18, 20, "algorithm"),
        (22, 25, "algorithm"),
        (34, 36, "field"),
        (45, 47, "algorithm"),
        (48, 51, "algorithm"),
        (49, 51, "algorithm"),
    ]
    assert [n[1] for n in negatives if n[0] == 0] == sorted(
        [
            "organization",
            "university",
            "location",
            "person",
            "conference",
            "country",
            "researcher",
            "task",
            "product",
            "program language",
            "field",
            "metrics",
        ]
    )
    assert (1, "algorithm") in negatives and (0, "algorithm") not in negatives


def test_train_layout_reads_like_the_evaluation_layout(db: Path, data_dir: Path) -> None:
    with Store(db) as store:
        ingest(store, "pilener", data_dir / EVAL, name="eval")
        res = ingest(store, "pilener", data_dir / TRAIN, name="train")
        assert (res.sentences, res.mentions, res.negatives) == (3, 12, 35)
        ev, tr = stored_rows(store, "eval"), stored_rows(store, "train")
    assert [s[1] for s in tr[0]] == [s[1] for s in ev[0]]
    assert [s[2] for s in tr[0]] == ["0", "1", "2"]
    assert tr[1:] == ev[1:]


def test_mentions_case_insensitive_every_occurrence_deduplicated(db: Path, tmp_path: Path) -> None:
    f = write(
        tmp_path,
        [
            conv(
                "The Paris Agreement was signed in paris , not in Lyon-Villeurbanne .",
                ("city", '["Paris", "PARIS", "Lyon-Villeurbanne"]'),
                ("treaty", '["the paris agreement"]'),
                ("river", "[]"),
                ("person", '["Macron"]'),
                ("country", "['France']"),
            )
        ],
    )
    with Store(db) as store:
        res = ingest(store, "pilener", f)
        _, mentions, negatives = stored_rows(store, "pilener")
    # tokens: The Paris Agreement was signed in paris , not in Lyon-Villeurbanne .
    assert [m[1:] for m in mentions] == [
        (0, 3, "treaty"),
        (1, 2, "city"),
        (6, 7, "city"),
        (10, 11, "city"),
    ]
    assert negatives == [(0, "river")]
    assert res.splits[0].report["counts"] == {
        "answers_python_literal": 1,
        "duplicate_spans": 2,
        "mentions_matched_more_than_once": 2,
        "mentions_not_found": 2,
    }
    assert res.splits[0].report["notes"] == [
        "train.json: some mentions do not occur in their passage and were skipped "
        "(first: record 1, 'person': 'Macron')"
    ]


def test_same_type_asked_twice_starts_a_new_sentence(db: Path, tmp_path: Path) -> None:
    p = "Ada met Alan ."
    f = write(
        tmp_path,
        [
            conv(p, ("person", '["Ada"]'), rid="a"),
            conv(p, ("city", "[]"), rid="b"),
            conv(p, ("person", '["Alan"]'), rid="c"),
            conv("Bob .", ("person", '["Bob"]'), rid="d"),
        ],
    )
    with Store(db) as store:
        ingest(store, "pilener", f)
        sentences, mentions, negatives = stored_rows(store, "pilener")
    assert [s[2] for s in sentences] == ["a", "c", "d"]
    assert mentions == [(0, 0, 1, "person"), (1, 2, 3, "person"), (2, 0, 1, "person")]
    assert negatives == [(0, "city")]


def test_bio_files_are_read_as_columns_with_repair(db: Path, tmp_path: Path) -> None:
    f = tmp_path / "pilener-dev.bio"
    f.write_text("Ada\tB-person\nLovelace\tI-field of study\n.\tO\n\n", encoding="utf-8")
    with Store(db) as store:
        res = ingest(store, "pilener", f)
        _, mentions, _ = stored_rows(store, "pilener")
    assert mentions == [(0, 0, 1, "person"), (0, 1, 2, "field of study")]
    assert res.splits[0].report["counts"] == {"repaired_tags": 1}


GOOD = conv("Ada .", ("person", '["Ada"]'))


def bad_cases() -> list[tuple[str, str, str]]:
    """(id, file text, expected message after '<path>:')."""

    def dump(*records: object) -> str:
        return "[\n" + ",\n".join(json.dumps(r) for r in records) + "\n]\n"

    no_text = conv("x")
    no_text["conversations"][0]["value"] = "Passage: x"
    swapped = conv("x", ("person", "[]"))
    swapped["conversations"][3]["from"] = "human"
    odd = conv("x", ("person", "[]"))
    odd["conversations"].pop()
    return [
        ("empty", "", " empty file"),
        ("blank", " \n\t\n", " empty file"),
        (
            "invalid",
            '[\n{"id": 1,\n "conversations": [}\n]',
            "3: record 1: invalid JSON: Expecting value (column 20): '}\\n]'",
        ),
        (
            "object",
            '{"id": 1}',
            "1: expected a JSON list of records, found an object: '{\"id\": 1}'",
        ),
        ("trailing", "[]\n[]", "2: invalid JSON: extra data after the list: '[]'"),
        (
            "no-comma",
            dump(GOOD)[:-3] + " {}]",
            "2: invalid JSON after record 1: expected ',' or ']': '{}]'",
        ),
        ("unclosed", dump(GOOD)[:-3], "2: invalid JSON: list not closed after record 1"),
        ("not-object", dump(GOOD, [1, 2]), "3: record 2: expected an object: [1, 2]"),
        (
            "no-conversations",
            dump(GOOD, {"id": "7", "turns": []}),
            '3: record 2: no \'conversations\' key: ["id", "turns"]',
        ),
        (
            "no-text",
            dump(GOOD, no_text),
            "3: record 2: first turn does not start with 'Text: ': \"Passage: x\"",
        ),
        (
            "question",
            dump(
                {
                    "conversations": [
                        {"from": "human", "value": "Text: x"},
                        {"from": "gpt", "value": "ok"},
                        {"from": "human", "value": "Which persons are in the text?"},
                        {"from": "gpt", "value": "[]"},
                    ]
                }
            ),
            "2: record 1: question is not 'What describes <type> in the text?': "
            '"Which persons are in the text?"',
        ),
        (
            "alternation",
            dump(swapped),
            "2: record 1: turn 4 should come from 'gpt' (turns alternate): "
            '{"from": "human", "value": "[]"}',
        ),
        (
            "unanswered",
            dump(odd),
            '2: record 1: the last question has no answer: "What describes person in the text?"',
        ),
        (
            "answer-dict",
            dump(GOOD, conv("x", ("person", '{"a": 1}'))),
            '3: record 2: answer is not a JSON list of strings: "{\\"a\\": 1}"',
        ),
        (
            "answer-text",
            dump(conv("x", ("person", "Ada and Alan"))),
            '2: record 1: answer is not a JSON list of strings: "Ada and Alan"',
        ),
        (
            "answer-numbers",
            dump(conv("x", ("person", "[1, 2]"))),
            '2: record 1: answer is not a JSON list of strings: "[1, 2]"',
        ),
        (
            "answer-code",
            dump(conv("x", ("person", "__import__('os').getcwd()"))),
            "2: record 1: answer is not a JSON list of strings: \"__import__('os').getcwd()\"",
        ),
    ]


@pytest.mark.parametrize(
    ("text", "message"), [c[1:] for c in bad_cases()], ids=[c[0] for c in bad_cases()]
)
def test_bad_input_names_file_record_and_value(
    db: Path, tmp_path: Path, text: str, message: str
) -> None:
    f = tmp_path / "train.json"
    f.write_text(text, encoding="utf-8")
    with (
        Store(db) as store,
        pytest.raises(SourceFormatError, match=f"^{re.escape(f'{f}:{message}')}$"),
    ):
        ingest(store, "pilener", f)


def test_empty_list_is_empty_input(db: Path, tmp_path: Path) -> None:
    f = write(tmp_path, [])
    with (
        Store(db) as store,
        pytest.raises(SourceFormatError, match=re.escape(f"{f}: empty input: no sentences found")),
    ):
        ingest(store, "pilener", f)


def test_failed_ingest_leaves_the_store_unchanged(db: Path, tmp_path: Path, data_dir: Path) -> None:
    bad = tmp_path / "bad" / "CrossNER_AI-excerpt.json"
    bad.parent.mkdir()
    lines = (data_dir / EVAL).read_text(encoding="utf-8").splitlines(keepends=True)
    lines[30] = lines[30].replace('"[]"', '"[oops]"', 1)  # record 30 = CrossNER_AI_94
    assert lines != (data_dir / EVAL).read_text(encoding="utf-8").splitlines(keepends=True)
    bad.write_text("".join(lines), encoding="utf-8")
    assert_failed_ingest_keeps_store(
        db, "pilener", data_dir / EVAL, bad, f"{bad}:31: record 30: answer is not"
    )


# (records, consecutive runs of one passage, distinct passages): CrossNER repeats a few
# sentences, so a passage is a run of records, not a distinct text
CONVERSATION_FILES = {
    "CrossNER_AI": (5603, 431, 430),
    "CrossNER_literature": (4576, 416, 416),
    "CrossNER_music": (5580, 465, 457),
    "CrossNER_politics": (5200, 650, 650),
    "CrossNER_science": (8688, 543, 532),
}


def test_crossner_conversation_files(db: Path, shared: Path) -> None:
    files = sorted((shared / "pilener/conversation-format").glob("CrossNER_*.json"))
    assert [f.stem for f in files] == sorted(CONVERSATION_FILES)
    with Store(db) as store:
        for f in files:
            records = json.loads(f.read_text(encoding="utf-8"))
            passages = [r["conversations"][0]["value"] for r in records]
            runs = sum(1 for _ in itertools.groupby(passages))
            res = ingest(store, "pilener", f, name=f.stem)
            assert (len(records), runs, len(set(passages))) == CONVERSATION_FILES[f.stem]
            assert res.sentences == runs
            assert res.splits[0].report["counts"].get("mentions_not_found", 0) == 0
            assert res.mentions > 0 and res.negatives > 0
        ai = store.con.execute(
            "SELECT n_sentences, n_mentions, n_negatives FROM sources WHERE source = 'CrossNER_AI'"
        ).fetchone()
    assert ai == (431, 1666, 4817)


def test_the_local_slice_read_for_want_of_a_path_says_what_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --path, `pilener` reads `$LABELSHIFT_DATA`'s SLIMER slice: a note says it is a
    2,217-passage slice, not the corpus the authors' figures are of; with --path, no note."""
    from builders.sources import get_source

    folder = tmp_path / "pilener"
    folder.mkdir()
    excerpt = Path(__file__).parent.parent / "data" / "pilener-bio"
    bio = folder / "pilener-391xALL-dev.bio"
    bio.write_bytes((excerpt / "pilener-391xALL-dev.excerpt.bio").read_bytes())
    monkeypatch.setenv("LABELSHIFT_DATA", str(tmp_path))
    spec = get_source("pilener")
    notes = spec.plan().notes
    assert any(n.startswith("pilener-391xALL-dev.bio: SLIMER's held-out slice") for n in notes)
    assert not any("held-out slice" in n for n in spec.plan(bio).notes)
