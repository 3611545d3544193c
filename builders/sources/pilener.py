"""Pile-NER conversation JSON (UniversalNER): a passage, then one question/answer pair per type.

    [{"id": "7", "conversations": [{"from": "human", "value": "Text: <passage>"},
      {"from": "gpt", "value": "I've read this text."}, {"from": "human", "value":
      "What describes person in the text?"}, {"from": "gpt", "value": "[\\"Ada\\"]"}, ...]}, ...]

Pile-NER's `train.json` asks every type of a passage in one record; UniversalNER's evaluation
files (`CrossNER_AI.json`, ...) ask ONE type per record and repeat the passage. Consecutive
records with the same passage text are one example (with the first record's id); a type asked
twice starts a new one, so two identical neighbouring sentences stay two.

Mentions carry no offsets. As GLiNER's `data/process_pilener.py` does, the passage is tokenised
with GLiNER's regex and every case-insensitive occurrence of a mention's token sequence becomes
a span; identical (start, stop, label) spans are kept once. A mention found nowhere is counted
(`mentions_not_found`), not an error. An answer `[]` makes the type a negative.

A `.bio` (or `.bio.xz`) path is SLIMER's BIO conversion, read by `columns` with `repair=True`
(see the `pilener-sample` source in `table.py`).
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builders.sources import columns
from builders.sources.base import Example, ReadReport, tokenize_with_offsets
from builders.sources.jsonfile import Record, json_records
from builders.sources.options import ReaderOptions

TEXT_PREFIX = "Text: "
QUESTION_RE = re.compile(r"What describes (.+) in the text\?", re.DOTALL)
BIO_SUFFIXES = (".bio", ".bio.xz", ".bio.gz")


#: the keys of a record that the reader uses; others are counted and named in the report
RECORD_KEYS = ("id", "conversations")


@dataclass(frozen=True)
class Options(ReaderOptions):
    """Pile-NER takes no options: its BIO conversion is always read with `repair`."""


def read(path: Path, report: ReadReport, **options: object) -> Iterator[Example]:
    """Yield one example per passage of a Pile-NER conversation file (or of its BIO version)."""
    Options.parse(options, "pilener")
    if path.name.endswith(BIO_SUFFIXES):
        yield from columns.read(
            path, report, columns="token,tag", scheme="bio", sep="\t", repair=True
        )
        return
    state = _Finder(path, report)
    group: _Passage | None = None
    unread = Counter[str]()
    for where, record in json_records(path):
        rec = _parse_record(where, record, unread)
        if group is not None and group.text == rec.text and not (group.types() & rec.types()):
            group.qas.extend(rec.qas)
            continue
        if group is not None:
            yield state.example(group)
        group = rec
    if group is not None:
        yield state.example(group)
    report.not_kept(path, "record keys", unread)


@dataclass
class _Passage:
    text: str
    number: int  # record number of the first record
    line: int
    raw_id: str | None
    # (type, (mentions, parsed as a Python literal), record number)
    qas: list[tuple[str, tuple[list[str], bool], int]] = field(default_factory=list)

    def types(self) -> set[str]:
        return {t for t, _, _ in self.qas}


def _parse_record(rec: Record, record: Any, unread: Counter[str]) -> _Passage:
    if not isinstance(record, dict):
        raise rec.error("expected an object", record)
    if "conversations" not in record:
        raise rec.error("no 'conversations' key", sorted(record))
    unread.update(k for k in record if k not in RECORD_KEYS)
    turns = record["conversations"]
    if not isinstance(turns, list) or not turns:
        raise rec.error("'conversations' is not a non-empty list", turns)
    for i, turn in enumerate(turns):
        speaker = "human" if i % 2 == 0 else "gpt"
        if not (isinstance(turn, dict) and isinstance(turn.get("value"), str)):
            raise rec.error(f"turn {i + 1} is not an object with a string 'value'", turn)
        if turn.get("from") != speaker:
            raise rec.error(f"turn {i + 1} should come from {speaker!r} (turns alternate)", turn)
        unread.update(f"conversations[].{k}" for k in turn if k not in ("from", "value"))
    first = turns[0]["value"]
    if not first.startswith(TEXT_PREFIX):
        raise rec.error("first turn does not start with 'Text: '", first)
    if len(turns) % 2:
        raise rec.error("the last question has no answer", turns[-1]["value"])
    raw_id = record.get("id")
    passage = _Passage(
        first[len(TEXT_PREFIX) :], rec.number, rec.line, None if raw_id is None else str(raw_id)
    )
    for i in range(2, len(turns), 2):
        question = turns[i]["value"]
        m = QUESTION_RE.fullmatch(question)
        if m is None:
            raise rec.error("question is not 'What describes <type> in the text?'", question)
        answer = _parse_answer(rec, turns[i + 1]["value"])
        passage.qas.append((m.group(1), answer, rec.number))
    return passage


def _parse_answer(rec: Record, value: str) -> tuple[list[str], bool]:
    """A JSON list of strings; a Python list literal is accepted (and counted). Never eval."""
    literal = False
    try:
        answer = json.loads(value)
    except json.JSONDecodeError:
        try:
            answer = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise rec.error("answer is not a JSON list of strings", value) from None
        literal = True
    if not isinstance(answer, list) or not all(isinstance(a, str) for a in answer):
        raise rec.error("answer is not a JSON list of strings", value)
    return answer, literal


class _Finder:
    """Turns grouped passages into examples, locating mentions and counting what it saw."""

    def __init__(self, path: Path, report: ReadReport):
        self.path, self.report = path, report
        self.noted = False

    def example(self, passage: _Passage) -> Example:
        tokens, _, _ = tokenize_with_offsets(passage.text)
        lowered = [t.lower() for t in tokens]
        spans: set[tuple[int, int, str]] = set()
        negatives: list[str] = []
        for label, (mentions, literal), number in passage.qas:
            if literal:
                self.report.add("answers_python_literal")
            if not mentions:
                if label not in negatives:
                    negatives.append(label)
                continue
            for mention in mentions:
                needle = [t.lower() for t in tokenize_with_offsets(mention)[0]]
                found = _occurrences(lowered, needle)
                if not found:
                    self._not_found(number, mention, label)
                    continue
                if len(found) > 1:
                    self.report.add("mentions_matched_more_than_once")
                for start in found:
                    span = (start, start + len(needle), label)
                    self.report.keep(spans, span, "duplicate_spans")
        labelled = {label for _, _, label in spans}
        kept = [n for n in negatives if n not in labelled]
        if len(kept) != len(negatives):
            self.report.add("negatives_with_mentions_dropped", len(negatives) - len(kept))
        return Example(
            tokens=tokens,
            spans=sorted(spans),
            negatives=kept,
            line=passage.line,
            record=passage.number,
            raw_id=passage.raw_id,
        )

    def _not_found(self, number: int, mention: str, label: str) -> None:
        self.report.add("mentions_not_found")
        if not self.noted:
            self.noted = True
            self.report.note(
                f"{self.path.name}: some mentions do not occur in their passage and were skipped "
                f"(first: record {number}, {label!r}: {mention!r})"
            )


def _occurrences(tokens: list[str], needle: list[str]) -> list[int]:
    """Start offsets of every occurrence of `needle` in `tokens` (both already lower-cased)."""
    n = len(needle)
    if n == 0:
        return []
    first = needle[0]
    return [
        i for i in range(len(tokens) - n + 1) if tokens[i] == first and tokens[i : i + n] == needle
    ]
