"""Which column of a column file holds the tags, and in which scheme: decided from evidence.

One pass over the file collects, per column, whether EVERY value is a tag (`O` or
`B-`/`I-`/`E-`/`S-<type>`), the tag prefixes seen and the values' frequencies. Then:

- **Layout** (`columns=auto`). The tag column is the one column whose every value is a tag
  (label first or token first alike). If no column is, the file may be IO with bare types
  (`person-artist/author`): the tag column is then the one column whose most frequent value is
  `O`. With two columns the other one holds the tokens. Anything else (two tag-like columns
  such as CoNLL's chunk and NER columns, three or more columns, no tag-like column) is refused
  with a message that names `--columns`.
- **Scheme** (`scheme=auto`). BIOES if a tag has an `E-`/`S-` prefix, else BIO if one has `B-`,
  else IO.
- **IO sanity.** A tag column read as IO by detection must look like tags, not words: it is
  refused when the token column holds only tags (the columns are swapped), or when it has more
  distinct values than the token column. So a label-first file read token first, whose
  "types" would be `the`, `a`, ... by the thousand, is refused rather than stored. An explicit
  `scheme=io` skips this check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from builders.errors import SourceFormatError
from builders.sources.base import open_text

TAG_PREFIXES = "BIES"


def is_tag(value: str) -> bool:
    """`O` or `X-type` with X one of B, I, E, S: a tag of the BIO family, whatever the scheme."""
    return value == "O" or (len(value) > 2 and value[1] == "-" and value[0] in TAG_PREFIXES)


def detect_scheme(tags: Iterable[str]) -> str:
    """BIOES if a tag has an E-/S- prefix, else BIO if one has B-, else IO."""
    return scheme_of({t[0] for t in tags if len(t) > 2 and t[1] == "-" and t[0] in TAG_PREFIXES})


def scheme_of(prefixes: set[str]) -> str:
    if prefixes & {"E", "S"}:
        return "bioes"
    if "B" in prefixes:
        return "bio"
    return "io"


def splitter(first_row: str, sep: str | None) -> str | None:
    """The separator `str.split` cuts the rows with: a tab when `sep` is a tab or when `sep`
    is unset and the first row has a tab; None (runs of whitespace) when `sep` is a space or
    unset without tabs; else `sep`. Callers strip the cells they use, so `tag<TAB> token`
    gives `token`."""
    if sep is None:
        return "\t" if "\t" in first_row else None
    return None if sep == " " else sep


class _Column:
    """What one column holds: its distinct values, and their counts when asked (a second pass
    over the file, needed only for IO with bare types and for messages)."""

    def __init__(self, distinct: set[str], counts: Callable[[], Counter[str]]):
        self.distinct = distinct
        self._counts = counts
        self._counted: Counter[str] | None = None
        self.prefixes = {
            v[0] for v in distinct if len(v) > 2 and v[1] == "-" and v[0] in TAG_PREFIXES
        }
        self.all_tags = all(is_tag(v) for v in distinct)

    @property
    def counts(self) -> Counter[str]:
        if self._counted is None:
            self._counted = self._counts()
        return self._counted

    def most_common(self) -> tuple[str, int]:
        return self.counts.most_common(1)[0] if self.counts else ("", 0)

    def o_first(self) -> bool:
        """`O` is (one of) the most frequent values."""
        return bool(self.distinct) and self.counts["O"] >= self.most_common()[1]


@dataclass(frozen=True)
class Layout:
    """The decision: token and tag columns (0-based), scheme, and what to tell the user."""

    token: int
    tag: int
    scheme: str
    notes: tuple[str, ...] = ()


def data_rows(path: Path) -> Iterable[tuple[int, str]]:
    """(line number, line) of every row that holds a token (no blank or -DOCSTART- lines)."""
    for number, line in open_text(path):
        if line.strip() and not line.startswith("-DOCSTART-"):
            yield number, line


def scan(path: Path, sep: str | None, only: tuple[int, ...] = ()) -> tuple[int, list[_Column]]:
    """The number of columns (of the first row) and the evidence for each column (`only`:
    these columns; the others get none). Rows of another width are left to the reader, which
    reports them with their line."""
    cut: str | None = None
    width = 0
    seen: list[set[str]] = []
    wanted: tuple[int, ...] = ()
    for number, line in data_rows(path):
        if not seen:
            cut = splitter(line, sep)
            width = len(line.split(cut))
            if width < 2:
                raise SourceFormatError(
                    path, number, "expected at least 2 columns (token and tag)", line
                )
            seen = [set() for _ in range(width)]
            wanted = tuple(j for j in (only or range(width)) if j < width)
        cells = line.split(cut)
        if len(cells) != width:
            continue
        for j in wanted:
            seen[j].add(cells[j].strip())
    return width, [_Column(d, partial(_count, path, cut, width, j)) for j, d in enumerate(seen)]


def _count(path: Path, cut: str | None, width: int, j: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    for _, line in data_rows(path):
        cells = line.split(cut)
        if len(cells) == width:
            counts[cells[j].strip()] += 1
    return counts


def decide(
    path: Path, width: int, cols: list[_Column], roles: tuple[str, ...] | None, scheme: str
) -> Layout:
    """The token and tag columns and the scheme (see the module docstring)."""
    notes: list[str] = []
    if roles is not None:
        if width and len(roles) != width:
            raise SourceFormatError(
                path,
                None,
                f"--columns names {len(roles)} columns ({','.join(roles)}) but the rows have "
                f"{width}",
            )
        token, tag = roles.index("token"), roles.index("tag")
    else:
        token, tag = _find_tag_column(path, width, cols)
        notes.append(
            f"{path.name}: columns detected as {_roles(width, token, tag)} "
            f"(column {tag + 1} holds the tags)"
        )
    if scheme == "auto":
        col = cols[tag] if cols else _Column(set(), Counter)
        scheme = scheme_of(col.prefixes)
        if scheme == "io" and cols:
            check_io(path, cols[token], col, f"column {tag + 1}")
        notes.append(f"{path.name}: tag scheme detected as {scheme.upper()}")
    return Layout(token, tag, scheme, tuple(notes))


def _find_tag_column(path: Path, width: int, cols: list[_Column]) -> tuple[int, int]:
    if width == 0:
        return 0, 1  # no rows: the writer reports the empty input
    tagged = [i for i, c in enumerate(cols) if c.all_tags]
    if width == 2 and len(tagged) == 1:
        return 1 - tagged[0], tagged[0]
    if width == 2 and not tagged:
        o_first = [i for i, c in enumerate(cols) if c.o_first()]
        if len(o_first) == 1:  # IO with bare types: O is the tag column's commonest value
            return 1 - o_first[0], o_first[0]
    raise SourceFormatError(path, None, _ambiguous(width, cols, tagged))


def _ambiguous(width: int, cols: list[_Column], tagged: list[int]) -> str:
    if len(tagged) > 1:
        why = "columns " + " and ".join(str(i + 1) for i in tagged) + " all hold tags"
    elif tagged:
        why = f"column {tagged[0] + 1} holds the tags but {width} columns leave the token open"
    else:
        samples = ", ".join(repr(c.most_common()[0]) for c in cols[:4])
        why = f"no column holds only tags (most frequent values: {samples})"
    if width == 2:
        example = "--columns token,tag or --columns tag,token"
    else:
        tag = tagged[-1] if tagged else width - 1
        example = "--columns " + _roles(width, 0 if tag else width - 1, tag, other="skip")
    return f"cannot tell which column holds the tags: {why}; say it with {example}"


def _roles(width: int, token: int, tag: int, other: str = "-") -> str:
    return ",".join(
        "token" if i == token else "tag" if i == tag else other for i in range(max(width, 2))
    )


def column_stats(values: Iterable[str]) -> _Column:
    """The evidence `scan` collects, for one column given as its values."""
    counts = Counter(values)
    return _Column(set(counts), lambda: counts)


def check_io(
    path: Path,
    token: _Column,
    tag: _Column,
    column: str,
    advice: str = "say which column holds the tags with --columns (e.g. --columns tag,token)",
) -> None:
    """Refuse an IO reading of a column of words (see the module docstring)."""
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
    raise SourceFormatError(
        path,
        None,
        f"{column} read as IO tags looks like words: {why}; its most frequent value is "
        f"{value!r} ({n:,} rows). {advice[0].upper() + advice[1:]}, or pass -o scheme=io if "
        "these really are IO types",
    )
