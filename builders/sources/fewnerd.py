"""Few-NERD column files: one token and its tag per line, a blank line between sentences.

    Hoch        building-other          IO, the official release (`coarse-fine` or `O`)
    Ballarat    B-organization_other    BIO variant: `B-`/`I-` and `coarse_fine`
    came        O

Both spellings name the same 66 fine types; `map_label` turns either into `coarse-fine`
lower-cased (`location_GPE` -> `location-gpe`) and its coarse type. Lines are read by
`columns.read`. The BIO variant, converted from IO, opens an entity right after one of another
type with `I-` (`B-organization_other` then `I-organization_company`): such an `I-x` is read
as `B-x` (columns' `repair`, on by default here; `repair=False` rejects them).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from builders.errors import InvalidValue, SourceFormatError
from builders.sources import columns
from builders.sources.base import Example, ReadReport
from builders.sources.options import option

COARSE = ("art", "building", "event", "location", "organization", "other", "person", "product")


def _split(raw: str) -> tuple[str, str] | None:
    text = raw.strip().lower()
    cut = min((i for i in (text.find("-"), text.find("_")) if i >= 0), default=-1)
    if cut <= 0 or cut == len(text) - 1:
        return None
    coarse, fine = text[:cut], text[cut + 1 :]
    return (coarse, fine) if coarse in COARSE else None


def map_label(raw: str) -> tuple[str, str]:
    """Raw Few-NERD tag type -> (fine type as `coarse-fine`, lower case; coarse type)."""
    parts = _split(raw)
    if parts is None:
        raise InvalidValue(
            f"not a Few-NERD type: {raw!r} (expected coarse-fine or coarse_fine with coarse in "
            f"{', '.join(COARSE)})"
        )
    return f"{parts[0]}-{parts[1]}", parts[0]


@dataclass(frozen=True)
class Options(columns.Options):
    """The column reader's options, with Few-NERD's layout and `repair` on by default."""

    columns: str = option("token,tag", "what each column holds (Few-NERD: token,tag)")
    repair: bool = option(True, "read an I-x that opens an entity as B-x, and count it")


def read(path: Path, report: ReadReport, **options: object) -> Iterator[Example]:
    """Yield the sentences of one Few-NERD file (IO or BIO), checking every type."""
    opts = Options.parse(options, "fewnerd")
    for ex in columns.read(path, report, **opts.as_dict()):
        for start, _stop, label in ex.spans:
            if _split(label) is None:
                raise SourceFormatError(
                    path,
                    ex.line + start,
                    "unknown Few-NERD type (expected coarse-fine or coarse_fine, coarse one of "
                    + ", ".join(COARSE)
                    + ")",
                    label,
                )
        yield ex
