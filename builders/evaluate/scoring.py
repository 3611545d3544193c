"""A model's predictions on stored benchmarks, scored as the field scores them (METHOD.md
section 9): exact-match spans, precision, recall and F1 per label, micro per benchmark.

    files = prediction_files(["preds/"])             (benchmark or None, path) pairs
    scores = score_files(store, files, misc="keep")  one `BenchmarkScore` per benchmark

A predictions file is GLiNER json in either layout, read by the toolkit's `gliner` reader
(`tokenized_text` + `ner` [start, end, label] with end inclusive; or `sentence` + `entities`
with character `pos`), or a per-label score table (`.csv` / `.tsv`: `benchmark`, `label`, and
`tp`, `fp`, `fn`, or `f1` in 0-1, or `f1_pct` in 0-100). A JSON file is named after the stored
benchmark it predicts (`crossner-ai.json`), or `NAME=FILE` names it. Its sentences are matched
to the benchmark's stored sentences by their tokens (the k-th copy of a sentence to its k-th
copy); a sentence that matches none, a label the benchmark lacks, an offset the reader moved
to word boundaries are counted in the score, and a file that mostly matches nothing is refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builders.errors import BuildersError, InputError, SourceFormatError, opt
from builders.labels import MISC_LABEL, benchmarks, normalise_label
from builders.shift.benchmarks import EvalSet, local_copy, resolve, sentence_sources
from builders.sources.base import ReadReport
from builders.sources.gliner import read as read_gliner

if TYPE_CHECKING:
    from builders.store import Store

#: How `else` / `misc` is scored: kept as a label (GLiNER's published evaluation), or dropped
#: from the gold and the predictions (UniversalNER's).
MISC_POLICIES = ("keep", "drop")
TABLE_SUFFIXES = (".csv", ".tsv")
#: JSON may be compressed (the `gliner` reader reads .xz and .gz).
PREDICTION_SUFFIXES = (".json", ".json.xz", ".json.gz", *TABLE_SUFFIXES)


def benchmark_of(path: Path) -> str | None:
    """The benchmark a predictions file is named after (`crossner-ai.json.xz`: crossner-ai);
    None for a score table (it names its benchmarks) or a file of another kind."""
    end = next((s for s in PREDICTION_SUFFIXES if path.name.endswith(s)), None)
    return None if end is None or end in TABLE_SUFFIXES else path.name[: -len(end)]


#: A file in a predictions folder that is not predictions (`builders predict` writes it).
MANIFEST = "manifest.json"


def prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    """Precision, recall and F1, with GLiNER's `compute_prf` arithmetic (0 where undefined)."""
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * (p * r) / (p + r) if p + r else 0.0)


@dataclass(frozen=True)
class LabelScore:
    """One benchmark label's counts, or its F1 alone where a score table gives only that."""

    label: str
    tp: int | None = None
    fp: int | None = None
    fn: int | None = None
    given_f1: float | None = None

    @property
    def support(self) -> int | None:
        """Gold mentions in the scored sentences (None: a table gave F1 alone)."""
        return None if self.tp is None or self.fn is None else self.tp + self.fn

    @property
    def f1(self) -> float | None:
        """F1, or None where the label has no gold mention to be scored on."""
        if self.given_f1 is not None or self.tp is None:
            return self.given_f1
        return prf(self.tp, self.fp or 0, self.fn or 0)[2] if self.support else None

    def to_dict(self) -> dict[str, Any]:
        p, r, _ = prf(self.tp, self.fp or 0, self.fn or 0) if self.tp is not None else (None,) * 3
        return {"label": self.label, "support": self.support, "tp": self.tp, "fp": self.fp,
                "fn": self.fn, "precision": p, "recall": r, "f1": self.f1}  # fmt: skip


@dataclass
class BenchmarkScore:
    """A benchmark's score from one predictions file, with what the file held beyond it.

    Attributes:
        sentences: the gold split's sentences; `scored`: prediction records matched to one;
            `unmatched`: records that match none (counted, never scored).
        outside: predicted labels the benchmark lacks -> predictions (false positives).
        read: what the reader counted (`char_spans_snapped`, `duplicate_spans`, ...) and
            `overlapping_predictions` (nested or overlapping spans).
    """

    name: str
    path: str
    labels: list[LabelScore]
    gold: str | None = None
    sentences: int | None = None
    scored: int | None = None
    unmatched: int = 0
    outside: dict[str, int] = field(default_factory=dict)
    read: dict[str, int] = field(default_factory=dict)
    #: The gold and predicted (gold row, start, stop, label) sets scored (a file's, not a table's).
    sets: tuple[set[tuple[int, int, int, str]], set[tuple[int, int, int, str]]] | None = field(
        default=None, repr=False
    )

    def counts(self) -> tuple[int, int, int] | None:
        """Micro tp, fp, fn (predictions of outside labels are false positives, as GLiNER
        counts them); None where the file gave F1 alone."""
        if any(s.tp is None for s in self.labels):
            return None
        tp, fp, fn = (sum(getattr(s, k) for s in self.labels) for k in ("tp", "fp", "fn"))
        return tp, fp + sum(self.outside.values()), fn

    @property
    def f1(self) -> float | None:
        found = self.counts()
        return None if found is None else prf(*found)[2]

    def to_dict(self) -> dict[str, Any]:
        found = self.counts()
        p, r, f = prf(*found) if found else (None, None, None)
        return {
            "name": self.name, "predictions": self.path, "gold": self.gold,
            "sentences": self.sentences, "scored": self.scored, "unmatched": self.unmatched,
            "tp": found and found[0], "fp": found and found[1], "fn": found and found[2],
            "precision": p, "recall": r, "f1": f, "outside": self.outside, "read": self.read,
            "labels": [s.to_dict() for s in self.labels],
        }  # fmt: skip


