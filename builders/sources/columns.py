"""Column files: one token per line, a blank line between sentences (CoNLL style).

    EU      B-ORG          token first, tab or space separated (CrossNER, CoNLL-2003, Pile-NER BIO)
    B-GENRE comedy         label first (MIT Movie / Restaurant)
    -DOCSTART- -X- -X- O   document separators are skipped
    # http://...  [2009]   comment lines before a sentence are skipped and counted (GermEval)
    1  Lehmbruck  B-OTH  B-PER   an index column and outer and nested tags (GermEval 2014)

`columns` says what each column holds (`token,pos,chunk,tag`; other names are skipped and
named in the report), or `auto` finds it (`layout.py`). A `#` line (a space or tab after it)
before a sentence is a comment, skipped and counted, unless it reads as a row of the file
(its width, a tag in the tag column, `1` in the index column); a file with both is refused.

Schemes: BIO, BIOES and IO (`I-x` or a bare type, Few-NERD's `person-artist/author`: adjacent
tokens of one type are one entity). Cells are cut on tabs if the first row has one, else on
whitespace; empty cells past the last column are dropped and counted. A bad row or tag, or an
`I-x` that continues no `x`, is an error naming the file, line and value and the option that
reads it (`repair=True` reads such an `I-x` as `B-x` and counts it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import ClassVar, Literal

from builders.errors import InvalidValue, SourceFormatError, reader_opt
from builders.sources.base import Example, ReadReport, counted
from builders.sources.layout import (
    BLANK,
    DOCSTART,
    HASH,
    Layout,
    cut_cells,
    decide,
    detect_scheme,
    first_cut,
    is_comment_like,
    is_tag,
    lines,
    scan,
    space_misfit,
    too_few,
)
from builders.sources.options import ReaderOptions, option

__all__ = ["Options", "detect_scheme", "read"]

#: options added after stores were written (left out of `as_dict` at their default)
_LATER = ("comments", "tags")

_SEPARATORS = {"tab": "\t", "\\t": "\t", "space": " ", "whitespace": " "}


def _given_with_columns() -> str:
    return f"the layout is given with {reader_opt('columns')}, e.g. " + reader_opt(
        "columns", "tag,token"
    )


@dataclass(frozen=True)
class Options(ReaderOptions):
    columns: str = option(
        "auto",
        "what each column holds, comma-separated: token, tag, and any other name for a column "
        "to skip (token,pos,chunk,tag); auto: found from the values (an index column is "
        "skipped, the column whose values are all tags holds the tags)",
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
    comments: Literal["auto", "skip", "none"] = option(
        "auto",
        "lines starting with '#' and a space or tab before a sentence: skip (comments, "
        "counted) or none (rows); auto: comments unless one reads as a row (then refused)",
    )
    tags: str = option(
        "auto",
        "the tag column when several hold tags (GermEval 2014): outer (the first), nested "
        "(the second) or a column number; auto: the only one, or the outer of nested ones",
    )

    renamed: ClassVar[Mapping[str, str | Callable[[], str]]] = MappingProxyType(
        {"token_col": _given_with_columns, "tag_col": _given_with_columns}
    )

    def __post_init__(self) -> None:
        if self.sep is not None:
            sep = _SEPARATORS.get(self.sep.lower(), self.sep)
            if not sep or sep == "\n":
                raise InvalidValue(f"sep={self.sep!r}: give tab, space or one character")
            object.__setattr__(self, "sep", sep)
        if self.columns != "auto":
            roles = tuple(r.strip().lower() for r in self.columns.split(","))
            if any(not r for r in roles) or roles.count("token") != 1 or roles.count("tag") != 1:
                raise InvalidValue(
                    f"columns={self.columns!r}: name every column, exactly one 'token' and one "
                    "'tag' (e.g. token,tag or tag,token or token,pos,chunk,tag), or say auto"
                )
            object.__setattr__(self, "columns", ",".join(roles))
        tags = self.tags.strip().lower()
        if tags not in ("auto", "outer", "nested") and not (tags.isdigit() and int(tags) > 0):
            raise InvalidValue(
                f"tags={self.tags!r}: give outer, nested, a column number (1, 2, ...) or auto"
            )
        if tags != "auto" and self.columns != "auto":
            raise InvalidValue(
                f"tags={self.tags} and columns={self.columns}: name the tag column once, "
                "with tags or with columns"
            )
        object.__setattr__(self, "tags", tags)

    def as_dict(self) -> dict[str, object]:
        """The options; `comments` and `tags` (added later) only when set, so that an input
        read before they existed keeps its fingerprint."""
        given = super().as_dict()
        return {k: v for k, v in given.items() if k not in _LATER or v != "auto"}

    @property
    def roles(self) -> tuple[str, ...] | None:
        return None if self.columns == "auto" else tuple(self.columns.split(","))


def read(path: Path, report: ReadReport, **options: object) -> Iterator[Example]:
    """Yield the sentences of one column file (options: see `Options`)."""
    opts: Options = Options.parse(options, "columns")
    layout = _layout(path, opts)
    for text in layout.notes:
        report.note(text)
    rows = _Rows(path, layout, opts)
    tokens: list[str] = []
    tags: list[str] = []
    start_line = 0
    for number, line, cells in rows:
        if cells is None:
            if tokens:
                yield _decode(path, start_line, tokens, tags, layout.scheme, opts.repair, report)
                tokens, tags = [], []
            continue
        if not tokens:
            start_line = number
        token = cells[layout.token].strip()
        if not token:
            raise SourceFormatError(path, number, "empty token", line)
        tokens.append(token)
        tags.append(cells[layout.tag].strip())
    if tokens:
        yield _decode(path, start_line, tokens, tags, layout.scheme, opts.repair, report)
    rows.finish(report)


def _layout(path: Path, opts: Options) -> Layout:
    """The columns, scheme and separator: from the evidence (`layout.py`), or as given."""
    roles, scheme = opts.roles, str(opts.scheme)
    if roles is None or scheme == "auto":
        only = () if roles is None else (roles.index("token"), roles.index("tag"))
        return decide(path, scan(path, opts.sep, only), roles, scheme, opts.tags)
    token, tag = roles.index("token"), roles.index("tag")
    return Layout(token, tag, scheme, (), len(roles), first_cut(path, opts.sep), roles)


class _Rows:
    """The rows of one file as (line number, line, cells), a blank line as cells None."""

    def __init__(self, path: Path, layout: Layout, opts: Options):
        self.path, self.layout, self.opts = path, layout, opts
        self.rows = 0
        self.comments, self.first_comment = 0, 0
        self.as_row: tuple[int, str] | None = None  # the first comment-like line read as a row
        self.trailing, self.first_trailing = 0, 0

    def __iter__(self) -> Iterator[tuple[int, str, list[str] | None]]:
        for number, line, kind in lines(self.path):
            if kind == BLANK:
                yield number, line, None
            elif kind != DOCSTART and not (kind == HASH and self._comment(number, line)):
                yield number, line, self._cells(number, line, kind == HASH)

    def _comment(self, number: int, line: str) -> bool:
        """Whether a comment-like line before a sentence is a comment (see the docstring)."""
        mode = self.opts.comments
        if mode == "none":
            return False
        row = mode == "auto" and self._reads_as_row(line)
        if row:
            self.as_row = self.as_row or (number, line)
        else:
            self.comments += 1
            self.first_comment = self.first_comment or number
        if self.as_row and self.first_comment:
            raise SourceFormatError(
                self.path,
                self.as_row[0],
                "this line starts like a comment ('#' and a space or tab, before a sentence) "
                f"but reads as a row of the file, while line {self.first_comment} is a comment; "
                f"{reader_opt('comments', 'skip')} skips every such line, "
                f"{reader_opt('comments', 'none')} reads them all as rows",
                self.as_row[1],
            )
        return not row

    def _reads_as_row(self, line: str) -> bool:
        lay = self.layout
        cells = cut_cells(line, lay.cut, lay.width)[0]
        if len(cells) != lay.width or lay.width < 2:
            return False
        value = cells[lay.tag].strip()
        if not (is_tag(value) or value in lay.known):
            return False
        return lay.index is None or cells[lay.index].strip() == "1"

    def _cells(self, number: int, line: str, hashed: bool) -> list[str]:
        lay = self.layout
        cells, trimmed = cut_cells(line, lay.cut, lay.width)
        if trimmed:
            self.trailing += 1
            self.first_trailing = self.first_trailing or number
        if len(cells) != lay.width or lay.width < 2:
            raise _width_error(self.path, number, lay, len(cells), line, self.opts, hashed)
        self.rows += 1
        return cells

    def finish(self, report: ReadReport) -> None:
        """Count and name what was read past: comments, trailing cells, unread columns."""
        lay, name = self.layout, self.path.name
        if self.comments:
            report.add("comment_lines_skipped", self.comments)
            report.note(
                f"{name}: {counted(self.comments, 'comment line')} skipped ('#' and a space or tab "
                f"before a sentence; the first: line {self.first_comment}); -o comments=none "
                "reads them as rows"
            )
        if self.trailing:
            report.add("trailing_empty_cells", self.trailing)
            report.note(
                f"{name}: {counted(self.trailing, 'row')} ended in empty cells past column {lay.width} "
                f"(a trailing separator; the first: line {self.first_trailing}); read without them"
            )
        if lay.width > 2 and self.rows:
            others = [i for i in range(lay.width) if i not in (lay.token, lay.tag)]
            report.not_kept(
                self.path, "columns", Counter({_unread_name(lay, i): self.rows for i in others})
            )


def _unread_name(layout: Layout, i: int) -> str:
    """A column not read, as the report names it: its `--columns` name, or its number."""
    if not layout.detected:
        return layout.names[i]
    role = layout.names[i] if i < len(layout.names) else "-"
    return f"column {i + 1}" + ("" if role == "-" else f" ({role})")


def _width_error(
    path: Path, number: int, layout: Layout, found: int, line: str, opts: Options, hashed: bool
) -> SourceFormatError:
    width = layout.width
    if width < 2:
        return SourceFormatError(path, number, too_few(), line)
    said = "" if opts.columns == "auto" else f" ({reader_opt('columns', opts.columns)})"
    message = f"expected {width} columns{said}, found {found}"
    if hashed:
        message += (
            f"; {reader_opt('comments', 'skip')} skips the lines starting with '#' before a "
            "sentence"
        )
    elif is_comment_like(line):
        message += "; a line starting with '#' is a comment only before a sentence's first row"
    elif layout.cut == "\t" and "\t" not in line:
        misfit = space_misfit(path, width)
        message += ": this row has no tab, and the file's rows are cut on tabs; " + (
            f"{reader_opt('sep', 'space')} cuts every row on runs of spaces and tabs, which "
            f"reads every row of this file into {width} columns"
            if misfit is None
            else f"{reader_opt('sep', 'space')} would not read the file either (line "
            f"{misfit[0]} would have {misfit[1]} columns)"
        )
    return SourceFormatError(path, number, message, line)


def _decode(
    path: Path,
    first_line: int,
    tokens: list[str],
    tags: list[str],
    scheme: str,
    repair: bool,
    report: ReadReport,
) -> Example:
    """One sentence's tags as (start, stop, label) spans, validated."""
    if scheme == "io":
        return Example(tokens=tokens, spans=_decode_io(path, first_line, tags), line=first_line)
    spans = _decode_bio(path, first_line, tags, scheme, repair, report)
    return Example(tokens=tokens, spans=spans, line=first_line)


