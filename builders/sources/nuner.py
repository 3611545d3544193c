"""NuNER (numind/NuNER): CSV with a passage and a Python list literal of annotations.

    input,output
    "Apple hired O'Neil in 2020.","['Apple <> company', ""O'Neil <> person""]"
    Paris is big.,['Paris <> city']

The text carries no tokens and the mentions no offsets: `input` is tokenised with GLiNER's
regex (`base.WORD_RE`) and every case-insensitive occurrence of a mention's token sequence
becomes a span (occurrences of one mention do not overlap; the search resumes after a match).
A mention found nowhere is counted as `mentions_not_found`; an item that repeats an earlier
item of its row up to case and spacing (`Apple <> company` after `apple <> company`, so the
same spans) as `duplicate_items`; a mention without any token as `empty_mentions`.

Items are split on their LAST ` <> ` (NuNER's types never contain it, mentions might). An item
without it, an empty type, or an output that is not a list of string literals (never evaluated
as code: `parse_list_literal`) is an error naming the file and the 1-based physical line where
the record starts (CSV fields may span lines).

Speed (~1M rows, 4.4M mentions): a mention is found by `str.find` of its lower-cased tokens,
framed by spaces, in the row's lower-cased joined tokens; files over 64 MiB are parsed in a
helper process (`workers=1`), so parsing and the store's writing use two cores.
"""

from __future__ import annotations

import ast
import csv
import io
import lzma
import os
import pickle
import re
import subprocess
import sys
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builders.errors import InputError, InvalidValue, LiteralError, SourceFormatError
from builders.sources.base import WORD_RE, Example, ReadReport, open_bytes, open_text
from builders.sources.options import ReaderOptions, option

SEP = " <> "
COLUMNS = ("input", "output")
PARALLEL_MIN_BYTES = 64 << 20
HELPER_BATCH = 5_000

# One string literal without prefix; the body may hold backslash escapes but no raw newline.
# (Unrolled loops: `[^'\\]*(?:\\.[^'\\]*)*` is much faster than `(?:[^'\\]|\\.)*` in `re`.)
_SQ_BODY = r"[^'\\\r\n]*(?:\\.[^'\\\r\n]*)*"
_DQ_BODY = r'[^"\\\r\n]*(?:\\.[^"\\\r\n]*)*'
_ITEM = rf"(?:'{_SQ_BODY}'|\"{_DQ_BODY}\")"
_LIST_RE = re.compile(rf"\[\s*(?:{_ITEM}\s*,\s*)*(?:{_ITEM}\s*)?\]")
_ITEM_RE = re.compile(rf"'({_SQ_BODY})'|\"({_DQ_BODY})\"")
_SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
_ESCAPE_RE = re.compile(r"\\(.)")

_findall = WORD_RE.findall


def parse_list_literal(text: str) -> list[str]:
    """Parse a Python list literal of strings (`['a', "b'c"]`) without evaluating code: the
    common shape by regular expressions, anything else by `ast.literal_eval`; a
    `LiteralError` if the text is not a list of strings."""
    s = text
    # Fast path, repr's usual output: ['a', 'b'] with no escapes and no double quotes.
    if (
        s[:2] == "['"
        and s[-2:] == "']"
        and '"' not in s
        and "\\" not in s
        and "\n" not in s
        and "\r" not in s
    ):
        body = s[2:-2]
        items = body.split("', '")
        if body.count("'") == 2 * len(items) - 2:
            return items
    s = s.strip()
    if s == "[]":
        return []
    if _LIST_RE.fullmatch(s):
        if "\\" not in s:
            return [a or b for a, b in _ITEM_RE.findall(s)]
        out: list[str] = []
        for a, b in _ITEM_RE.findall(s):
            body = a or b
            if "\\" in body:
                body = _unescape(body, "'" if a else '"')
            out.append(body)
        return out
    value = _safe_eval(s)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise LiteralError(f"not a list of strings but {type(value).__name__}")
    return value


def _unescape(body: str, quote: str) -> str:
    try:
        return _ESCAPE_RE.sub(lambda m: _SIMPLE_ESCAPES[m.group(1)], body)
    except KeyError:  # \x, \u, \N{...}, octal, unknown escapes: let Python decide
        value = _safe_eval(quote + body + quote)
        if not isinstance(value, str):
            raise LiteralError("not a string") from None
        return value


def _safe_eval(s: str) -> object:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences warn, not fail
            return ast.literal_eval(s)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise LiteralError(str(exc)) from None


