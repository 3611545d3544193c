"""The splitter: score training labels against benchmark labels and build label-shift subsets.

    labels + counts (store) -> embeddings (cached) -> M[d, z] = sim(d, z) -> max | entropy
    -> quantile cuts -> selected label sets -> subsets materialised in DuckDB SQL
    -> Familiarity of the full corpus and of every subset against every benchmark

METHOD.md sections 2-4. A subset keeps the sentences with at least one mention of a selected
label, only those mentions, and only the negatives that are selected labels; since every
mention of a selected label survives, a subset's label counts are the corpus counts restricted
to its labels, which is what its Familiarity is computed from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from builders import __version__
from builders.errors import BuildersError
from builders.labels import Benchmark, resolve_benchmarks, union_labels
from builders.shift.familiarity import exact_overlap, familiarity, summarise
from builders.shift.scoring import (
    LEVELS,
    STRATEGIES,
    default_rule,
    entropy_scores,
    max_scores,
    profile_for,
    select,
)
from builders.splits.subsets import materialise, write_subset
from builders.store.db import Store, one

DEFAULT_MODEL = "all-mpnet-base-v2"
#: Named sources whose quantile profile is fixed by the paper, whatever their label count.
SOURCE_PROFILES = {"pilener": "pilener", "pilener-sample": "pilener", "nuner": "nuner"}


@dataclass(frozen=True)
class SplitConfig:
    """Everything that determines a build; written into every output and card."""

    source: str
    strategy: str = "entropy"
    levels: tuple[str, ...] = LEVELS
    benchmarks: tuple[str, ...] = ()
    model: str = DEFAULT_MODEL
    k: int = 1000
    temperature: float = 0.01
    weighting: str = "zipf"
    low_q: float | None = None
    high_q: float | None = None
    medium_q: tuple[float, float] | None = None
    profile: str | None = None
    per_benchmark: bool = False
    keep_misc: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise BuildersError(
                f"unknown strategy {self.strategy!r}. Valid: {', '.join(sorted(STRATEGIES))}"
            )
        bad = [lv for lv in self.levels if lv not in LEVELS]
        if bad or not self.levels:
            raise BuildersError(
                f"unknown level {bad[0] if bad else ''!r}. Valid: {', '.join(LEVELS)}"
            )
        if self.k < 1:
            raise BuildersError(f"--k must be >= 1, got {self.k}")
        if self.temperature <= 0:
            raise BuildersError(f"temperature must be > 0, got {self.temperature}")


@dataclass
class LabelTable:
    """The training labels of a source with their support counts (sorted by label text)."""

    labels: list[str]
    mentions: np.ndarray
    sentences: np.ndarray

    @classmethod
    def load(cls, store: Store, source: str) -> LabelTable:
        store.require_source(source)
        tbl = store.con.sql(
            "SELECT label, count(*) AS mentions, count(DISTINCT (split, idx)) AS sentences "
            "FROM mentions WHERE source = ? GROUP BY label ORDER BY label",
            params=[source],
        ).to_arrow_table()
        if tbl.num_rows == 0:
            raise BuildersError(f"source {source!r} has no mentions to score")
        return cls(
            tbl.column("label").to_pylist(),
            tbl.column("mentions").to_numpy().astype(np.int64),
            tbl.column("sentences").to_numpy().astype(np.int64),
        )


@dataclass
class FamiliarityReport:
    """Familiarity of one label set (with counts) against the chosen benchmarks."""

    per_label: dict[str, float]
    per_benchmark: dict[str, float]
    macro: float
    summary: dict[str, Any]
    benchmark_summaries: dict[str, dict[str, Any]]
    overlap: dict[str, float]
    top_training_labels: dict[str, list[tuple[str, float, int]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def familiarity_report(
    sims_zd: np.ndarray,
    counts: np.ndarray,
    train_labels: list[str],
    eval_labels: tuple[str, ...],
    benches: list[Benchmark],
    *,
    k: int,
    weighting: str,
    keep_misc: bool,
    seed: int,
    top: int = 5,
) -> FamiliarityReport:
    """F(z) for every evaluation label, per-benchmark means, the union macro, VB, CI, overlap."""
    keep = counts > 0
    labels_kept = [lab for lab, k_ in zip(train_labels, keep, strict=True) if k_]
    if not labels_kept:
        raise BuildersError("the label set is empty: nothing to compute Familiarity on")
    sims = sims_zd[:, keep]
    cnt = counts[keep]
    f = familiarity(sims, cnt, k=k, weighting=weighting, labels=labels_kept)
    per_label = {z: float(v) for z, v in zip(eval_labels, f, strict=True)}
    index = {z: i for i, z in enumerate(eval_labels)}
    per_bench: dict[str, float] = {}
    bench_sum: dict[str, dict[str, Any]] = {}
    overlap: dict[str, float] = {}
    train_set = set(labels_kept)
    for b in benches:
        vals = np.array([f[index[z]] for z in b.labels(keep_misc)])
        per_bench[b.name] = float(vals.mean())
        bench_sum[b.name] = summarise(vals, seed=seed).to_dict()
        overlap[b.name] = exact_overlap(b.labels(keep_misc), train_set)
    overlap["union"] = exact_overlap(eval_labels, train_set)
    top_labels: dict[str, list[tuple[str, float, int]]] = {}
    for b in benches:
        cols = np.array([index[z] for z in b.labels(keep_misc)])
        best = sims[cols].max(axis=0)  # closeness of each training label to the benchmark
        order = np.lexsort((np.arange(best.size), -(best * np.log1p(cnt))))[:top]
        top_labels[b.name] = [(labels_kept[i], float(best[i]), int(cnt[i])) for i in order]
    return FamiliarityReport(
        per_label=per_label,
        per_benchmark=per_bench,
        macro=float(f.mean()),
        summary=summarise(f, seed=seed).to_dict(),
        benchmark_summaries=bench_sum,
        overlap=overlap,
        top_training_labels=top_labels,
    )


@dataclass
class SubsetResult:
    name: str
    level: str
    strategy: str
    selection: dict[str, Any]
    sentences: int
    mentions: int
    labels: int
    familiarity: FamiliarityReport
    path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["familiarity"] = self.familiarity.to_dict()
        return d


@dataclass
class BuildResult:
    config: SplitConfig
    profile: str
    eval_labels: tuple[str, ...]
    full: SubsetResult
    subsets: list[SubsetResult]
    embedded_new: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "toolkit_version": __version__,
            "config": asdict(self.config),
            "profile": self.profile,
            "eval_labels": list(self.eval_labels),
            "embedded_new": self.embedded_new,
            "full": self.full.to_dict(),
            "subsets": [s.to_dict() for s in self.subsets],
        }


def similarity_matrix(
    store: Store, model: str, train: list[str], evals: tuple[str, ...], progress: bool = False
) -> tuple[np.ndarray, int]:
    """M[d, z] = max(cos, 0) for training labels d and evaluation labels z; cached embeddings."""
    from builders.shift.embedder import Embedder, cosine_clipped

    emb = Embedder(model)
    vecs = emb.embed_cached(store.con, list(train) + list(evals), progress=progress)
    m = cosine_clipped(vecs[: len(train)], vecs[len(train) :], dtype=np.float32)
    return m, emb.last_new


def label_scores(m: np.ndarray, strategy: str, temperature: float) -> np.ndarray:
    return max_scores(m) if strategy == "max" else entropy_scores(m, temperature)


def build(
    store: Store,
    cfg: SplitConfig,
    out: Path | None = None,
    *,
    progress: bool = False,
    command: str | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> list[BuildResult]:
    """Score, select, materialise and measure. Returns one result per benchmark group.

    With `per_benchmark`, each benchmark gets its own scores and subsets; otherwise the
    scores are over the union of the benchmarks' labels (the paper's definition).
    """
    stage = on_stage or (lambda s: None)
    benches = resolve_benchmarks(list(cfg.benchmarks) or None)
    table = LabelTable.load(store, cfg.source)
    groups = [[b] for b in benches] if cfg.per_benchmark else [benches]
    all_evals = union_labels(benches, cfg.keep_misc)
    stage(f"embedding {len(table.labels):,} training and {len(all_evals)} evaluation labels")
    m_all, new = similarity_matrix(store, cfg.model, table.labels, all_evals, progress)
    profile = cfg.profile or SOURCE_PROFILES.get(cfg.source) or profile_for(len(table.labels))
    rule = default_rule(profile, cfg.strategy).with_overrides(cfg.low_q, cfg.high_q, cfg.medium_q)
    results = []
    for group in groups:
        evals = union_labels(group, cfg.keep_misc)
        cols = np.array([all_evals.index(z) for z in evals])
        m = m_all[:, cols]
        sims_zd = np.ascontiguousarray(m.T)
        stage(f"scoring ({cfg.strategy}) against {len(evals)} labels")
        scores = label_scores(m, cfg.strategy, cfg.temperature)
        cuts = select(scores, cfg.strategy, rule)

        def fam(
            counts: np.ndarray,
            grp: list[Benchmark] = group,
            s: np.ndarray = sims_zd,
            ev: tuple[str, ...] = evals,
        ) -> FamiliarityReport:
            return familiarity_report(
                s,
                counts,
                table.labels,
                ev,
                grp,
                k=cfg.k,
                weighting=cfg.weighting,
                keep_misc=cfg.keep_misc,
                seed=cfg.seed,
            )

        stage("Familiarity of the full corpus")
        full = SubsetResult(
            name=cfg.source,
            level="full",
            strategy=cfg.strategy,
            selection={},
            sentences=_count_sentences(store, cfg.source),
            mentions=int(table.mentions.sum()),
            labels=len(table.labels),
            familiarity=fam(table.mentions),
        )
        suffix = f"-{group[0].name}" if cfg.per_benchmark else ""
        subsets = []
        for level in cfg.levels:
            cut = cuts[level]
            counts = np.where(cut.mask, table.mentions, 0)
            if counts.sum() == 0:
                raise BuildersError(
                    f"{level} label-shift cut selects no label (thresholds {cut.thresholds}); "
                    "widen its quantile"
                )
            name = f"{cfg.source}{suffix}-{level}-shift"
            stage(f"materialising {name}")
            selected = [lab for lab, keep in zip(table.labels, cut.mask, strict=True) if keep]
            rows = materialise(store, cfg.source, selected)
            sub = SubsetResult(
                name=name,
                level=level,
                strategy=cfg.strategy,
                selection={**cut.to_dict(), "profile": rule.profile},
                sentences=rows.num_rows,
                mentions=int(counts.sum()),
                labels=len(selected),
                familiarity=fam(counts),
            )
            if out is not None:
                sub.path = str(
                    write_subset(
                        out / name,
                        cfg.strategy,
                        rows,
                        sub,
                        cfg,
                        scores,
                        cut,
                        table,
                        command,
                        full=full,
                        cuts=cuts,
                    )
                )
            subsets.append(sub)
        results.append(BuildResult(cfg, rule.profile, evals, full, subsets, embedded_new=new))
    return results


def _count_sentences(store: Store, source: str) -> int:
    return int(
        one(store.con.execute("SELECT count(*) FROM sentences WHERE source = ?", [source]))[0]
    )
