"""GLiNER json, in its two shapes (detected per file from the first record):

    training:  [{"tokenized_text": ["Ada", "wrote", ...], "ner": [[0, 0, "person"], ...],
                 "ner_negatives": ["city"],               (ner end inclusive; "negatives"
                 "negative_ner": [[2, 2, "city"]]}, ...]   and "negative" are read too)
    benchmark: [{"sentence": "Ada wrote ...", "entities": [{"name": "Ada", "type": "person",
                 "pos": [0, 3]}]}, ...]                   (character offsets, end exclusive)

Training spans become (start, end + 1, label). Label-level negatives are kept (the keys of
`NEGATIVE_KEYS`), and span-level ones under `negative_ner` (this span is NOT a `label`, as LLM
annotation pipelines write hard negatives); one equal to a mention is dropped and counted.
Record keys the reader does not use (`ner_labels`, `relations`, ...) are counted and named.

Benchmark sentences are split on whitespace, as GLiNER's evaluation does, which gives back the
benchmark's own tokens (CrossNER AI test: 431 of 431 sentences; 349 with GLiNER's inference
regex), and a character span becomes the tokens it overlaps (METHOD.md section 9). GLiNER's
conversion placed an entity at the first `str.find` of its name, sometimes inside another word
("r" in "are": 95 of mit-movie test's 5,338): once every entity is placed, such a one moves to
the first later tokens that spell its name and overlap no placed span
(`char_spans_moved_to_whole_words`), else it is snapped outwards (`char_spans_snapped`). An
entity whose `name` is not its `sentence[start:end]` is counted (`entity_name_mismatch`), never
moved; a span no token overlaps is an error; a sentence not single-spaced is counted
(`sentences_not_single_spaced`). The conversion from BIO also dropped an entity that ends a
sentence with no final punctuation (5 of CrossNER AI test's 1,809): the data, read as it is.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builders.sources.base import Example, ReadReport, split_with_offsets
from builders.sources.jsonfile import Record, json_records
from builders.sources.options import ReaderOptions

#: keys holding label-level negatives: GLiNER's processor reads `ner_negatives`, its
#: `data/process_pilener.py` writes `negative`, other converters `negatives`
NEGATIVE_KEYS = ("ner_negatives", "negatives", "negative")
#: span-level negatives, [start, end, label] with an inclusive end like `ner`
NEGATIVE_SPANS_KEY = "negative_ner"
TRAINING_KEYS = ("tokenized_text", "ner", NEGATIVE_SPANS_KEY, *NEGATIVE_KEYS)
BENCHMARK_KEYS = ("sentence", "entities")
ENTITY_KEYS = ("name", "type", "pos")


@dataclass(frozen=True)
class Options(ReaderOptions):
    """GLiNER json takes no options: its shape is detected from the first record."""


def read(path: Path, report: ReadReport, **options: object) -> Iterator[Example]:
    """Yield one example per record of a GLiNER training or benchmark json file."""
    Options.parse(options, "gliner")
    shape: str | None = None
    unread = Counter[str]()
    for rec, record in json_records(path):
        if not isinstance(record, dict):
            raise rec.error("expected an object", record)
        if shape is None:
            shape = _detect(rec, record)
            report.note(f"{path.name}: GLiNER {shape} json")
        if shape == "training":
            unread.update(k for k in record if k not in TRAINING_KEYS)
            yield _training(rec, record, report)
        else:
            unread.update(k for k in record if k not in BENCHMARK_KEYS)
            yield _benchmark(rec, record, report, unread)
    report.not_kept(path, "record keys", unread)


def _detect(rec: Record, record: dict[str, Any]) -> str:
    if "tokenized_text" in record:
        return "training"
    if "sentence" in record:
        return "benchmark"
    raise rec.error(
        "neither GLiNER training ('tokenized_text', 'ner') nor benchmark "
        "('sentence', 'entities') json; keys",
        sorted(record),
    )


def _training(rec: Record, record: dict[str, Any], report: ReadReport) -> Example:
    for key in ("tokenized_text", "ner"):
        if key not in record:
            raise rec.error(f"no {key!r} key", sorted(record))
    tokens = record["tokenized_text"]
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise rec.error("'tokenized_text' is not a list of strings", tokens)
    spans = _token_spans(rec, record["ner"], "ner", len(tokens), report, "duplicate_spans")
    key = NEGATIVE_SPANS_KEY
    negative_spans = _token_spans(
        rec, record.get(key, []), key, len(tokens), report, "duplicate_negative_spans"
    )
    both = negative_spans & spans
    if both:  # a span both is and is not of a type: keep the mention, count the clash
        report.add("negative_spans_also_mentions_dropped", len(both))
        negative_spans -= both
    return Example(
        tokens=tokens,
        spans=sorted(spans),
        negatives=_negatives(rec, record),
        negative_spans=sorted(negative_spans),
        line=rec.line,
        record=rec.number,
    )


def _token_spans(
    rec: Record, items: object, key: str, n: int, report: ReadReport, duplicates: str
) -> set[tuple[int, int, str]]:
    """`[start, end, label]` items (end inclusive) as (start, end + 1, label)."""
    if not isinstance(items, list):
        raise rec.error(f"{key!r} is not a list", items)
    spans: set[tuple[int, int, str]] = set()
    for triple in items:
        if not isinstance(triple, list) or len(triple) != 3:
            raise rec.error(f"{key} item is not [start, end, label]", triple)
        start, end, label = triple
        if not (_is_int(start) and _is_int(end)):
            raise rec.error(f"{key} offsets are not integers", triple)
        if not isinstance(label, str):
            raise rec.error(f"{key} label is not a string", triple)
        if end < start:
            raise rec.error(f"{key} end before start (end is inclusive)", triple)
        if start < 0 or end >= n:
            raise rec.error(
                f"{key} span outside the {n} tokens of 'tokenized_text' (end is inclusive)", triple
            )
        report.keep(spans, (start, end + 1, label), duplicates)
    return spans


def _negatives(rec: Record, record: dict[str, Any]) -> list[str]:
    present = [k for k in NEGATIVE_KEYS if k in record]
    if len(present) > 1:
        raise rec.error(
            "label-level negatives under several keys (" + ", ".join(present) + ")", sorted(record)
        )
    if not present:
        return []
    value = record[present[0]]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise rec.error(f"{present[0]!r} is not a list of strings", value)
    return list(dict.fromkeys(value))


def _benchmark(
    rec: Record, record: dict[str, Any], report: ReadReport, unread: Counter[str]
) -> Example:
    for key in BENCHMARK_KEYS:
        if key not in record:
            raise rec.error(f"no {key!r} key", sorted(record))
    sentence, entities = record["sentence"], record["entities"]
    if not isinstance(sentence, str):
        raise rec.error("'sentence' is not a string", sentence)
    if not isinstance(entities, list):
        raise rec.error("'entities' is not a list", entities)
    tokens, starts, ends = split_with_offsets(sentence)
    if sentence != " ".join(tokens):  # GLiNER's evaluation assumes single spaces between words
        report.add("sentences_not_single_spaced")
    spans: set[tuple[int, int, str]] = set()
    inside: list[tuple[int, int, str, list[str]]] = []  # found inside a word: placed last
    for entity in entities:
        if not isinstance(entity, dict) or not set(ENTITY_KEYS) <= entity.keys():
            raise rec.error("entity is not an object with name, type and pos", entity)
        unread.update(f"entities[].{k}" for k in entity if k not in ENTITY_KEYS)
        pos, label, name = entity["pos"], entity["type"], entity["name"]
        if not (isinstance(pos, list) and len(pos) == 2 and all(_is_int(p) for p in pos)):
            raise rec.error("entity pos is not [char_start, char_end]", entity)
        if not isinstance(label, str) or not isinstance(name, str):
            raise rec.error("entity type or name is not a string", entity)
        cs, ce = pos
        if not 0 <= cs < ce <= len(sentence):
            raise rec.error(
                f"entity pos outside the sentence of {len(sentence)} characters (or empty)", entity
            )
        # tokens overlapping [cs, ce): the first that ends after cs .. the last that starts before ce
        first, last = bisect_right(ends, cs), bisect_left(starts, ce) - 1
        if first > last:
            raise rec.error("entity pos covers no token", entity)
        named = name == sentence[cs:ce]
        if not named:
            report.add("entity_name_mismatch")
        if starts[first] != cs or ends[last] != ce:
            if named:  # GLiNER's conversion found the name inside another word
                inside.append((first, last, label, name.split()))
                continue
            report.add("char_spans_snapped")
        report.keep(spans, (first, last + 1, label), "duplicate_spans")
    for first, last, label, words in inside:  # after every aligned entity is in place
        later = _later_whole_words(tokens, words, first + 1, spans)
        if later is None:
            report.add("char_spans_snapped")
        else:
            first, last = later
            report.add("char_spans_moved_to_whole_words")
        report.keep(spans, (first, last + 1, label), "duplicate_spans")
    return Example(tokens=tokens, spans=sorted(spans), line=rec.line, record=rec.number)


def _later_whole_words(
    tokens: list[str], words: list[str], start: int, spans: set[tuple[int, int, str]]
) -> tuple[int, int] | None:
    """(first, last) inclusive of the first tokens from `start` on that spell `words` and
    overlap no span placed yet, else of the first that spell them at all (a duplicate then),
    else None (see the module)."""
    n = len(words)
    hits = [i for i in range(start, len(tokens) - n + 1) if tokens[i : i + n] == words]
    if not hits:
        return None
    free = (i for i in hits if not any(a < i + n and i < b for a, b, _ in spans))
    best = next(free, hits[0])
    return best, best + n - 1


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
