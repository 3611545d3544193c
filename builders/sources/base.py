"""The contract every source reader follows, and helpers shared by readers.

A reader is a module under `builders.sources` with a function

    read(unit: Path | FileGroup | DatasetSplit, report: ReadReport, **options) -> Iterator[Example]

that reads ONE unit of input lazily and yields examples in order: a file for the file
formats, one split of a Hugging Face dataset for `hf`. A reader whose unit is several files
declares how they pair, `PAIRED` (brat: `(".txt", ".ann")`, the files of one name): planning
makes each name's files one `FileGroup` (`inputs.pair`), and the store fingerprints a unit
over every file it carries. Each reader module also declares
`Options`, a frozen dataclass of its options (`builders.sources.options.ReaderOptions`): the
registry validates the fixed and the user's options through it before anything is read, so an
unknown key or a bad value is a clean error, and `read` receives them as keywords.

The registry (`SourceSpec.plan`) maps `--path`s, a local copy or a Hub origin to the reader
and its units, split by split. Readers only parse: the store validates spans, normalises
labels, assigns ids and writes everything in one transaction. A reader raises
`SourceFormatError(path, line, message, value, record)` on the first malformed row, showing the
value as it stands in the file, and never repairs data silently: a repair happens only behind
an explicit option and is counted in `report`. Whatever a reader cannot keep (a record key,
a column it does not read) is counted and named in `report`, never dropped silently.

Text is strict UTF-8; a byte-order mark at the start of a file is accepted (and skipped) in
every text format, and CRLF line ends are read like LF.
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
    """One sentence (or passage) as a reader produces it.

    Attributes:
        tokens: the tokens.
        spans: (start, stop, raw_label) with token offsets, `stop` exclusive.
        negatives: raw labels that were asked about and have no mention (Pile-NER's `[]`).
        negative_spans: (start, stop, raw_label): spans that are NOT of that type (span-level
            negatives, `negative_ner` in GLiNER-style json), `stop` exclusive.
        line: 1-based line where the example starts, for error messages.
        record: 1-based record number in formats made of records (JSON), else None.
        raw_id: the example's id in the raw file, when the format has one.
    """

    tokens: list[str]
    spans: list[tuple[int, int, str]] = field(default_factory=list)
    negatives: list[str] = field(default_factory=list)
    negative_spans: list[tuple[int, int, str]] = field(default_factory=list)
    line: int = 0
    record: int | None = None
    raw_id: str | None = None


@dataclass
class ReadReport:
    """What a reader noticed while reading: counted repairs, unfound mentions, merges, ...

    Keys are short snake_case names (`mentions_not_found`, `repaired_tags`, ...); the CLI
    prints them and `--json` returns them, so nothing is dropped or changed silently.
    """

    counts: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] += n

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def not_kept(self, where: Path | str, what: str, names: Counter[str]) -> None:
        """Count and name what a reader read past without keeping it (`names`: name -> how
        often), e.g. record keys or columns the format does not use; `where` is a file (named
        by its file name) or a dataset split."""
        if not names:
            return
        self.add(f"{what.replace(' ', '_')}_not_read", sum(names.values()))
        listed = ", ".join(f"{k} ({n:,})" for k, n in sorted(names.items()))
        self.note(f"{where.name if isinstance(where, Path) else where}: {what} not read: {listed}")


@dataclass(frozen=True)
class DatasetSplit:
    """One split of a Hugging Face dataset, the unit the `hf` reader reads.

    Attributes:
        dataset: a Hub id (online users) or a local folder (`save_to_disk`, or data files).
        config: the Hub config name, or None.
        split: the split as the dataset names it (`validation`, not `dev`).
        files: a local folder's files: the input is fingerprinted by their bytes (a Hub
            dataset by its id, config, split and revision).
        revision: a Hub dataset's commit (sha) read, resolved when the read is planned; None
            for a local folder, or where the Hub could not be asked (offline).
    """

    dataset: str
    config: str | None
    split: str
    files: tuple[Path, ...] = ()
    revision: str | None = None

    def __str__(self) -> str:
        return (
            self.dataset.rstrip("/")
            + (f"[{self.config}]" if self.config else "")
            + "/"
            + self.split
        )

    @property
    def name(self) -> str:
        return str(self)


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
    """Yield (1-based line number, line without its newline), decoding strict UTF-8.

    A byte-order mark at the start is skipped. A non-UTF-8 byte raises a `SourceFormatError`
    naming the line and the byte.
    """
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