@dataclass(frozen=True)
class Options(ReaderOptions):
    workers: int | None = option(
        None,
        "1: parse in a helper process (two cores), 0: parse here; default: 1 for files over "
        "64 MiB; the output is the same either way",
    )

    def __post_init__(self) -> None:
        if self.workers not in (None, 0, 1):
            raise InvalidValue(f"workers={self.workers}: give 0 or 1")


def read(path: Path, report: ReadReport, **options: object) -> Iterator[Example]:
    """Yield one example per CSV record of a NuNER file (`.csv`, `.csv.gz` or `.csv.xz`);
    other columns than `input` and `output` are counted and named in the report."""
    workers = Options.parse(options, "nuner").workers
    if workers is None:
        workers = 1 if path.stat().st_size > PARALLEL_MIN_BYTES else 0
    extra = _extra_columns(path)
    rows = 0
    if workers:
        for ex in _read_in_helper(path, report):
            rows += 1
            yield ex
    else:
        counts: Counter[str] = Counter()
        try:
            for line, tokens, _, spans in _rows(path, counts):
                rows += 1
                yield Example(tokens=tokens, spans=spans, line=line)
        finally:
            report.counts.update(counts)
    report.not_kept(path, "columns", Counter(dict.fromkeys(extra, rows)))


def _extra_columns(path: Path) -> list[str]:
    """Header names other than `input` and `output` (an unreadable header is left to `_rows`)."""
    try:
        with _open(path) as fh:
            header = next(csv.reader(fh), [])
    except (UnicodeDecodeError, csv.Error, OSError, EOFError, lzma.LZMAError):
        return []
    names = [h.strip().removeprefix("\ufeff") for h in header]
    return [n or f"column {i + 1}" for i, n in enumerate(names) if n not in COLUMNS]


def _rows(path: Path, counts: Counter[str]) -> Iterator[tuple[int, list[str], str, list]]:
    """(line, tokens, tokens joined by " ", spans) of every record."""
    with _open(path) as fh:
        try:
            yield from _parse(path, fh, counts)
        except UnicodeDecodeError:
            raise _utf8_error(path) from None


def _read_in_helper(path: Path, report: ReadReport) -> Iterator[Example]:
    """Parse in a child process (`python -m builders.sources.nuner PATH`) that streams pickled
    batches through a pipe; a plain subprocess, as `multiprocessing`'s spawn would re-run the
    caller's main script."""
    root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "builders.sources.nuner", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        while True:
            try:
                msg = pickle.load(proc.stdout)  # our own child's output, not input data
            except EOFError:
                code = proc.wait()
                tail = proc.stderr.read().decode(errors="replace").strip()[-500:]
                raise InputError(
                    f"{path}: the parsing process ended early (exit code {code}): {tail}"
                ) from None
            kind = msg[0]
            if kind == "rows":
                for line, joined, spans in zip(msg[1], msg[2], msg[3], strict=True):
                    tokens = joined.split(" ") if joined else []
                    yield Example(tokens=tokens, spans=spans, line=line)
            elif kind == "done":
                report.counts.update(msg[1])
                break
            elif kind == "error":
                raise SourceFormatError(*msg[1:])
            else:
                raise InputError(f"{path}: the parsing process failed: {msg[1]}")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def _helper(path: str, out: Any) -> None:  # pragma: no cover - runs in the child process
    counts: Counter[str] = Counter()
    lines: list[int] = []
    joined: list[str] = []
    spans: list[list] = []

    def send(msg: tuple) -> None:
        pickle.dump(msg, out, protocol=pickle.HIGHEST_PROTOCOL)

    try:
        for line, _, text, sp in _rows(Path(path), counts):
            lines.append(line)
            joined.append(text)
            spans.append(sp)
            if len(lines) >= HELPER_BATCH:
                send(("rows", lines, joined, spans))
                lines, joined, spans = [], [], []
        if lines:
            send(("rows", lines, joined, spans))
        send(("done", counts))
    except SourceFormatError as exc:
        send(("error", exc.path, exc.line, exc.message, exc.value))
    except BrokenPipeError:  # the reader stopped early
        return
    except BaseException as exc:
        send(("crash", f"{type(exc).__name__}: {exc}"))
    out.flush()


def _open(path: Path) -> io.TextIOBase:
    return io.TextIOWrapper(open_bytes(path), encoding="utf-8", newline="")


