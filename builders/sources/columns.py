"""Column files: one token per line, a blank line between sentences (CoNLL style).

    EU      B-ORG          token first, tab or space separated (CrossNER, CoNLL-2003, Pile-NER BIO)
    B-GENRE comedy         label first (MIT Movie / Restaurant)
    -DOCSTART- -X- -X- O   document separators are skipped

Layout (`columns`): what each column holds, e.g. `token,tag`, `tag,token` or
`token,pos,chunk,tag` (any name other than `token` and `tag` is a column that is skipped and
named in the report). With `columns=auto` the tag column is found from the values (see
`layout.py`): the column whose values are all tags, so label-first and token-first files both
read right, and an ambiguous file is refused with a message that names `--columns`.

Tag schemes: BIO (`B-x`, `I-x`, `O`), BIOES (adds `E-x`, `S-x`) and IO (`I-x` or a bare type
such as Few-NERD's `person-artist/author`, and `O`). In IO, adjacent tokens of the same type
are one entity: two neighbouring entities of one type cannot be told apart and are merged,
which is why IO files have fewer mentions than their BIO originals.

Separators: a file whose first row has a tab is cut on tabs (and each cell stripped, so a tab
followed by spaces puts no spaces into tokens); otherwise on runs of whitespace.

Strictness: a row with the wrong number of columns, a tag outside the scheme, or `I-x` that
does not continue an `x` entity is an error naming the file, line and value. Some published
files are lax (`I-x` opening an entity); `repair=True` reads such an `I-x` as `B-x` and counts
the repaired tags in the read report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import ClassVar, Literal

from builders.errors import SourceFormatError
from builders.sources.base import Example, ReadReport, open_text
from builders.sources.layout import decide, detect_scheme, scan, splitter
from builders.sources.options import ReaderOptions, option

__all__ = ["Options", "detect_scheme", "read"]

_SEPARATORS = {"tab": "\t", "\\t": "\t", "space": " ", "whitespace": " "}


@dataclass(frozen=True)
class Options(ReaderOptions):
    columns: str = option(
        "auto",
        "what each column holds, comma-separated: token, tag, and any other name for a column "
        "to skip (token,pos,chunk,tag); auto: the column whose values are all tags",
    )
    scheme: Literal["auto", "bio", "bioes", "io"] = option(
        "auto", "tag scheme; auto: BIOES if a tag has E-/S-, else BIO if one has B-, else IO"
    )
    sep: str | None = option(
        None,
        "column separator: tab, space (any whitespace) or a character; default: tab if "
        "the first row has one, else whitespace",
    )
    repair: bool = option(False, "read an I-x that opens an entity as B-x, and count it")

    renamed: ClassVar[Mapping[str, str]] = MappingProxyType(
        {
            "token_col": "the layout is given with --columns, e.g. --columns tag,token",
            "tag_col": "the layout is given with --columns, e.g. --columns tag,token",
        }
    )

    def __post_init__(self) -> None:
        if self.sep is not None:
            sep = _SEPARATORS.get(self.sep.lower(), self.sep)
            if not sep or sep == "\n":
                raise ValueError(f"sep={self.sep!r}: give tab, space or one character")
            object.__setattr__(self, "sep", sep)
        if self.columns != "auto":
            roles = tuple(r.strip().lower() for r in self.columns.split(","))
            if any(not r for r in roles) or roles.count("token") != 1 or roles.count("tag") != 1:
                raise ValueError(
                    f"columns={self.columns!r}: name every column, exactly one 'token' and one "
                    "'tag' (e.g. token,tag or tag,token or token,pos,chunk,tag), or say auto"
                )
            object.__setattr__(self, "columns", ",".join(roles))

    @property
    def roles(self) -> tuple[str, ...] | None:
        return None if self.columns == "auto" else tuple(self.columns.split(","))


def read(path: Path, report: ReadReport, **options: object) -> Iterator[Example]:
    """Yield the sentences of one column file (options: see `Options`)."""
    opts: Options = Options.parse(options, "columns")
    roles, scheme = opts.roles, str(opts.scheme)
    if roles is None or scheme == "auto":
        only = () if roles is None else (roles.index("token"), roles.index("tag"))
        width, cols = scan(path, opts.sep, only)
        layout = decide(path, width, cols, roles, scheme)
        for text in layout.notes:
            report.note(text)
        token_col, tag_col, scheme = layout.token, layout.tag, layout.scheme
    else:
        token_col, tag_col = roles.index("token"), roles.index("tag")
    rows = 0
    tokens: list[str] = []
    tags: list[str] = []
    start_line = 0
    width = len(roles) if roles else 0
    cut: str | None = None
    first = True
    for number, line in open_text(path):
        if not line.strip():
            if tokens:
                yield _decode(path, start_line, tokens, tags, scheme, opts.repair, report)
                tokens, tags = [], []
            continue
        if line.startswith("-DOCSTART-"):
            continue
        if first:
            cut, first = splitter(line, opts.sep), False
        cells = line.split(cut)
        if not width:
            width = len(cells)
        if len(cells) != width or width < 2:
            raise _width_error(path, number, width, len(cells), line, opts.columns)
        if not tokens:
            start_line = number
        token = cells[token_col].strip()
        if not token:
            raise SourceFormatError(path, number, "empty token", line)
        tokens.append(token)
        tags.append(cells[tag_col].strip())
        rows += 1
    if tokens:
        yield _decode(path, start_line, tokens, tags, scheme, opts.repair, report)
    if width > 2 and rows:
        others = [i for i in range(width) if i not in (token_col, tag_col)]
        names = roles or tuple(f"column {i + 1}" for i in range(width))
        report.not_kept(path, "columns", Counter({names[i]: rows for i in others}))


def _width_error(
    path: Path, number: int, width: int, found: int, line: str, columns: str
) -> SourceFormatError:
    if width < 2:
        return SourceFormatError(path, number, "expected at least 2 columns (token and tag)", line)
    said = "" if columns == "auto" else f" (--columns {columns})"
    return SourceFormatError(path, number, f"expected {width} columns{said}, found {found}", line)


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