def _decode_io(path: Path, first_line: int, tags: list[str]) -> list[tuple[int, int, str]]:
    """IO: a run of one type is one entity (neighbours of one type merge)."""
    spans: list[tuple[int, int, str]] = []
    open_label: str | None = None
    open_start = 0
    for i, tag in enumerate(tags):
        label = None
        if tag != "O":
            prefix, label = _split_tag(tag, "io")
            if prefix is None or not label:
                raise SourceFormatError(path, first_line + i, _bad_tag_message("io", tag), tag)
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
    """BIO and BIOES; an I-/E- that does not continue its type is an error, or with `repair`
    a new entity."""
    spans: list[tuple[int, int, str]] = []
    bioes = scheme == "bioes"
    open_label: str | None = None
    open_start, open_kind = 0, ""  # prefix of the token that opened/continued the entity

    def fail(i: int, message: str) -> SourceFormatError:
        return SourceFormatError(path, first_line + i, message, tags[i])

    for i, tag in enumerate(tags):
        prefix, label = ("O", "") if tag == "O" else _split_tag(tag, scheme)
        if prefix is None or (prefix != "O" and not label):
            raise fail(i, _bad_tag_message(scheme, tag))
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
                    i,
                    f"{prefix}- tag {what} (expected B-{label}; use repair to read it as B-, "
                    f"with {reader_opt('repair', True)})",
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


def _bad_tag_message(scheme: str, tag: str) -> str:
    message = {
        "bio": "tag is not O, B-<type> or I-<type>",
        "bioes": "tag is not O, B-, I-, E- or S-<type>",
        "io": "tag is not O, I-<type> or a bare type",
    }[scheme]
    if scheme == "bio" and tag[:2] in ("E-", "S-"):
        message += f" ({reader_opt('scheme', 'bioes')} reads E- and S- tags)"
    elif scheme == "io" and tag[:2] in ("B-", "E-", "S-"):
        message += (
            f" ({reader_opt('scheme', 'bio' if tag[0] == 'B' else 'bioes')} reads {tag[:2]} tags)"
        )
    return message
