"""Column files: one token per line, a blank line between sentences (CoNLL style).

    EU      B-ORG          token-first, tab or space separated (CrossNER, CoNLL-2003, Pile-NER BIO)
    B-GENRE comedy         label-first (MIT Movie / Restaurant)
    -DOCSTART- -X- -X- O   document separators are skipped

Tag schemes: BIO (`B-x`, `I-x`, `O`), BIOES (adds `E-x`, `S-x`) and IO (`I-x` or a bare type
such as Few-NERD's `person-artist/author`, and `O`). In IO, adjacent tokens of the same type
are one entity: two neighbouring entities of one type cannot be told apart and are merged,
which is why IO files have fewer mentions than their BIO originals.

Strictness: a row with the wrong number of columns, a tag outside the scheme, or `I-x` that
does not continue an `x` entity is an error naming the file, line and value. Some published
files are lax (`I-x` opening an entity); `repair=True` reads such an `I-x` as `B-x` and counts
the repaired tags in the read report.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from builders.errors import SourceFormatError
from builders.sources.base import Example, ReadReport, open_text

SCHEMES = ("auto", "bio", "bioes", "io")


def read(
    path: Path,
    report: ReadReport,
    *,
    token_col: int = 0,
    tag_col: int = -1,
    scheme: str = "auto",
    sep: str | None = None,
    columns: int | None = None,
    repair: bool = False,
    **unused: object,
) -> Iterator[Example]:
    """Yield the sentences of one column file.

    Args:
        token_col, tag_col: column indices of the token and the tag (negative counts from the end).
        scheme: `bio`, `bioes`, `io`, or `auto` (IO when no tag has a B-/E-/S- prefix, BIOES
            when one has E-/S-, else BIO; decided per file from its tags).
        sep: column separator; default: tab if the line has one, else any whitespace.
        columns: expected number of columns; default: the first row's count.
        repair: read an `I-x` that opens an entity as `B-x` (counted as `repaired_tags`).
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown tag scheme {scheme!r}; valid: {', '.join(SCHEMES)}")
    if scheme == "auto":
        scheme = _detect_scheme(path, tag_col, sep)
        report.note(f"{path.name}: tag scheme detected as {scheme.upper()}")
    tokens: list[str] = []
    tags: list[str] = []
    start_line = 0
    width = columns
    for number, line in open_text(path):
        if not line.strip():
            if tokens:
                yield _decode(path, start_line, tokens, tags, scheme, repair, report)
                tokens, tags = [], []
            continue
        if line.startswith("-DOCSTART-"):
            continue
        cells = line.split(sep) if sep else (line.split("\t") if "\t" in line else line.split())
        if width is None:
            width = len(cells)
            if width < 2:
                raise SourceFormatError(
                    path, number, "expected at least 2 columns (token and tag)", line
                )
        if len(cells) != width:
            raise SourceFormatError(
                path, number, f"expected {width} columns, found {len(cells)}", line
            )
        if not tokens:
            start_line = number
        tokens.append(cells[token_col])
        tags.append(cells[tag_col].strip())
    if tokens:
        yield _decode(path, start_line, tokens, tags, scheme, repair, report)


def _detect_scheme(path: Path, tag_col: int, sep: str | None) -> str:
    return detect_scheme(_file_tags(path, tag_col, sep))


def _file_tags(path: Path, tag_col: int, sep: str | None) -> Iterator[str]:
    for _, line in open_text(path):
        if not line.strip() or line.startswith("-DOCSTART-"):
            continue
        cells = line.split(sep) if sep else (line.split("\t") if "\t" in line else line.split())
        if len(cells) >= 2:
            yield cells[tag_col].strip()


def detect_scheme(tags: Iterable[str]) -> str:
    """BIOES if a tag has an E-/S- prefix, else BIO if one has B-, else IO."""
    prefixes: set[str] = set()
    for tag in tags:
        if len(tag) > 2 and tag[1] == "-" and tag[0] in "BIES":
            prefixes.add(tag[0])
    if prefixes & {"E", "S"}:
        return "bioes"
    if "B" in prefixes:
        return "bio"
    return "io"


