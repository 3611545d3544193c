"""Each evaluation label's F1 beside what the model learned from (METHOD.md section 9): its
Familiarity, whether training saw it, its training mentions and closest training labels
(`label_context`); then the paper's views of them (`views`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builders.deferred import np
from builders.errors import AmbiguousInput, InputError, opt
from builders.hub.folder import BUILD_JSON, configs_of, read_json
from builders.labels import normalise_label, union_labels
from builders.shift.benchmarks import FILE_PREFIX, read_label_file
from builders.shift.embedder import Embedder
from builders.shift.report import (
    FamiliarityReport,
    LabelTable,
    familiarity_report,
    similarity_matrix,
)

if TYPE_CHECKING:
    from builders.shift.specs import EmbeddingSpec, MetricSpec
    from builders.store import Store

#: Closest training labels listed per evaluation label.
CLOSEST = 3
#: Bootstrap resamples of a correlation's 95% CI.
RESAMPLES = 1000


@dataclass(frozen=True)
class Training:
    """What a model was trained on: a stored source, a level folder (one config's build.json)
    or a label-count file; `record` is the level's build.json."""

    name: str
    kind: str
    table: LabelTable
    folder: Path | None = None
    config: str | None = None
    record: dict[str, Any] | None = None

    def describe(self) -> dict[str, Any]:
        level = (self.record or {}).get("subset") or {}
        return {
            "name": self.name, "kind": self.kind, "config": self.config,
            "level": level.get("level"), "build": ((self.record or {}).get("build") or {}).get("id"),
            "labels": len(self.table.labels), "mentions": int(self.table.mentions.sum()),
        }  # fmt: skip


def training(store: Store, spec: str, config: str | None = None) -> Training:
    """The training data `spec` names: a label-count file (`file:PATH`), a folder written by
    build-splits (its `config`, where it holds several), or a source in the store."""
    path = Path(spec.removeprefix(FILE_PREFIX))
    if spec.startswith(FILE_PREFIX) or path.is_file():
        labels, counts = read_label_file(path)
        if counts is None:
            raise InputError(f"{path}: a label list without counts; training data needs "
                             "label -> mentions (a JSON object, or [label, count] pairs)")  # fmt: skip
        merged: dict[str, int] = {}
        for label in labels:
            key = normalise_label(label)
            merged[key] = merged.get(key, 0) + counts[label]
        return Training(path.name, "file", LabelTable.from_counts(merged))
    if path.is_dir():
        if store.has_source(spec):
            raise AmbiguousInput(f"{spec!r} is a folder and a source in the store: write ./{spec}")
        return _level(path, config)
    store.require_source(spec)
    return Training(spec, "source", LabelTable.load(store, spec))


def _level(folder: Path, config: str | None) -> Training:
    configs = configs_of(folder)
    if config is None and len(configs) > 1:
        raise AmbiguousInput(f"{folder} holds the configs {', '.join(configs)}: name one with "
                             f"{opt('config')}")  # fmt: skip
    config = config or (configs[0] if configs else None)
    if config not in configs:
        held = ", ".join(configs) or "none"
        raise InputError(f"{folder}: no config {config!r} with a {BUILD_JSON} (it holds: {held})")
    record = read_json(folder / config / BUILD_JSON)
    rows = record.get("labels") if isinstance(record, dict) else None
    if not rows:
        raise InputError(f"{folder / config / BUILD_JSON}: no label counts ('labels')")
    counts = {r["label"]: int(r["mentions"]) for r in rows}
    return Training(folder.name, "folder", LabelTable.from_counts(counts), folder, config, record)


@dataclass(frozen=True)
class Context:
    """The Familiarity report of the training labels against the scored label sets, each
    evaluation label's closest training labels, and the runtime that embedded them."""

    report: FamiliarityReport
    closest: dict[str, list[tuple[str, float]]]
    runtime: str

    def labels(self, table: LabelTable, names: Iterable[str]) -> dict[str, dict[str, Any]]:
        """Each of the labels `names`' context: Familiarity (None for `else`), seen (its text
        a training label's), its training mentions, closest training labels."""
        where = {lab: i for i, lab in enumerate(table.labels)}
        return {
            z: {
                "familiarity": self.report.per_label.get(z),
                "seen": z in where,
                "mentions": int(table.mentions[where[z]]) if z in where else 0,
                "closest": [{"label": d, "similarity": s} for d, s in self.closest.get(z, [])],
            }
            for z in names
        }


def label_context(
    store: Store,
    train: Training,
    benchmarks: Mapping[str, Sequence[str]],
    embedding: EmbeddingSpec | Embedder,
    metric: MetricSpec,
    progress: bool = False,
) -> Context:
    """Familiarity of `train` against `benchmarks` (name -> labels; `else` left out by the
    caller), through the store's and the user's embedding caches."""
    emb = Embedder.of(embedding)
    table, evals = train.table, union_labels(benchmarks)
    sims, _ = similarity_matrix(store, emb, table.labels, evals, progress, transposed=True)
    report = familiarity_report(
        sims, table.mentions, table.labels, benchmarks, model=emb.model_name, metric=metric
    )
    top = np.argsort(-sims, axis=1, kind="stable")[:, :CLOSEST]
    closest = {
        z: [(table.labels[j], float(sims[i, j])) for j in top[i]] for i, z in enumerate(evals)
    }
    return Context(report, closest, emb.backend)


def views(points: Sequence[Mapping[str, Any]], seed: int) -> dict[str, Any]:
    """The paper's views of (benchmark, label) points: mean F1 of seen and unseen labels, the
    fit of F1 on log10 training mentions over seen labels, and Pearson and Spearman r of
    Familiarity and F1 with a bootstrap 95% CI."""
    pts = [p for p in points if p["f1"] is not None and p["familiarity"] is not None]
    out: dict[str, Any] = {}
    for key, seen in (("seen", True), ("unseen", False)):
        f1 = [p["f1"] for p in pts if p["seen"] == seen]
        out[key] = {"labels": len(f1), "mean_f1": float(np.mean(f1)) if f1 else None}
    x = np.log10([p["mentions"] for p in pts if p["seen"]])
    y = np.array([p["f1"] for p in pts if p["seen"]])
    out["fit"] = {"n": int(x.size), "slope": None, "intercept": None, "r2": None}
    if x.size >= 3 and np.ptp(x) > 0:
        slope, intercept = np.polyfit(x, y, 1)
        r = _r(x, y, lambda a, b: a)
        out["fit"] |= {"slope": float(slope), "intercept": float(intercept),
                       "r2": None if r is None else r * r}  # fmt: skip
    fam = np.array([p["familiarity"] for p in pts])
    f1s = np.array([p["f1"] for p in pts])
    for name, rank in (("pearson", lambda a, b: a), ("spearman", _ranks)):
        r = _r(fam, f1s, rank)
        ci = _ci(fam, f1s, rank, seed) if r is not None else None
        out[name] = {"n": int(fam.size), "r": r, "ci": ci}
    return out


def _ranks(a: np.ndarray, axis: int) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(a, axis=axis)


def _r(x: np.ndarray, y: np.ndarray, rank: Callable[[np.ndarray, int], np.ndarray]) -> float | None:
    """scipy's Pearson r of (ranked) x and y; None under 3 points or with a constant side."""
    from scipy.stats import pearsonr

    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(pearsonr(rank(x, -1), rank(y, -1)).statistic)


def _ci(
    x: np.ndarray, y: np.ndarray, rank: Callable[[np.ndarray, int], np.ndarray], seed: int
) -> list[float] | None:
    """The percentile 95% CI of r over paired resamples; undefined resamples left out."""
    from scipy.stats import bootstrap, pearsonr

    def stat(a: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
        return pearsonr(rank(a, axis), rank(b, axis), axis=axis).statistic

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        res = bootstrap((x, y), stat, paired=True, vectorized=True, n_resamples=RESAMPLES,
                        method="percentile", rng=np.random.default_rng(seed))  # fmt: skip
    dist = res.bootstrap_distribution
    return (
        [float(v) for v in np.nanpercentile(dist, [2.5, 97.5])] if np.isfinite(dist).any() else None
    )