def _parse(
    path: Path, fh: io.TextIOBase, counts: Counter[str]
) -> Iterator[tuple[int, list[str], str, list]]:
    """(line, tokens, joined tokens, spans) of every row of a NuNER CSV file."""
    # Passages can exceed csv's default 128 KiB field limit; the limit is process-wide.
    if csv.field_size_limit() < 1 << 30:
        csv.field_size_limit(min(sys.maxsize, 1 << 30))
    reader = csv.reader(fh, strict=True)
    tally = Counter[str]()
    try:
        i_in, i_out, width = _header(path, reader)
        seen_lines = reader.line_num
        for row in reader:
            line, seen_lines = seen_lines + 1, reader.line_num
            if len(row) != width:
                if not row:  # a blank line
                    continue
                raise SourceFormatError(
                    path, line, f"expected {width} fields, found {len(row)}", row
                )
            raw_out = row[i_out]
            try:
                items = parse_list_literal(raw_out)
            except LiteralError:
                raise SourceFormatError(path, line, "unparseable output literal", raw_out) from None
            tokens = _findall(row[i_in])
            # Tokens never contain whitespace, so " " both joins and delimits them, and
            # lower-casing the joined text keeps one lower-cased token per token.
            joined = " ".join(tokens)
            spans = _row_spans(path, line, joined, items, tally) if items else []
            yield line, tokens, joined, spans
    except csv.Error as exc:
        raise SourceFormatError(path, reader.line_num, f"bad CSV: {exc}") from None
    finally:
        counts.update(tally)


#: Header fields a missing-column error names (a JSON list read as CSV has hundreds).
SHOWN_COLUMNS = 8


def _header(path: Path, reader: Any) -> tuple[int, int, int]:
    """Positions of `input` and `output` in the header row, and the row width."""
    header = next(reader, None)
    if header is None:
        raise SourceFormatError(path, None, "empty file: expected a header row 'input,output'")
    if header and header[0].startswith("\ufeff"):
        header[0] = header[0][1:]
    names = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        found = ", ".join(names[:SHOWN_COLUMNS]) or "none"
        if len(names) > SHOWN_COLUMNS:
            found += f" and {len(names) - SHOWN_COLUMNS:,} more"
        not_csv = "" if ".csv" in path.suffixes else f"; {path.name} is not a .csv file"
        raise SourceFormatError(
            path,
            1,
            f"missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"(found: {found}; expected a header row 'input,output'{not_csv})",
        )
    return names.index("input"), names.index("output"), len(names)


def _row_spans(
    path: Path, line: int, joined: str, items: list[str], tally: Counter[str]
) -> list[tuple[int, int, str]]:
    """Every occurrence of every item's mention in the row's tokens, as sorted spans."""
    low = " " + joined.lower() + " "
    done: set[tuple[str, str]] = set()
    spans: list[tuple[int, int, str]] = []
    for item in items:
        mention, sep, label = item.rpartition(SEP)
        if not sep:
            raise SourceFormatError(
                path, line, f"output item without {SEP!r} (expected '<mention> <> <type>')", item
            )
        if not label or label.isspace():
            raise SourceFormatError(path, line, "output item with an empty type", item)
        key, n = _mention_key(mention)
        if not n:
            tally["empty_mentions"] += 1
            continue
        if (key, label) in done:  # the same mention and type again: same spans
            tally["duplicate_items"] += 1
            continue
        done.add((key, label))
        pos = low.find(key)
        if pos < 0:
            tally["mentions_not_found"] += 1
            continue
        step, index, counted = len(key) - 1, 0, 0
        while pos >= 0:
            index += low.count(" ", counted, pos)  # tokens before the match
            counted = pos
            spans.append((index, index + n, label))
            pos = low.find(key, pos + step)
    spans.sort()
    return spans


def _mention_key(mention: str) -> tuple[str, int]:
    """The mention's tokens, lower-cased, joined and framed by " ", and their number."""
    if mention.isalnum():
        return " " + mention.lower() + " ", 1
    # Words separated by single spaces are their own tokens: skip the regex.
    if (
        mention.replace(" ", "").isalnum()
        and "  " not in mention
        and mention[0] != " "
        and mention[-1] != " "
    ):
        return " " + mention.lower() + " ", mention.count(" ") + 1
    mtoks = _findall(mention)
    return " " + " ".join(mtoks).lower() + " ", len(mtoks)


def _utf8_error(path: Path) -> SourceFormatError:
    """Find the first non-UTF-8 line again, line by line (`open_text`), for an exact line."""
    try:
        for _ in open_text(path):
            pass
    except SourceFormatError as exc:
        return exc
    return SourceFormatError(path, None, "not UTF-8")


if __name__ == "__main__":  # the helper process of `read(..., workers=1)`
    _helper(sys.argv[1], sys.stdout.buffer)
