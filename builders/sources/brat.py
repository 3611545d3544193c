"""brat standoff (brat, INCEpTION): a document `NAME.txt` and its `NAME.ann`, one unit.

`T` lines (`T1<TAB>Person 473 496<TAB>Raul Salinas de Gortari`: character offsets, end
exclusive) are entities. The document is cut into sentences at line breaks and after `.!?`
before white space, never inside an entity (`sentence_breaks_inside_entities`), and into
GLiNER's words (`base.tokenize_with_offsets`), cut where an entity starts or ends inside one
(`tokens_split_at_entity_boundaries`). Nested entities are kept (`duplicate_spans`: one of
two identical). What the span store cannot hold is counted by kind (`relations_not_kept`, for
R, E, A and M, N, #, *, discontinuous `START END;START END` entities and events' trigger `T`s).
An entity text that is not the `.txt` at its offsets, offsets outside it, or a line of no brat
kind is an error naming the `.ann`, the line and the value.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from builders.errors import SourceFormatError
from builders.sources.base import Example, FileGroup, ReadReport, open_text, read_text
from builders.sources.base import tokenize_with_offsets as words
from builders.sources.options import ReaderOptions

#: the files of one unit: the document, then its annotations
PAIRED = (".txt", ".ann")
#: what the span store cannot hold, by the id's first character
NOT_KEPT = {"R": "relations", "E": "events", "A": "attributes", "M": "attributes"}
NOT_KEPT |= {"N": "normalisations", "#": "notes", "*": "equivalences"}
_BREAK = re.compile(r"[.!?]+(?=\s)|\n")
_OFFSETS = re.compile(r"\d+ \d+(;\d+ \d+)*")


@dataclass(frozen=True)
class Options(ReaderOptions):
    """brat standoff takes no options."""


def read(unit: FileGroup, report: ReadReport, **options: object) -> Iterator[Example]:
    """Yield the sentences of one brat document with their entities (see the module)."""
    Options.parse(options, "brat")
    txt, ann = unit.files
    text = read_text(txt, bom_as=" ")  # brat counts a byte-order mark in its offsets
    entities, lost = _entities(ann, text)
    for kind, n in sorted(lost.items()):
        report.add(f"{kind.replace(' ', '_')}_not_kept", n)
    if lost:
        report.note("brat annotations the span store cannot hold: counted by kind (KIND_not_kept)")
    inside = bytearray(len(text) + 1)  # 1 where a sentence may not end
    for start, end, _ in entities:
        inside[start + 1 : end] = b"\1" * max(end - start - 1, 0)
    cuts = [0]
    for m in _BREAK.finditer(text):
        if inside[m.end()]:
            report.add("sentence_breaks_inside_entities")
        else:
            cuts.append(m.end())
    cuts.append(len(text))
    bounds = sorted({o for s, e, _ in entities for o in (s, e)})
    entities.sort()  # a sentence's entities are a slice by start: no scan per sentence
    firsts = [start for start, _, _ in entities]
    line, counted = 1, 0  # the line of offset `counted`, counted on as sentences go
    for a, b in pairwise(cuts):
        tokens, starts, ends = _tokens(text, a, b, bounds, report)
        if not tokens:
            continue
        spans: set[tuple[int, int, str]] = set()
        for start, end, label in entities[bisect_left(firsts, a) : bisect_left(firsts, b)]:
            span = (bisect_right(ends, start), bisect_left(starts, end), label)
            report.keep(spans, span, "duplicate_spans")
        line, counted = line + text.count("\n", counted, a), a
        yield Example(tokens, sorted(spans), line=line, raw_id=f"{txt.stem}@{starts[0]}")


def _tokens(
    text: str, a: int, b: int, bounds: list[int], report: ReadReport
) -> tuple[list[str], list[int], list[int]]:
    """The words of text[a:b] with their offsets in the document, cut at entity bounds."""
    tokens: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for token, s, e in zip(*words(text[a:b]), strict=True):
        s, e = s + a, e + a
        cuts = bounds[bisect_right(bounds, s) : bisect_left(bounds, e)]
        if cuts:
            report.add("tokens_split_at_entity_boundaries", len(cuts))
        for x, y in zip([s, *cuts], [*cuts, e], strict=True):
            tokens.append(token[x - s : y - s])
            starts.append(x)
            ends.append(y)
    return tokens, starts, ends


def _entities(path: Path, text: str) -> tuple[list[tuple[int, int, str]], Counter[str]]:
    """The continuous entities of an `.ann` file as (start, end, type), checked against the
    text; what is not kept, counted by kind."""
    found: dict[str, tuple[int, int, str]] = {}
    triggers: set[str] = set()
    lost: Counter[str] = Counter()
    for number, line in open_text(path):
        if not line.strip():
            continue
        kind, fields = line[:1], line.split("\t")
        if kind == "E" and len(fields) > 1:
            triggers.add(fields[1].split(" ")[0].partition(":")[2])
        if kind in NOT_KEPT:
            lost[NOT_KEPT[kind]] += 1
            continue
        if kind != "T" or len(fields) != 3 or " " not in fields[1]:
            raise SourceFormatError(path, number, "not a brat annotation line", line)
        label, _, offsets = fields[1].partition(" ")
        if not _OFFSETS.fullmatch(offsets):
            raise SourceFormatError(path, number, "entity offsets are not START END", offsets)
        parts = [tuple(map(int, p.split(" "))) for p in offsets.split(";")]
        if any(not 0 <= s < e <= len(text) for s, e in parts):
            raise SourceFormatError(
                path, number, f"entity outside its .txt of {len(text)} characters", offsets
            )
        spelled = " ".join(text[s:e] for s, e in parts)
        if fields[2] != spelled and fields[2] != spelled.replace("\n", " "):
            raise SourceFormatError(
                path, number, f"entity text is not the .txt at {offsets} ({spelled!r})", fields[2]
            )
        if len(parts) > 1:
            lost["discontinuous entities"] += 1
        else:
            (start, end), *_ = parts
            found[fields[0]] = (start, end, label)
    for name in triggers & found.keys():
        lost["event triggers"] += 1
        del found[name]
    return list(found.values()), lost