def prediction_files(args: Sequence[str]) -> list[tuple[str | None, Path]]:
    """(benchmark named by `NAME=`, or None, file) for each argument: a file, `NAME=FILE`, or
    a folder of `.json` (`.json.xz`, `.json.gz`), `.csv` and `.tsv` files (its `manifest.json`
    left out)."""
    out: list[tuple[str | None, Path]] = []
    for arg in args:
        name, sep, rest = arg.partition("=")
        named = bool(sep) and not Path(arg).exists()
        path = Path(rest if named else arg)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.name.endswith(PREDICTION_SUFFIXES))
            found = [p for p in found if p.name != MANIFEST and p.is_file()]
            if not found:
                raise InputError(
                    f"{path}: holds no predictions file ({', '.join(PREDICTION_SUFFIXES)})"
                )
            out += [(name if named else None, p) for p in found]
        elif path.is_file():
            out.append((name if named else None, path))
        else:
            raise InputError(f"{path}: no such predictions file or folder")
    names = Counter(
        n or benchmark_of(p) or p.name for n, p in out if p.suffix not in TABLE_SUFFIXES
    )
    twice = sorted(n for n, c in names.items() if c > 1)
    if twice:
        raise InputError(f"benchmark {twice[0]!r} is predicted by two files; give one")
    return out


def score_files(
    store: Store,
    files: Sequence[tuple[str | None, Path]],
    misc: str = "keep",
    on_note: Callable[[str], None] | None = None,
) -> list[BenchmarkScore]:
    """Every file's scores, benchmark by benchmark (a score table's benchmarks in its order);
    `on_note` hears of a benchmark ingested from its local copy (`$LABELSHIFT_DATA`).

    Raises:
        BuildersError: a file that cannot be read (named, with its line and record), one
            whose benchmark is unknown or has no stored sentences, one whose sentences mostly
            match none of its benchmark's, or a benchmark scored twice.
    """
    if misc not in MISC_POLICIES:
        raise InputError(f"{opt('misc', misc)}: not one of {', '.join(MISC_POLICIES)}")
    out: dict[str, BenchmarkScore] = {}
    for name, path in files:
        if path.suffix in TABLE_SUFFIXES:
            found = _score_table(store, path, misc)
        else:
            bench = _benchmark(store, name or benchmark_of(path) or path.stem, path)
            found = [_score_json(store, bench, path, misc, on_note or (lambda s: None))]
        for score in found:
            if score.name in out:
                raise InputError(f"{path}: benchmark {score.name!r} is scored by two files")
            out[score.name] = score
    if not out:
        raise InputError("no predictions given")
    return list(out.values())


def _benchmark(store: Store, name: str, path: Path) -> EvalSet:
    """The benchmark a file names, `else` kept (the misc policy decides later)."""
    if name not in benchmarks() and not store.has_source(name) and local_copy(name) is None:
        stored = ", ".join(n for n in store.source_names()) or "none"
        raise InputError(
            f"{path}: predicts benchmark {name!r} (its name), which is neither a packaged "
            f"benchmark ({', '.join(benchmarks())}) nor a source in {store.path} ({stored}): "
            "name the benchmark as NAME=FILE, or ingest its test set"
        )
    try:
        [found] = resolve(name, store=store, keep_misc=True)
    except BuildersError as exc:
        raise exc.reworded(f"{path}: benchmark {name!r}: {exc}") from None
    return found


