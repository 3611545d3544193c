"""The contract every source reader follows, and helpers shared by readers.

A reader is a module under `builders.sources` with a function

    read(unit: Path | DatasetSplit, report: ReadReport, **options) -> Iterator[Example]

that reads ONE unit of input lazily and yields examples in order: a file for the file
formats, one split of a Hugging Face dataset for `hf`. The registry (`SourceSpec.plan`) maps
a `--path`, a local copy or a Hub origin to the reader and its units, split by split. Readers only parse:
the store validates spans, normalises labels, assigns ids and writes everything in one
transaction. A reader raises `SourceFormatError(path, line, message, value)` on the first
malformed row and never repairs data silently: a repair happens only behind an explicit option
and is counted in `report`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from builders.errors import SourceFormatError


@dataclass(slots=True)
class Example:
    """One sentence (or passage) as a reader produces it.

    Attributes:
        tokens: the tokens.
        spans: (start, stop, raw_label) with token offsets, `stop` exclusive.
        negatives: raw labels that were asked about and have no mention (Pile-NER's `[]`).
        line: 1-based line (or record number) where the example starts, for error messages.
        raw_id: the example's id in the raw file, when the format has one.
    """

    tokens: list[str]
    spans: list[tuple[int, int, str]] = field(default_factory=list)
    negatives: list[str] = field(default_factory=list)
    line: int = 0
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


@dataclass(frozen=True)
class DatasetSplit:
    """One split of a Hugging Face dataset, the unit the `hf` reader reads.

    Attributes:
        dataset: a Hub id (online users) or a local folder (`save_to_disk`, or data files).
        config: the Hub config name, or None.
        split: the split as the dataset names it (`validation`, not `dev`).
        files: a local folder's files: the input is fingerprinted by their bytes (a Hub
            dataset by its id, config and split only).
    """

    dataset: str
    config: str | None
    split: str
    files: tuple[Path, ...] = ()

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


Unit = Path | DatasetSplit


def open_text(path: Path) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its newline), decoding strict UTF-8.

    `.xz` and `.gz` files are decompressed transparently. A non-UTF-8 byte raises a
    `SourceFormatError` naming the line and the byte.
    """
    import gzip
    import lzma

    opener = {".xz": lzma.open, ".gz": gzip.open}.get(path.suffix, open)
    with opener(path, "rb") as fh:  # type: ignore[operator]
        for number, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = raw[exc.start : exc.end]
                raise SourceFormatError(
                    path, number, f"not UTF-8 (byte {bad.hex(' ')} at column {exc.start + 1})", bad
                ) from None
            yield number, text.rstrip("\r\n")


def read_text(path: Path) -> str:
    """The whole file as strict UTF-8 (for JSON formats), with a line-numbered error if not."""
    data = path.read_bytes()
    if path.suffix in (".xz", ".gz"):
        import gzip
        import lzma

        data = (lzma.decompress if path.suffix == ".xz" else gzip.decompress)(data)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start : exc.end]
        raise SourceFormatError(path, line, f"not UTF-8 (byte {bad.hex(' ')})", bad) from None


#: GLiNER's word tokeniser, used to tokenise passages of formats that carry no tokens.
WORD_RE = re.compile(r"\w+(?:[-_]\w+)*|\S")


def tokenize_with_offsets(text: str) -> tuple[list[str], list[int], list[int]]:
    """Tokenise like GLiNER; return tokens and their character start and end offsets."""
    tokens: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for m in WORD_RE.finditer(text):
        tokens.append(m.group())
        starts.append(m.start())
        ends.append(m.end())
    return tokens, starts, ends
