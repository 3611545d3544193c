"""Which column of a column file holds the tags, and in which scheme: decided from evidence.

One pass collects, per column, whether every value is a tag (`O` or `B-`/`I-`/`E-`/`S-<type>`),
the tag prefixes and the values, and whether the first column numbers each sentence's tokens
(`1` ... `n`: an index, neither tokens nor tags). Comment-like lines (`#` and a space or tab
before a sentence) are no evidence; the reader decides what they are (`columns.py`).

- **Layout** (`columns=auto`): the tag column is the one column whose every value is a tag,
  else (IO with bare types, `person-artist/author`) the one whose most frequent value is `O`;
  with two columns the other holds the tokens. Several tag columns are read only as levels of
  one annotation: an index, one column of words, and tag columns whose types are all the
  first's (GermEval 2014's outer and nested tags): the outer is read, the others named in a
  note (`tags=nested` or a column number reads another). Anything else (CoNLL's chunk and NER
  columns, several columns of words, none of tags) is refused, naming `--columns` or `-o tags=`.
- **Scheme** (`scheme=auto`): BIOES if a tag has `E-`/`S-`, else BIO if one has `B-`, else IO.
- **IO sanity**: a column read as IO by detection is refused when the token column holds only
  tags (swapped columns) or it has more distinct values than the token column (a label-first
  file read token first, whose "types" would be `the`, `a`, ...). `scheme=io` skips the check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path

from builders.errors import AmbiguousFormat, SourceFormatError, reader_opt
from builders.sources.base import open_text

TAG_PREFIXES = "BIES"

#: the kinds of lines `lines` tells apart
BLANK, DOCSTART, HASH, ROW = "blank", "docstart", "hash", "row"


def too_few() -> str:
    """The refusal of a row with fewer than two columns (naming the separator option)."""
    return (
        "expected at least 2 columns (token and tag), cut by tabs or spaces; "
        f"{reader_opt('sep', 'CHAR')} reads columns cut by another character"
    )


def is_tag(value: str) -> bool:
    """`O` or `X-type` with X one of B, I, E, S: a tag of the BIO family, whatever the scheme."""
    return value == "O" or (len(value) > 2 and value[1] == "-" and value[0] in TAG_PREFIXES)


def prefixes(values: Iterable[str]) -> set[str]:
    """The tag prefixes (B, I, E, S) among `values`."""
    return {v[0] for v in values if len(v) > 2 and v[1] == "-" and v[0] in TAG_PREFIXES}


def detect_scheme(tags: Iterable[str]) -> str:
    return scheme_of(prefixes(tags))


def scheme_of(prefixes: set[str]) -> str:
    """BIOES if a tag has an E-/S- prefix, else BIO if one has B-, else IO."""
    if prefixes & {"E", "S"}:
        return "bioes"
    if "B" in prefixes:
        return "bio"
    return "io"


def is_comment_like(line: str) -> bool:
    """`#` alone, or followed by a space or tab: what a comment line looks like."""
    return line.startswith("#") and (len(line) == 1 or line[1].isspace())


def lines(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line number, line, kind) of every line; kind: BLANK, DOCSTART (`-DOCSTART-`), HASH (a
    comment-like line before a sentence's first row) or ROW."""
    fresh = True
    for number, line in open_text(path):
        if not line.strip():
            fresh = True
            yield number, line, BLANK
        elif line.startswith("-DOCSTART-"):
            yield number, line, DOCSTART
        elif fresh and is_comment_like(line):
            yield number, line, HASH
        else:
            fresh = False
            yield number, line, ROW


def cut_cells(line: str, cut: str | None, width: int) -> tuple[list[str], bool]:
    """The cells of a row, and whether empty cells past `width` were dropped: a trailing
    separator (GermEval 2014's `1<TAB>"<TAB>O<TAB>O<TAB>`) adds an empty cell, nothing else."""
    cells = line.split(cut)
    if cut is not None and 0 < width < len(cells) and not "".join(cells[width:]).strip():
        return cells[:width], True
    return cells, False


