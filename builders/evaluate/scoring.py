"""A model's predictions on stored benchmarks, scored as the field scores them (METHOD.md
section 9: the files read, how sentences are matched, exact-match spans, micro per benchmark).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builders.errors import BuildersError, InputError, SourceFormatError, opt
from builders.labels import MISC_LABEL, benchmarks
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

    def to_dict(self) -> dict[str, Any]:
        """support (gold mentions scored), tp, fp, fn, precision, recall and F1 (None where
        the label has no gold mention to be scored on, or a table gave F1 alone)."""
        if self.tp is None or self.fp is None or self.fn is None:
            return {"label": self.label, "support": None, "tp": None, "fp": None, "fn": None,
                    "precision": None, "recall": None, "f1": self.given_f1}  # fmt: skip
        p, r, f = prf(self.tp, self.fp, self.fn)
        support = self.tp + self.fn
        return {"label": self.label, "support": support, "tp": self.tp, "fp": self.fp,
                "fn": self.fn, "precision": p, "recall": r, "f1": f if support else None}  # fmt: skip

    @property
    def f1(self) -> float | None:
        return self.to_dict()["f1"]


@dataclass
class BenchmarkScore:
    """A benchmark's score from one predictions file, with what the file held beyond it:
    sentences `scored` of the gold's and `unmatched`, predicted labels the benchmark lacks
    (`outside`, false positives), the reader's counts (`read`), and the gold and predicted
    (gold row, start, stop, label) `sets` scored."""

    name: str
    path: str
    labels: list[LabelScore]
    benchmark_labels: tuple[str, ...] = ()
    gold: str | None = None
    sentences: int | None = None
    scored: int | None = None
    unmatched: int = 0
    outside: dict[str, int] = field(default_factory=dict)
    read: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    sets: tuple[set[tuple[int, int, int, str]], set[tuple[int, int, int, str]]] | None = field(
        default=None, repr=False
    )

    def to_dict(self) -> dict[str, Any]:
        """The micro figures (predictions of outside labels are false positives, as GLiNER
        counts them; None where a table gave F1 alone or no label is left), what was counted
        and each label's figures."""
        rows = [s.to_dict() for s in self.labels]
        micro: dict[str, Any] = dict.fromkeys(("tp", "fp", "fn", "precision", "recall", "f1"))
        if rows and all(r["tp"] is not None for r in rows):
            tp, fp, fn = (sum(r[k] for r in rows) for k in ("tp", "fp", "fn"))
            fp += sum(self.outside.values())
            micro = dict(zip(micro, (tp, fp, fn, *prf(tp, fp, fn)), strict=True))
        return {
            "name": self.name, "predictions": self.path, "gold": self.gold,
            "sentences": self.sentences, "scored": self.scored, "unmatched": self.unmatched,
            **micro, "outside": self.outside, "read": self.read, "notes": self.notes, "labels": rows,
        }  # fmt: skip

    @property
    def f1(self) -> float | None:
        return self.to_dict()["f1"]


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
    `on_note` hears of a benchmark ingested from its local copy (`$LABELSHIFT_DATA`)."""
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
    named = _policy(bench.labels, misc)
    labels = {*named, *(g[3] for g in gold)}
    hits, said, true = (Counter(x[3] for x in s) for s in (gold & pred, pred, gold))
    scored = len(examples) - unmatched
    return BenchmarkScore(
        name=bench.name,
        path=str(path),
        labels=[
            LabelScore(z, hits[z], said[z] - hits[z], true[z] - hits[z]) for z in sorted(labels)
        ],
        benchmark_labels=named,
        gold=f"{source}:{split}",
        sentences=len(gold_rows),
        scored=scored,
        unmatched=unmatched,
        outside={z: n for z, n in sorted(said.items()) if z not in labels},
        read={**dict(sorted(report.counts.items())), "overlapping_predictions": overlapping},
        sets=(gold, pred),
    )


def _score_table(store: Store, path: Path, misc: str) -> list[BenchmarkScore]:
    """A per-label score table, its labels verbalised as a predictions file's are."""
    import polars as pl

    try:
        df = pl.read_csv(path, separator="\t" if path.suffix == ".tsv" else ",", infer_schema=False)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise SourceFormatError(path, None, f"not a readable score table ({exc})") from None
    given = next((c for c in ("tp", "f1", "f1_pct") if c in df.columns), None)
    if not {"benchmark", "label"} <= set(df.columns) or given is None:
        raise SourceFormatError(path, 1, "a score table has the columns benchmark, label and "
                                "tp, fp, fn, or f1 (0-1), or f1_pct (0-100); its header", df.columns)  # fmt: skip
    cols = ["tp", "fp", "fn"] if given == "tp" else [given]
    nums = df.with_columns(pl.col(c).cast(pl.Float64, strict=False) for c in cols)
    top = 100 if given == "f1_pct" else 1 if given == "f1" else float("inf")
    bad = nums.with_row_index("line", 2).filter(pl.any_horizontal(
        pl.col(c).is_null() | (pl.col(c) < 0) | (pl.col(c) > top) | ((pl.col(c) % 1 != 0) & (given == "tp"))
        for c in cols))  # fmt: skip
    if bad.height:
        more = "; a column of percentages is f1_pct" if given == "f1" else ""
        want = "whole numbers >= 0" if given == "tp" else f"numbers from 0 to {top}{more}"
        line = int(bad["line"][0])
        raise SourceFormatError(path, line, f"{'/'.join(cols)}: not {want}", df.row(line - 2))
    out: dict[str, BenchmarkScore] = {}
    benches: dict[str, EvalSet] = {}
    for line, row in enumerate(nums.iter_rows(named=True), start=2):
        name = str(row["benchmark"] or "")
        if name not in out:
            benches[name] = bench = _benchmark(store, name, path)
            out[name] = BenchmarkScore(bench.name, str(path), [], _policy(bench.labels, misc))
        score, label = out[name], benches[name].label_of(str(row["label"] or ""))
        if label in {s.label for s in score.labels} or label in score.outside:
            raise SourceFormatError(
                path, line, f"label {label!r} of {name} listed twice", row["label"]
            )
        if misc == "drop" and label == MISC_LABEL:
            continue
        if given == "tp":
            found = LabelScore(label, int(row["tp"]), int(row["fp"]), int(row["fn"]))
        else:
            found = LabelScore(label, given_f1=row[given] / top)
        if label in score.benchmark_labels:
            score.labels.append(found)
        else:  # its predictions are false positives, as in a predictions file
            score.outside[label] = found.fp or 0
    for score in out.values():
        listed = {s.label for s in score.labels}
        if missing := [z for z in score.benchmark_labels if z not in listed]:
            score.notes.append(f"{path}: lists {len(listed)} of {score.name}'s "
                               f"{len(score.benchmark_labels)} labels (not: {', '.join(missing)})")  # fmt: skip
        if score.outside:
            score.notes.append(f"{path}: labels {score.name} lacks: {', '.join(score.outside)}")
    return list(out.values())


def _policy(labels: Sequence[str], misc: str) -> tuple[str, ...]:
    """A benchmark's labels as the misc policy scores them."""
    return tuple(z for z in labels if misc == "keep" or z != MISC_LABEL)
