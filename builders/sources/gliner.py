"""GLiNER json, in its two shapes (detected per file from the first record):

    training:  [{"tokenized_text": ["Ada", "wrote", ...], "ner": [[0, 0, "person"], ...],
                 "ner_negatives": ["city"]}, ...]         (ner end inclusive; "negatives" and
                                                          "negative" also read)
    benchmark: [{"sentence": "Ada wrote ...", "entities": [{"name": "Ada", "type": "person",
                 "pos": [0, 3]}]}, ...]                   (character offsets, end exclusive)

Training spans become (start, end + 1, label). Benchmark sentences are tokenised with GLiNER's
regex and a character span becomes the tokens that overlap it; a boundary that falls inside a
token is snapped outwards and counted (`char_spans_snapped`), an entity whose `name` differs
from its `sentence[start:end]` is counted (`entity_name_mismatch`), and a span that no token
overlaps is an error. Spans that come out identical are kept once (`duplicate_spans`).

GLiNER's benchmark files are converted from BIO and drop an entity that ends a sentence with no
final punctuation (5 of CrossNER AI test's 1,809 mentions); that is the data, read as it is.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from builders.errors import SourceFormatError
from builders.sources.base import Example, ReadReport, tokenize_with_offsets
from builders.sources.pilener import json_records


def read(path: Path, report: ReadReport, **unused: object) -> Iterator[Example]:
    """Yield one example per record of a GLiNER training or benchmark json file."""
    shape: str | None = None
    for number, line, record in json_records(path):
        where = f"record {number}"
        if not isinstance(record, dict):
            raise SourceFormatError(path, line, f"{where}: expected an object", record)
        if shape is None:
            shape = _detect(path, line, where, record)
            report.note(f"{path.name}: GLiNER {shape} json")
        if shape == "training":
            yield _training(path, number, line, record, report)
        else:
            yield _benchmark(path, number, line, record, report)


def _detect(path: Path, line: int, where: str, record: dict[str, Any]) -> str:
    if "tokenized_text" in record:
        return "training"
    if "sentence" in record:
        return "benchmark"
    raise SourceFormatError(
        path,
        line,
        f"{where}: neither GLiNER training ('tokenized_text', 'ner') nor benchmark "
        "('sentence', 'entities') json; keys",
        sorted(record),
    )


def _training(
    path: Path, number: int, line: int, record: dict[str, Any], report: ReadReport
) -> Example:
    where = f"record {number}"
    for key in ("tokenized_text", "ner"):
        if key not in record:
            raise SourceFormatError(path, line, f"{where}: no {key!r} key", sorted(record))
    tokens = record["tokenized_text"]
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise SourceFormatError(
            path, line, f"{where}: 'tokenized_text' is not a list of strings", tokens
        )
    ner = record["ner"]
    if not isinstance(ner, list):
        raise SourceFormatError(path, line, f"{where}: 'ner' is not a list", ner)
    spans: set[tuple[int, int, str]] = set()
    for triple in ner:
        if not isinstance(triple, list) or len(triple) != 3:
            raise SourceFormatError(
                path, line, f"{where}: ner item is not [start, end, label]", triple
            )
        start, end, label = triple
        if not (_is_int(start) and _is_int(end)):
            raise SourceFormatError(path, line, f"{where}: ner offsets are not integers", triple)
        if not isinstance(label, str):
            raise SourceFormatError(path, line, f"{where}: ner label is not a string", triple)
        if end < start:
            raise SourceFormatError(
                path, line, f"{where}: ner end before start (end is inclusive)", triple
            )
        _add(spans, (start, end + 1, label), report)
    negatives = _negatives(path, line, where, record)
    return Example(tokens=tokens, spans=sorted(spans), negatives=negatives, line=line)


#: Keys of a record's negative types: GLiNER's trainer reads `ner_negatives` (what export-gliner
#: writes); its own conversion (data/process_pilener.py) writes `negative`; older files `negatives`.
NEGATIVE_KEYS = ("ner_negatives", "negatives", "negative")


def _negatives(path: Path, line: int, where: str, record: dict[str, Any]) -> list[str]:
    keys = [k for k in NEGATIVE_KEYS if k in record]
    if len(keys) > 1:
        raise SourceFormatError(
            path, line, f"{where}: both {keys[0]!r} and {keys[1]!r} keys", sorted(record)
        )
    key = keys[0] if keys else NEGATIVE_KEYS[0]
    value = record.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SourceFormatError(path, line, f"{where}: {key!r} is not a list of strings", value)
    return list(dict.fromkeys(value))


def _benchmark(
    path: Path, number: int, line: int, record: dict[str, Any], report: ReadReport
) -> Example:
    where = f"record {number}"
    for key in ("sentence", "entities"):
        if key not in record:
            raise SourceFormatError(path, line, f"{where}: no {key!r} key", sorted(record))
    sentence, entities = record["sentence"], record["entities"]
    if not isinstance(sentence, str):
        raise SourceFormatError(path, line, f"{where}: 'sentence' is not a string", sentence)
    if not isinstance(entities, list):
        raise SourceFormatError(path, line, f"{where}: 'entities' is not a list", entities)
    tokens, starts, ends = tokenize_with_offsets(sentence)
    spans: set[tuple[int, int, str]] = set()
    for entity in entities:
        if not isinstance(entity, dict) or not {"name", "type", "pos"} <= entity.keys():
            raise SourceFormatError(
                path, line, f"{where}: entity is not an object with name, type and pos", entity
            )
        pos, label = entity["pos"], entity["type"]
        if not (isinstance(pos, list) and len(pos) == 2 and all(_is_int(p) for p in pos)):
            raise SourceFormatError(
                path, line, f"{where}: entity pos is not [char_start, char_end]", entity
            )
        if not isinstance(label, str):
            raise SourceFormatError(path, line, f"{where}: entity type is not a string", entity)
        cs, ce = pos
        if not 0 <= cs < ce <= len(sentence):
            raise SourceFormatError(
                path,
                line,
                f"{where}: entity pos outside the sentence of {len(sentence)} characters "
                "(or empty)",
                entity,
            )
        # tokens overlapping [cs, ce): the first that ends after cs .. the last that starts before ce
        first, last = bisect_right(ends, cs), bisect_left(starts, ce) - 1
        if first > last:
            raise SourceFormatError(path, line, f"{where}: entity pos covers no token", entity)
        if starts[first] != cs or ends[last] != ce:
            report.add("char_spans_snapped")
        if entity["name"] != sentence[cs:ce]:
            report.add("entity_name_mismatch")
        _add(spans, (first, last + 1, label), report)
    return Example(tokens=tokens, spans=sorted(spans), line=line)


def _add(spans: set[tuple[int, int, str]], span: tuple[int, int, str], report: ReadReport) -> None:
    if span in spans:
        report.add("duplicate_spans")
    spans.add(span)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