def row_width(line: str, cut: str | None) -> int:
    """The number of columns a (first) row has, trailing empty cells past the second left out."""
    cells = line.split(cut)
    while cut is not None and len(cells) > 2 and not cells[-1].strip():
        cells.pop()
    return len(cells)


def first_cut(path: Path, sep: str | None) -> str | None:
    """The separator `str.split` cuts the rows with: `sep`, None (runs of whitespace) for a
    space; unset, a tab if the file's first row (without rows, its first comment-like line)
    has one. Callers strip the cells they use, so `tag<TAB> token` gives `token`."""
    if sep is not None:
        return None if sep == " " else sep
    hashed = ""
    for _, line, kind in lines(path):
        if kind == ROW:
            return "\t" if "\t" in line else None
        if kind == HASH and not hashed:
            hashed = line
    return "\t" if "\t" in hashed else None


def space_misfit(path: Path, width: int) -> tuple[int, int] | None:
    """(line, columns) of the first row that does not have `width` columns when cut on runs
    of whitespace (`sep=space`), or None when every row has."""
    for number, line, kind in lines(path):
        if kind == ROW and len(line.split()) != width:
            return number, len(line.split())
    return None


class _Column:
    """What one column holds: its distinct values, and their counts when asked (a second pass
    over the file, needed only for IO with bare types and for messages)."""

    def __init__(self, distinct: set[str], counts: Callable[[], Counter[str]]):
        self.distinct = distinct
        self._counts = counts
        self.prefixes = prefixes(distinct)
        self.all_tags = all(is_tag(v) for v in distinct)

    @cached_property
    def counts(self) -> Counter[str]:
        return self._counts()

    def most_common(self) -> tuple[str, int]:
        return self.counts.most_common(1)[0] if self.counts else ("", 0)

    def o_first(self) -> bool:
        """`O` is (one of) the most frequent values."""
        return bool(self.distinct) and self.counts["O"] >= self.most_common()[1]

    def types(self) -> set[str]:
        """The entity types of a column of tags (`B-LOC`, `I-LOC` -> `LOC`)."""
        return {v[2:] for v in self.distinct if v != "O"}


@dataclass(frozen=True)
class Scan:
    """What one pass over a file found: the first row's width, the separator, the evidence
    per column, and 0 when the first column is an index."""

    width: int
    cut: str | None
    cols: list[_Column]
    index: int | None = None


@dataclass(frozen=True)
class Layout:
    """The decision: token and tag columns (0-based), scheme, notes, and what the reader needs:
    width, separator, each column's role (`index`, `outer`, `-`, ... or the `--columns`
    names), the index column and the values the tag column holds."""

    token: int
    tag: int
    scheme: str
    notes: tuple[str, ...] = ()
    width: int = 0
    cut: str | None = None
    names: tuple[str, ...] = ()
    index: int | None = None
    known: frozenset[str] = frozenset()
    detected: bool = False


def scan(path: Path, sep: str | None, only: tuple[int, ...] = ()) -> Scan:
    """The evidence for each column (`only`: these columns). Rows of another width are left
    to the reader; the first column is an index when every row's first cell is its place in
    its sentence (1, 2, ...) and the rows have 3 columns or more."""
    cut = first_cut(path, sep)
    width, pos, counting = 0, 0, True
    seen: list[set[str]] = []
    wanted: tuple[int, ...] = ()
    for number, line, kind in lines(path):
        if kind != ROW:
            pos = pos if kind == HASH else 0
            continue
        if not seen:
            width = row_width(line, cut)
            if width < 2:
                raise SourceFormatError(path, number, too_few(), line)
            seen = [set() for _ in range(width)]
            wanted = tuple(j for j in (only or range(width)) if j < width)
        pos += 1
        cells, _ = cut_cells(line, cut, width)
        if len(cells) != width:
            continue
        counting = counting and cells[0].strip() == str(pos)
        for j in wanted:
            seen[j].add(cells[j].strip())
    index = 0 if seen and counting and width >= 3 and not only else None
    cols = [_Column(d, partial(_count, path, cut, width, j)) for j, d in enumerate(seen)]
    return Scan(width, cut, cols, index)