def _decode(
    path: Path,
    first_line: int,
    tokens: list[str],
    tags: list[str],
    scheme: str,
    repair: bool,
    report: ReadReport,
) -> Example:
    """Turn one sentence's tags into (start, stop, label) spans, validating as we go."""
    decode = _decode_io if scheme == "io" else _decode_bio
    spans = decode(path, first_line, tags, scheme, repair, report)
    return Example(tokens=tokens, spans=spans, line=first_line)


def _decode_io(
    path: Path, first_line: int, tags: list[str], scheme: str, repair: bool, report: ReadReport
) -> list[tuple[int, int, str]]:
    """IO: a run of one type is one entity (neighbours of one type merge)."""
    spans: list[tuple[int, int, str]] = []
    open_label: str | None = None
    open_start = 0
    for i, tag in enumerate(tags):
        label = None
        if tag != "O":
            prefix, label = _split_tag(tag, scheme)
            if prefix is None or not label:
                raise SourceFormatError(path, first_line + i, _bad_tag_message(scheme), tag)
        if label == open_label:
            continue
        if open_label is not None:
            spans.append((open_start, i, open_label))
        open_label, open_start = label, i
    if open_label is not None:
        spans.append((open_start, len(tags), open_label))
    return spans


def _decode_bio(
    path: Path, first_line: int, tags: list[str], scheme: str, repair: bool, report: ReadReport
) -> list[tuple[int, int, str]]:
    """BIO and BIOES: B- (or S-) opens an entity, I- (and E-) continue it; BIOES closes with
    E-. An I-/E- that does not continue its type is an error, or with `repair` a new entity."""
    spans: list[tuple[int, int, str]] = []
    bioes = scheme == "bioes"
    open_label: str | None = None
    open_start, open_kind = 0, ""  # prefix of the token that opened/continued the entity

    def fail(i: int, message: str) -> SourceFormatError:
        return SourceFormatError(path, first_line + i, message, tags[i])

    for i, tag in enumerate(tags):
        prefix, label = ("O", "") if tag == "O" else _split_tag(tag, scheme)
        if prefix is None or (prefix != "O" and not label):
            raise fail(i, _bad_tag_message(scheme))
        if prefix in ("O", "B", "S"):
            if open_label is not None:
                if bioes:
                    before = "O" if prefix == "O" else f"{prefix}-"
                    raise fail(i, f"BIOES entity {open_label!r} not closed by E- before {before}")
                spans.append((open_start, i, open_label))
                open_label = None
            if prefix == "S":
                spans.append((i, i + 1, label))
            elif prefix == "B":
                open_label, open_start, open_kind = label, i, prefix
            continue
        if open_label != label:  # I- or E- that does not continue its type
            if not repair:
                what = (
                    "after O" if open_label is None else f"after an entity of type {open_label!r}"
                )
                raise fail(
                    i, f"{prefix}- tag {what} (expected B-{label}; use repair to read it as B-)"
                )
            report.add("repaired_tags")
            if open_label is not None:
                spans.append((open_start, i, open_label))
            open_label, open_start = label, i
        if prefix == "E":
            spans.append((open_start, i + 1, label))
            open_label = None
        else:
            open_kind = prefix
    if open_label is not None:
        if bioes and open_kind != "E":
            raise fail(len(tags) - 1, f"BIOES entity {open_label!r} not closed by E-")
        spans.append((open_start, len(tags), open_label))
    return spans


def _split_tag(tag: str, scheme: str) -> tuple[str | None, str]:
    if len(tag) > 2 and tag[1] == "-" and tag[0] in "BIES":
        prefix = tag[0]
        allowed = {"bio": "BI", "bioes": "BIES", "io": "I"}[scheme]
        return (prefix if prefix in allowed else None), tag[2:].strip()
    if scheme == "io":
        return "I", tag
    return None, ""


def _bad_tag_message(scheme: str) -> str:
    return {
        "bio": "tag is not O, B-<type> or I-<type>",
        "bioes": "tag is not O, B-, I-, E- or S-<type>",
        "io": "tag is not O, I-<type> or a bare type",
    }[scheme]
