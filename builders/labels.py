"""Label normalisation, benchmark verbalisations and the packaged benchmark label sets.

A label is compared in its normalised form (METHOD.md section 1): Unicode NFC, lower-cased,
stripped, inner whitespace and `_` collapsed to one space. Benchmark tags are verbalised by the
data table `builders/data/benchmarks.toml` (METHOD.md section 6).
"""

from __future__ import annotations

import re
import tomllib
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from builders.errors import UnknownNameError

_SPACES = re.compile(r"[\s_]+")

#: The seven zero-shot benchmarks of the Familiarity paper, in the paper's order.
ZERO_SHOT = (
    "crossner-ai",
    "crossner-literature",
    "crossner-music",
    "crossner-politics",
    "crossner-science",
    "mit-movie",
    "mit-restaurant",
)

MISC_LABEL = "else"


def normalise_label(raw: str) -> str:
    """Return the comparison form of a label: NFC, lower case, `_`/whitespace runs -> one space."""
    return _SPACES.sub(" ", unicodedata.normalize("NFC", raw).lower()).strip()


@dataclass(frozen=True)
class Benchmark:
    """A benchmark's label set: its raw tags and their verbalised, normalised labels."""

    name: str
    title: str
    tags: tuple[str, ...]
    zero_shot: bool

    def labels(self, keep_misc: bool = False) -> tuple[str, ...]:
        """Verbalised labels in tag order; `misc` is left out unless `keep_misc`."""
        out: list[str] = []
        for tag in self.tags:
            label = verbalise(tag)
            if label == MISC_LABEL and not keep_misc:
                continue
            if label not in out:
                out.append(label)
        return tuple(out)


@cache
def _table() -> dict:
    with resources.files("builders.data").joinpath("benchmarks.toml").open("rb") as fh:
        return tomllib.load(fh)


def verbalise(tag: str) -> str:
    """Turn a raw benchmark tag (`programlang`, `RATINGS_AVERAGE`) into its label text.

    Tags missing from the table fall back to their normalised form, so unseen tags of a
    user's own column files still get a sensible label.
    """
    key = normalise_label(tag).replace(" ", "_")
    table = _table()["verbalise"]
    if key in table:
        return str(table[key])
    return normalise_label(tag)


@cache
def benchmarks() -> dict[str, Benchmark]:
    """All benchmarks with a packaged label set, by name."""
    out = {}
    for name, entry in _table()["benchmarks"].items():
        out[name] = Benchmark(
            name=name,
            title=entry["title"],
            tags=tuple(entry["tags"]),
            zero_shot=bool(entry.get("zero_shot", False)),
        )
    return out


def get_benchmark(name: str) -> Benchmark:
    table = benchmarks()
    if name not in table:
        raise UnknownNameError("benchmark", name, list(table))
    return table[name]


def resolve_benchmarks(spec: str | list[str] | tuple[str, ...] | None) -> list[Benchmark]:
    """Parse a `--benchmarks` value: `all` (the seven zero-shot ones), or comma-separated names."""
    if spec is None or spec == "all" or spec == ["all"]:
        return [get_benchmark(n) for n in ZERO_SHOT]
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[Benchmark] = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        if name == "all":
            out.extend(get_benchmark(n) for n in ZERO_SHOT)
        else:
            out.append(get_benchmark(name))
    unique: dict[str, Benchmark] = {}
    for b in out:
        unique.setdefault(b.name, b)
    return list(unique.values())


def label_sets(
    selected: Sequence[Benchmark], keep_misc: bool = False
) -> dict[str, tuple[str, ...]]:
    """Benchmark name -> its evaluation labels: the shape every Familiarity report takes."""
    return {b.name: b.labels(keep_misc) for b in selected}


def union_labels(sets: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The evaluation label set L_Z: the union of the sets' labels, first-seen order."""
    return tuple(dict.fromkeys(z for labels in sets.values() for z in labels))


# ---------------------------------------------------------------- the paper's protocol
@cache
def paper_table() -> dict:
    """`data/paper.toml`: GLiNER's label lists and the authors' reference values."""
    with resources.files("builders.data").joinpath("paper.toml").open("rb") as fh:
        return tomllib.load(fh)


def paper_label_sets(names: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """GLiNER's evaluation label lists (`labels.json`) of the named benchmarks, verbatim: the
    authors' spelling and order, `else` kept."""
    table = paper_table()["gliner_labels"]
    missing = [n for n in names if n not in table]
    if missing:
        raise UnknownNameError("benchmark with a GLiNER label list", missing[0], list(table))
    return {n: tuple(table[n]) for n in names}


def benchmark_sets(
    spec: str | Sequence[str] | None, keep_misc: bool = False, protocol: str = "ours"
) -> dict[str, tuple[str, ...]]:
    """Benchmark name -> evaluation labels, as the protocol has them: our verbalisations
    (`misc` left out unless `keep_misc`), or GLiNER's lists under `paper`."""
    benches = resolve_benchmarks(spec if isinstance(spec, str) or spec is None else list(spec))
    if protocol == "paper":
        return paper_label_sets([b.name for b in benches])
    return label_sets(benches, keep_misc)


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