def _count(path: Path, cut: str | None, width: int, j: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    for _, line, kind in lines(path):
        cells = cut_cells(line, cut, width)[0] if kind == ROW else []
        if len(cells) == width:
            counts[cells[j].strip()] += 1
    return counts


def decide(
    path: Path, found: Scan, roles: tuple[str, ...] | None, scheme: str, tags: str
) -> Layout:
    """The token and tag columns and the scheme (see the module docstring)."""
    notes: list[str] = []
    width, cols = found.width, found.cols
    if roles is not None:
        if width and len(roles) != width:
            raise SourceFormatError(
                path,
                None,
                f"{reader_opt('columns')} names {len(roles)} columns ({','.join(roles)}) but the "
                "rows have "
                f"{width}",
            )
        token, tag, names = roles.index("token"), roles.index("tag"), roles
    else:
        token, tag, names, more = _find_columns(path, found, tags)
        notes.append(
            f"{path.name}: columns detected as {','.join(names)} (column {tag + 1} holds the tags)"
        )
        notes += more
    if scheme == "auto":
        col = cols[tag] if cols else _Column(set(), Counter)
        scheme = scheme_of(col.prefixes)
        if scheme == "io" and cols:
            check_io(path, cols[token], col, f"column {tag + 1}")
        notes.append(f"{path.name}: tag scheme detected as {scheme.upper()}")
    known = frozenset(cols[tag].distinct) if tag < len(cols) else frozenset()
    index = found.index if roles is None else None
    return Layout(
        token, tag, scheme, tuple(notes), width, found.cut, names, index, known, roles is None
    )


def _find_columns(
    path: Path, found: Scan, tags: str
) -> tuple[int, int, tuple[str, ...], list[str]]:
    """Token column, tag column, each column's role and the notes, from the evidence."""
    width, cols, index = found.width, found.cols, found.index
    if width == 0:
        return 0, 1, ("token", "tag"), []  # no rows: the writer reports the empty input
    rest = [i for i in range(width) if i != index]
    tagged = [i for i in rest if cols[i].all_tags]
    notes = []
    if index is not None:
        notes.append(
            f"{path.name}: column {index + 1} numbers the tokens of each sentence (1, 2, ...): "
            "an index, not read"
        )
    if tags != "auto":
        tag = _chosen(path, found, tagged, tags)
        notes.append(f"{path.name}: tags read from column {tag + 1} (-o tags={tags})")
    elif len(rest) == 2 and len(tagged) == 1:
        tag = tagged[0]
    elif len(rest) == 2 and not tagged and sum(cols[i].o_first() for i in rest) == 1:
        tag = next(i for i in rest if cols[i].o_first())  # IO with bare types
    elif index is not None and len(rest) - len(tagged) == 1 and _nested(cols, tagged):
        tag = tagged[0]
        notes.append(_nested_note(path, tagged))
    else:
        raise AmbiguousFormat(path, None, _ambiguous(found, tagged))
    words = [i for i in rest if i != tag and (i not in tagged or len(rest) == 2)]
    if len(words) != 1:
        raise AmbiguousFormat(path, None, _ambiguous(found, [*tagged, tag]))
    return words[0], tag, _names(width, words[0], tag, index, tagged), notes


def _nested(cols: list[_Column], tagged: list[int]) -> bool:
    """Two or more tag columns whose types are all types of the first: outer and nested."""
    first = cols[tagged[0]].types() if tagged else set()
    return len(tagged) > 1 and all(cols[j].types() <= first for j in tagged[1:])


def _nested_note(path: Path, tagged: list[int]) -> str:
    cols = [str(j + 1) for j in tagged]
    listed = ", ".join(cols[:-1]) + " and " + cols[-1]
    if len(tagged) == 2:
        other = f"column {cols[1]} is not read: -o tags=nested reads it instead"
    else:
        other = f"columns {', '.join(cols[1:])} are not read: -o tags=N reads column N instead"
    return (
        f"{path.name}: columns {listed} hold tags of the same types (outer and nested "
        f"annotation); column {cols[0]} is read (the outer tags, -o tags=outer), {other}"
    )


def _chosen(path: Path, found: Scan, tagged: list[int], tags: str) -> int:
    """The column `-o tags=outer|nested|N` names (0-based)."""
    if tags in ("outer", "nested"):
        k = 0 if tags == "outer" else 1
        if len(tagged) > k:
            return tagged[k]
        listed = ", ".join(str(j + 1) for j in tagged) or "none"
        raise SourceFormatError(
            path,
            None,
            f"{reader_opt('tags', tags)}: the file has {len(tagged)} column(s) of tags "
            f"({listed}); {reader_opt('tags', 'N')} names the column of tags by its number",
        )
    n = int(tags)
    if not 1 <= n <= found.width or n - 1 == found.index:
        why = "is the index" if n - 1 == found.index else f"is not one of the {found.width}"
        raise SourceFormatError(path, None, f"{reader_opt('tags', n)}: column {n} {why} columns")
    return n - 1


def _ambiguous(found: Scan, tagged: list[int]) -> str:
    width, cols, index = found.width, found.cols, found.index
    tagged = sorted(set(tagged))
    words = [i for i in range(width) if i != index and i not in tagged]
    words.sort(key=lambda i: all(v.isdigit() for v in cols[i].distinct))  # numbers last
    if len(tagged) > 1:
        why = "columns " + " and ".join(str(i + 1) for i in tagged) + " all hold tags"
    elif tagged:
        why = f"column {tagged[0] + 1} holds the tags but {width} columns leave the token open"
    else:
        samples = ", ".join(repr(c.most_common()[0]) for c in cols[:4])
        why = f"no column holds only tags (most frequent values: {samples})"
    if width == 2:
        return (
            f"cannot tell which column holds the tags: {why}; say it with "
            f"{reader_opt('columns', 'token,tag')} or {reader_opt('columns', 'tag,token')}"
        )
    tag = tagged[-1] if tagged else width - 1
    token = words[0] if words else (0 if tag else width - 1)
    example = reader_opt("columns", _roles(width, token, tag, other="skip"))
    if len(tagged) > 1 and len(words) == 1:
        picks = " or ".join(reader_opt("tags", i + 1) for i in tagged)
        if len(tagged) == 2:
            picks = (
                f"{reader_opt('tags', 'outer')} (column {tagged[0] + 1}) or "
                f"{reader_opt('tags', 'nested')} (column {tagged[1] + 1})"
            )
        example = f"{picks}, or {example}"
    return f"cannot tell which column holds the tags: {why}; say it with {example}"


def _roles(width: int, token: int, tag: int, other: str = "-") -> str:
    return ",".join(
        "token" if i == token else "tag" if i == tag else other for i in range(max(width, 2))
    )


def _names(
    width: int, token: int, tag: int, index: int | None, tagged: list[int]
) -> tuple[str, ...]:
    """Each column's role, as `--columns` would name it (`index,token,tag,nested`)."""
    roles = {index: "index", token: "token", tag: "tag"}
    nested = {i: "outer" if i < tag else "nested" for i in tagged}
    return tuple(roles.get(i) or nested.get(i, "-") for i in range(width))


def column_stats(values: Iterable[str]) -> _Column:
    """The evidence `scan` collects, for one column given as its values."""
    counts = Counter(values)
    return _Column(set(counts), lambda: counts)


def check_io(
    path: Path,
    token: _Column,
    tag: _Column,
    column: str,
    advice: str | None = None,
) -> None:
    """Refuse an IO reading of a column of words (see the module); `advice` says how to name
    the columns."""
    advice = advice or (
        f"say which column holds the tags with {reader_opt('columns')} "
        f"(e.g. {reader_opt('columns', 'tag,token')})"
    )
    if token.all_tags and not tag.all_tags:
        why = "the token column holds only tags"
    elif len(tag.distinct) > len(token.distinct):
        why = (
            f"it has more distinct values ({len(tag.distinct):,}) than the token column "
            f"({len(token.distinct):,})"
        )
    else:
        return
    value, n = tag.most_common()
    raise AmbiguousFormat(
        path,
        None,
        f"{column} read as IO tags looks like words: {why}; its most frequent value is "
        f"{value!r} ({n:,} rows). {advice[0].upper() + advice[1:]}, or pass "
        f"{reader_opt('scheme', 'io')} if these really are IO types",
    )
