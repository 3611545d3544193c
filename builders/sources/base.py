"""The contract every source reader follows, and helpers shared by readers.

A reader is a module under `builders.sources` with a function

    read(unit: Path | FileGroup | DatasetSplit, report: ReadReport, **options) -> Iterator[Example]

that reads ONE unit lazily, yielding examples in order: a file, one split of a Hugging Face
dataset (`hf`), or the files of one name (`FileGroup`) for a reader that declares `PAIRED`
suffixes (brat's `(".txt", ".ann")`); and an `Options` class (`options.ReaderOptions`) that
validates its options before anything is read.

Readers only parse: the store validates spans, normalises labels, assigns ids and writes in
one transaction. A reader raises `SourceFormatError(path, line, message, value, record)` on the
first malformed row, the value as it stands in the file; it repairs only behind an explicit
option, and counts in `report` what it repaired or could not keep. Text is strict UTF-8 (a
leading byte-order mark skipped, CRLF read like LF).
"""

from __future__ import annotations

import gzip
import lzma
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from builders.errors import SourceFormatError, Verbatim

BOM = "\ufeff"


@dataclass(slots=True)
class Example:
    """One sentence (or passage) as a reader produces it: `spans` and `negative_spans` (spans
    NOT of their type, GLiNER's `negative_ner`) as (start, stop exclusive, raw_label) token
    offsets; `negatives`, raw labels asked about with no mention (Pile-NER's `[]`); `line`, the
    1-based line it starts on, and `record`, its 1-based number in formats made of records
    (JSON); `raw_id`, its id in the raw file, where the format has one."""

    tokens: list[str]
    spans: list[tuple[int, int, str]] = field(default_factory=list)
    negatives: list[str] = field(default_factory=list)
    negative_spans: list[tuple[int, int, str]] = field(default_factory=list)
    line: int = 0
    record: int | None = None
    raw_id: str | None = None


@dataclass
class ReadReport:
    """What a reader noticed: counts by snake_case key (`repaired_tags`, ...) and notes; the
    CLI prints them and `--json` returns them."""

    counts: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] += n

    def keep(self, spans: set[tuple[int, int, str]], span: tuple[int, int, str], key: str) -> None:
        """Add `span` to `spans`, counting it under `key` when it is there already."""
        if span in spans:
            self.add(key)
        spans.add(span)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def not_kept(self, where: Path | str, what: str, names: Counter[str]) -> None:
        """Count and name what a reader read past without keeping it (`names`: name -> how
        often), e.g. record keys or columns; `where` is a file or a dataset split."""
        if not names:
            return
        self.add(f"{what.replace(' ', '_')}_not_read", sum(names.values()))
        listed = ", ".join(f"{k} ({n:,})" for k, n in sorted(names.items()))
        self.note(f"{where.name if isinstance(where, Path) else where}: {what} not read: {listed}")


def dataset_name(dataset: str, config: str | None) -> str:
    """`DFKI-SLT/few-nerd[supervised]`: a dataset and its config as errors name them."""
    return dataset.rstrip("/") + (f"[{config}]" if config else "")


@dataclass(frozen=True)
class DatasetSplit:
    """One split of a Hugging Face dataset, the unit the `hf` reader reads. `split` is as the
    dataset names it (`validation`, not `dev`); `files`, a local folder's files, fingerprint it
    (a Hub dataset: its id, config, split and `revision`, its commit; None offline)."""

    dataset: str
    config: str | None
    split: str
    files: tuple[Path, ...] = ()
    revision: str | None = None

    def __str__(self) -> str:
        return f"{dataset_name(self.dataset, self.config)}/{self.split}"

    name = property(__str__)


@dataclass(frozen=True)
class FileGroup:
    """Files of one name read together as one unit (brat's `NAME.txt` and `NAME.ann`), in
    the order the reader's `PAIRED` gives their suffixes; named `folder/NAME.{txt,ann}`."""

    files: tuple[Path, ...]

    def __str__(self) -> str:
        first = self.files[0]
        return str(first.with_suffix("")) + ".{" + ",".join(f.suffix[1:] for f in self.files) + "}"

    @property
    def name(self) -> str:
        return Path(str(self)).name


Unit = Path | FileGroup | DatasetSplit


def open_bytes(path: Path) -> BinaryIO:
    """The file's bytes, `.xz` and `.gz` files decompressed."""
    opener = {".xz": lzma.open, ".gz": gzip.open}.get(path.suffix, open)
    return opener(path, "rb")  # type: ignore[no-any-return,operator]


def open_text(path: Path) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its newline) of strict UTF-8; a non-UTF-8
    byte raises a `SourceFormatError` naming the line and the byte."""
    with open_bytes(path) as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = raw[exc.start : exc.end]
                raise SourceFormatError(
                    path, number, f"not UTF-8 (byte {bad.hex(' ')} at column {exc.start + 1})", bad
                ) from None
            if number == 1 and text.startswith(BOM):
                text = text[1:]
            yield number, text.rstrip("\r\n")


def read_text(path: Path, bom_as: str = "") -> str:
    """The whole file as strict UTF-8 (for JSON formats), with a line-numbered error if not;
    a byte-order mark at the start becomes `bom_as` (dropped by default)."""
    with open_bytes(path) as fh:
        data = fh.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start : exc.end]
        raise SourceFormatError(path, line, f"not UTF-8 (byte {bad.hex(' ')})", bad) from None
    return bom_as + text[1:] if text.startswith(BOM) else text


def counted(n: int, noun: str) -> str:
    """`1 row`, `2,048 rows`: a count and its noun, for reports."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def as_in_file(value: object) -> Verbatim:
    """A JSON value for an error message, written as JSON (as it stands in the file)."""
    import json

    return Verbatim(json.dumps(value, ensure_ascii=False))


#: GLiNER's word tokeniser, used to tokenise passages of formats that carry no tokens.
WORD_RE = re.compile(r"\w+(?:[-_]\w+)*|\S")
_SPACE_RE = re.compile(r"\S+")


def _with_offsets(pattern: re.Pattern[str], text: str) -> tuple[list[str], list[int], list[int]]:
    found = [(m.group(), m.start(), m.end()) for m in pattern.finditer(text)]
    return [f[0] for f in found], [f[1] for f in found], [f[2] for f in found]


def split_with_offsets(text: str) -> tuple[list[str], list[int], list[int]]:
    """Split on whitespace (`str.split()`, as GLiNER's evaluation reads its benchmark json);
    return tokens and their character start and end offsets."""
    return _with_offsets(_SPACE_RE, text)


def tokenize_with_offsets(text: str) -> tuple[list[str], list[int], list[int]]:
    """Tokenise like GLiNER; return tokens and their character start and end offsets."""
    return _with_offsets(WORD_RE, text)
