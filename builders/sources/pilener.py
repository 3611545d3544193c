"""Pile-NER conversation JSON (UniversalNER): a passage, then one question/answer pair per type.

    [{"id": "7", "conversations": [{"from": "human", "value": "Text: <passage>"},
      {"from": "gpt", "value": "I've read this text."}, {"from": "human", "value":
      "What describes person in the text?"}, {"from": "gpt", "value": "[\\"Ada\\"]"}, ...]}, ...]

Two layouts, read alike: Pile-NER's `train.json` asks every type of a passage in one record;
UniversalNER's evaluation files (`CrossNER_AI.json`, ...) ask ONE type per record and repeat
the passage. Consecutive records with the same passage text are grouped into one example (one
passage = one sentence, with all its types); a type asked twice starts a new example, so two
identical neighbouring sentences stay two sentences. The example keeps the first record's id.

Mentions carry no offsets. As GLiNER's `data/process_pilener.py` does, the passage is tokenised
with GLiNER's regex and every case-insensitive occurrence of a mention's token sequence becomes
a span; identical (start, stop, label) spans are kept once. A mention found nowhere is counted
(`mentions_not_found`), not an error. An answer `[]` makes the type a negative.

A `.bio` (or `.bio.xz`) path is Pile-NER converted to BIO by SLIMER and is read by `columns`
with `repair=True`: that file is lax, 156 `I-x` tags follow an entity of another type (the
conversion flattened overlapping mentions); they are read as `B-x` and counted.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builders.errors import SourceFormatError
from builders.sources import columns
from builders.sources.base import Example, ReadReport, read_text, tokenize_with_offsets

TEXT_PREFIX = "Text: "
QUESTION_RE = re.compile(r"What describes (.+) in the text\?", re.DOTALL)
BIO_SUFFIXES = (".bio", ".bio.xz", ".bio.gz")


def read(path: Path, report: ReadReport, **unused: object) -> Iterator[Example]:
    """Yield one example per passage of a Pile-NER conversation file (or of its BIO version)."""
    if path.name.endswith(BIO_SUFFIXES):
        yield from columns.read(
            path, report, token_col=0, tag_col=-1, scheme="bio", sep="\t", repair=True
        )
        return
    state = _Finder(path, report)
    group: _Passage | None = None
    for number, line, record in json_records(path):
        rec = _parse_record(path, number, line, record)
        if group is not None and group.text == rec.text and not (group.types() & rec.types()):
            group.qas.extend(rec.qas)
            continue
        if group is not None:
            yield state.example(group)
        group = rec
    if group is not None:
        yield state.example(group)


def json_records(path: Path) -> Iterator[tuple[int, int, Any]]:
    """Yield (1-based record number, 1-based line, record) of a file holding one JSON list.

    Records are decoded one by one so that each error can name its record and real line.
    Raises `SourceFormatError` for an empty file, invalid JSON or a top level that is not a list.
    """
    text = read_text(path)
    decoder = json.JSONDecoder()
    pos = _skip_ws(text, 0)
    if pos == len(text):
        raise SourceFormatError(path, None, "empty file")
    if text[pos] != "[":
        kind = _top_level_kind(path, text, decoder, pos)
        raise SourceFormatError(
            path,
            _line_at(text, pos),
            f"expected a JSON list of records, found {kind}",
            text[pos : pos + 40],
        )
    pos = _skip_ws(text, pos + 1)
    if text.startswith("]", pos):
        _expect_end(path, text, pos + 1)
        return
    number = 0
    line, line_pos = _line_at(text, pos), pos
    while True:
        number += 1
        line += text.count("\n", line_pos, pos)
        line_pos = pos
        try:
            record, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _json_error(path, text, exc, number) from None
        yield number, line, record
        pos = _skip_ws(text, end)
        if text.startswith(",", pos):
            pos = _skip_ws(text, pos + 1)
            continue
        if text.startswith("]", pos):
            _expect_end(path, text, pos + 1)
            return
        if pos == len(text):
            raise SourceFormatError(
                path, _line_at(text, pos), f"invalid JSON: list not closed after record {number}"
            )
        raise SourceFormatError(
            path,
            _line_at(text, pos),
            f"invalid JSON after record {number}: expected ',' or ']'",
            text[pos : pos + 40],
        )


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


def _parse_record(path: Path, number: int, line: int, record: Any) -> _Passage:
    where = f"record {number}"
    if not isinstance(record, dict):
        raise SourceFormatError(path, line, f"{where}: expected an object", record)
    if "conversations" not in record:
        raise SourceFormatError(path, line, f"{where}: no 'conversations' key", sorted(record))
    turns = record["conversations"]
    if not isinstance(turns, list) or not turns:
        raise SourceFormatError(
            path, line, f"{where}: 'conversations' is not a non-empty list", turns
        )
    for i, turn in enumerate(turns):
        speaker = "human" if i % 2 == 0 else "gpt"
        if not (isinstance(turn, dict) and isinstance(turn.get("value"), str)):
            raise SourceFormatError(
                path, line, f"{where}: turn {i + 1} is not an object with a string 'value'", turn
            )
        if turn.get("from") != speaker:
            raise SourceFormatError(
                path,
                line,
                f"{where}: turn {i + 1} should come from {speaker!r} (turns alternate)",
                turn,
            )
    first = turns[0]["value"]
    if not first.startswith(TEXT_PREFIX):
        raise SourceFormatError(
            path, line, f"{where}: first turn does not start with 'Text: '", first
        )
    if len(turns) % 2:
        raise SourceFormatError(
            path, line, f"{where}: the last question has no answer", turns[-1]["value"]
        )
    raw_id = record.get("id")
    passage = _Passage(
        first[len(TEXT_PREFIX) :], number, line, None if raw_id is None else str(raw_id)
    )
    for i in range(2, len(turns), 2):
        question = turns[i]["value"]
        m = QUESTION_RE.fullmatch(question)
        if m is None:
            raise SourceFormatError(
                path,
                line,
                f"{where}: question is not 'What describes <type> in the text?'",
                question,
            )
        answer = _parse_answer(path, line, where, turns[i + 1]["value"])
        passage.qas.append((m.group(1), answer, number))
    return passage


def _parse_answer(path: Path, line: int, where: str, value: str) -> tuple[list[str], bool]:
    """A JSON list of strings; a Python list literal is accepted (and counted). Never eval."""
    literal = False
    try:
        answer = json.loads(value)
    except json.JSONDecodeError:
        try:
            answer = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            raise SourceFormatError(
                path, line, f"{where}: answer is not a JSON list of strings", value
            ) from None
        literal = True
    if not isinstance(answer, list) or not all(isinstance(a, str) for a in answer):
        raise SourceFormatError(path, line, f"{where}: answer is not a JSON list of strings", value)
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
                    if span in spans:
                        self.report.add("duplicate_spans")
                    spans.add(span)
        labelled = {label for _, _, label in spans}
        kept = [n for n in negatives if n not in labelled]
        if len(kept) != len(negatives):
            self.report.add("negatives_with_mentions_dropped", len(negatives) - len(kept))
        return Example(
            tokens=tokens,
            spans=sorted(spans),
            negatives=kept,
            line=passage.line,
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


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\n\r":
        pos += 1
    return pos


def _line_at(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _expect_end(path: Path, text: str, pos: int) -> None:
    pos = _skip_ws(text, pos)
    if pos < len(text):
        raise SourceFormatError(
            path,
            _line_at(text, pos),
            "invalid JSON: extra data after the list",
            text[pos : pos + 40],
        )


def _top_level_kind(path: Path, text: str, decoder: json.JSONDecoder, pos: int) -> str:
    try:
        value, _ = decoder.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise _json_error(path, text, exc, None) from None
    kinds = {dict: "an object", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")


def _json_error(
    path: Path, text: str, exc: json.JSONDecodeError, number: int | None
) -> SourceFormatError:
    where = "" if number is None else f" in record {number}"
    return SourceFormatError(
        path,
        exc.lineno,
        f"invalid JSON{where}: {exc.msg} (column {exc.colno})",
        text[exc.pos : exc.pos + 40],
    )
