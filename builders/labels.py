"""Label normalisation (METHOD.md section 1), verbalisation of raw tags over the data table
`builders/data/benchmarks.toml` (METHOD.md section 6), and the packaged benchmark tag lists.
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from builders.defaults import FEWNERD_MODES
from builders.errors import InvalidValue, UnknownNameError

_SPACES = re.compile(r"[\s_]+")

MISC_LABEL = "else"


def normalise_label(raw: str) -> str:
    """Return the comparison form of a label: NFC, lower case, `_`/whitespace runs -> one space."""
    return _SPACES.sub(" ", unicodedata.normalize("NFC", raw).lower()).strip()


@dataclass(frozen=True)
class Benchmark:
    """A packaged benchmark: its raw tags (`builders.shift.benchmarks` verbalises them)."""

    name: str
    title: str
    tags: tuple[str, ...]


@cache
def _data(name: str) -> dict:
    """A packaged TOML table of `builders/data`."""
    with resources.files("builders.data").joinpath(name).open("rb") as fh:
        return tomllib.load(fh)


def _table() -> dict:
    return _data("benchmarks.toml")


#: The seven zero-shot benchmarks of the Familiarity paper, in the paper's order (the data's).
ZERO_SHOT = tuple(n for n, e in _table()["benchmarks"].items() if e.get("zero_shot"))


def verbalise(tag: str, mapping: Mapping[str, str] | None = None, *, natural: bool = False) -> str:
    """A raw tag (`programlang`, `PER`) as its normalised label text: `mapping` (`label_map`)
    first, then the packaged table, else the tag normalised. `natural`: a source of
    natural-language labels keeps the table's `[natural]` keys (`organisation`) as they are
    (`batches.Validator.settle`)."""
    key = normalise_label(tag)
    if mapping and key in mapping:
        return mapping[key]
    entry = key.replace(" ", "_")
    table = _table()["verbalise"]
    if entry in table and not (natural and entry in natural_keys()):
        return normalise_label(str(table[entry]))
    return key


@cache
def natural_keys() -> frozenset[str]:
    """The table's keys that are natural-language labels themselves (`[natural]` keep)."""
    return frozenset(_table().get("natural", {}).get("keep", ()))


def table_label(tag: str) -> str | None:
    """The packaged table's label of a tag, or None when the table does not hold it."""
    found = _table()["verbalise"].get(normalise_label(tag).replace(" ", "_"))
    return None if found is None else normalise_label(str(found))


def label_map(mapping: Mapping[str, str]) -> dict[str, str]:
    """A `--label-map` (raw tag -> label) with keys and labels normalised; refuses an empty
    label, or two spellings of one tag mapped to different labels."""
    out: dict[str, str] = {}
    for raw, label in mapping.items():
        key, value = normalise_label(raw), normalise_label(label)
        if not value:
            raise InvalidValue(f"label map: the label of {raw!r} is empty")
        if out.get(key, value) != value:
            raise InvalidValue(
                f"label map: {raw!r} is the tag {key!r}, already mapped to {out[key]!r}, "
                f"and here to {value!r}"
            )
        out[key] = value
    return out


@cache
def benchmarks() -> dict[str, Benchmark]:
    """All benchmarks with a packaged label set, by name."""
    return {
        name: Benchmark(name, e["title"], tuple(e["tags"]))
        for name, e in _table()["benchmarks"].items()
    }


def union_labels(sets: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The evaluation label set L_Z: the union of the sets' labels, first-seen order."""
    return tuple(dict.fromkeys(z for labels in sets.values() for z in labels))


# ---------------------------------------------------------------- the paper's protocol
def paper_table() -> dict:
    """`data/paper.toml`: GLiNER's label lists and the authors' reference values."""
    return _data("paper.toml")


def paper_label_sets(names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """GLiNER's evaluation label lists (`labels.json`) of the named benchmarks, verbatim: the
    authors' spelling and order, `else` kept."""
    table = paper_table()["gliner_labels"]
    missing = [n for n in names if n not in table]
    if missing:
        raise UnknownNameError("benchmark with a GLiNER label list", missing[0], list(table))
    return {n: tuple(table[n]) for n in names}


def paper_training_label(label: str, coarse: str | None = None) -> str:
    """A training label as the authors' code spells it: lower-cased; a Few-NERD fine type
    (`coarse` given) as the text after its last `-`, and `X-other` as `X (other)`."""
    if coarse:
        fine = label.split("-")[-1]
        return f"{coarse} (other)" if fine == "other" else fine
    return label


def reference_familiarity(corpus: str) -> dict[str, float] | None:
    """The authors' Familiarity of a training corpus (`pilener`, `nuner`, `fewnerd`, ...):
    per benchmark and `paper_figure`; None when they did not measure it."""
    row = paper_table()["reference"]["familiarity"].get(corpus)
    return None if row is None else {k: float(v) for k, v in row.items() if k != "corpus"}


def reference_splits(corpus: str, strategy: str) -> dict[str, float] | None:
    """The Familiarity of the authors' published low / medium / high splits, or None."""
    row = paper_table()["reference"]["splits"].get(corpus, {}).get(strategy)
    return None if row is None else {k: float(v) for k, v in row.items()}


# ---------------------------------------------------------------------------- Few-NERD types
# Few-NERD's type system and official INTRA / INTER parts are data (`data/fewnerd.toml`), read
# here because both the Few-NERD builder and the benchmark resolver (its parts are benchmarks
# too) need them.


def fewnerd_table() -> dict:
    return _data("fewnerd.toml")


def fewnerd_coarse_types() -> tuple[str, ...]:
    """The 8 coarse types in `DFKI-SLT/few-nerd`'s ClassLabel order (without `O`)."""
    return tuple(fewnerd_table()["coarse"])


def fewnerd_fine_types() -> tuple[str, ...]:
    """The 66 fine types, official spelling, in `DFKI-SLT/few-nerd`'s ClassLabel order."""
    return tuple(fewnerd_table()["fine"])


@cache
def _fewnerd_names() -> dict[str, str]:
    return {f.lower(): f for f in fewnerd_fine_types()}


def fewnerd_official_name(label: str) -> str:
    """The official spelling of a stored (lower-cased) fine type; unknown types stay as they are."""
    return _fewnerd_names().get(label.lower(), label)


def fewnerd_coarse_of(fine: str) -> str:
    return fine.split("-", 1)[0].lower()


def fewnerd_verbalise(fine: str) -> str:
    """The label text embedded for Familiarity (`person-artist/author` -> "artist / author")."""
    table = fewnerd_table()["verbalise"]
    name = fewnerd_official_name(fine)
    if name in table:
        return str(table[name])
    return name.split("-", 1)[-1].replace("/", " / ").lower()


def fewnerd_official_parts(mode: str) -> dict[str, str]:
    """Every official fine type -> its part (`train`, `dev`, `test`) in the official split:
    INTRA by coarse type, INTER by fine type (dev and test listed, train the rest)."""
    table = fewnerd_table()
    if mode not in FEWNERD_MODES:
        raise UnknownNameError("Few-NERD mode", mode, FEWNERD_MODES)
    if mode == "intra":
        by_coarse = {c: p for p, cs in table["intra"].items() for c in cs}
        return {f: by_coarse[fewnerd_coarse_of(f)] for f in fewnerd_fine_types()}
    owned = {t: p for p in ("dev", "test") for t in table["inter"][p]}
    return {f: owned.get(f, "train") for f in fewnerd_fine_types()}