def _score_json(
    store: Store, bench: EvalSet, path: Path, misc: str, note: Callable[[str], None]
) -> BenchmarkScore:
    report = ReadReport()
    examples = list(read_gliner(path, report))
    if not examples:
        raise InputError(f"{path}: holds no sentences (an empty list)")
    rows, why = sentence_sources(store, [bench], note)
    if not rows:
        raise InputError(f"{path}: benchmark {bench.name!r} has no sentences to score against: "
                         f"{why[bench.name]}")  # fmt: skip
    _, source, split = rows[0]
    gold_rows = store.sentences_with_spans(source, split)
    where: dict[tuple[str, ...], list[int]] = {}
    for i, (_, _, tokens, _) in enumerate(gold_rows):
        where.setdefault(tuple(tokens), []).append(i)
    taken: Counter[tuple[str, ...]] = Counter()
    gold: set[tuple[int, int, int, str]] = set()
    pred: set[tuple[int, int, int, str]] = set()
    overlapping = unmatched = 0
    for ex in examples:
        key = tuple(ex.tokens)
        if taken[key] >= len(where.get(key, ())):
            unmatched += 1
            continue
        i = where[key][taken[key]]
        taken[key] += 1
        gold |= {(i, a, b, lab) for a, b, lab in gold_rows[i][3]}
        pred |= {(i, a, b, bench.label_of(raw)) for a, b, raw in ex.spans}
        end = 0
        for a, b, _ in sorted(ex.spans):  # a span that starts inside an earlier one
            overlapping, end = overlapping + (a < end), max(end, b)
    if unmatched * 2 > len(examples):
        raise InputError(
            f"{path}: {unmatched:,} of {len(examples):,} sentences match no sentence of "
            f"{bench.name} ({source}:{split}): predictions of another benchmark, or of another "
            f"copy of it? Name the benchmark a file predicts with NAME={path}"
        )
    if misc == "drop":
        gold = {g for g in gold if g[3] != MISC_LABEL}
        pred = {p for p in pred if p[3] != MISC_LABEL}
    labels = {*bench.labels, *(g[3] for g in gold)} - ({MISC_LABEL} if misc == "drop" else set())
    hits, said, true = (Counter(x[3] for x in s) for s in (gold & pred, pred, gold))
    return BenchmarkScore(
        name=bench.name,
        path=str(path),
        labels=[
            LabelScore(z, hits[z], said[z] - hits[z], true[z] - hits[z]) for z in sorted(labels)
        ],
        gold=f"{source}:{split}",
        sentences=len(gold_rows),
        scored=len(examples) - unmatched,
        unmatched=unmatched,
        outside={z: n for z, n in sorted(said.items()) if z not in labels},
        read={**dict(sorted(report.counts.items())), "overlapping_predictions": overlapping},
        sets=(gold, pred),
    )


def _score_table(store: Store, path: Path, misc: str) -> list[BenchmarkScore]:
    """A per-label score table: `benchmark`, `label`, and tp/fp/fn, `f1` (0-1) or `f1_pct`."""
    import polars as pl

    try:
        df = pl.read_csv(path, separator="\t" if path.suffix == ".tsv" else ",")
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise SourceFormatError(path, None, f"not a readable score table ({exc})") from None
    given = [c for c in ("tp", "f1", "f1_pct") if c in df.columns]
    if not {"benchmark", "label"} <= set(df.columns) or not given:
        raise SourceFormatError(path, 1, "a score table has the columns benchmark, label and "
                                "tp, fp, fn, or f1 (0-1), or f1_pct (0-100); its header", df.columns)  # fmt: skip
    out: dict[str, BenchmarkScore] = {}
    known: dict[str, set[str]] = {}
    for line, row in enumerate(df.iter_rows(named=True), start=2):
        label, f1 = normalise_label(str(row["label"] or "")), _table_f1(path, line, row, given[0])
        name = str(row["benchmark"] or "")
        if name not in out:
            bench = _benchmark(store, name, path)
            out[name], known[name] = BenchmarkScore(bench.name, str(path), []), set(bench.labels)
        score = out[name]
        if label in {s.label for s in score.labels} or label in score.outside:
            raise SourceFormatError(path, line, f"label {label!r} of {name} listed twice", label)
        if misc == "drop" and label == MISC_LABEL:
            continue
        tp, fp, fn = (None if f1 is not None else int(row[k]) for k in ("tp", "fp", "fn"))
        found = LabelScore(label, tp, fp, fn, given_f1=f1)
        if label not in known[name]:  # its predictions are false positives, as in a file
            score.outside[label] = found.fp or 0
        else:
            score.labels.append(found)
    return list(out.values())


def _table_f1(path: Path, line: int, row: dict[str, Any], column: str) -> float | None:
    """A table row's F1 (from tp/fp/fn it is computed later), checked."""
    keys = ("tp", "fp", "fn") if column == "tp" else (column,)
    values = [row.get(k) for k in keys]
    if any(not isinstance(v, int | float) or v != v or v < 0 for v in values):
        raise SourceFormatError(path, line, f"{'/'.join(keys)} not numbers >= 0", values)
    if column == "tp":
        if any(float(v) != int(v) for v in values):  # type: ignore[arg-type]
            raise SourceFormatError(path, line, "tp/fp/fn are not whole numbers", values)
        return None
    top = 100 if column == "f1_pct" else 1
    if values[0] > top:  # type: ignore[operator]
        more = "; a column of percentages is f1_pct" if column == "f1" else ""
        raise SourceFormatError(path, line, f"{column} above {top}{more}", values[0])
    return float(values[0]) / top  # type: ignore[arg-type]
