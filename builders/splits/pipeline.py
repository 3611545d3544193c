"""The splitter: score training labels against benchmark labels and build label-shift subsets.

    labels + counts (store) -> embeddings (cached) -> M[d, z] = sim(d, z) -> max | entropy
    -> quantile cuts -> selected label sets -> subset rows (store SQL)
    -> Familiarity of the full corpus and of every subset against every benchmark
    -> (with `out`) every folder written at once (`builders.splits.subsets`)

METHOD.md sections 2-4. A subset keeps the sentences with at least one mention of a selected
label, only those mentions, and only the negatives that are selected labels; since every
mention of a selected label survives, a subset's label counts are the corpus counts restricted
to its labels, which is what its Familiarity is computed from.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from builders.errors import BuildersError
from builders.labels import label_sets, resolve_benchmarks, union_labels
from builders.shift.embedder import canonical_name
from builders.shift.report import (
    FamiliarityReport,
    LabelTable,
    familiarity_report,
    similarity_matrix,
)
from builders.shift.scoring import (
    SelectionRule,
    default_rule,
    entropy_scores,
    max_scores,
    profile_for,
    select,
)
from builders.splits.config import BuildResult, SplitConfig, SubsetResult
from builders.store import Store

#: Named sources whose quantile profile is fixed by the paper, whatever their label count.
SOURCE_PROFILES = {"pilener": "pilener", "pilener-sample": "pilener", "nuner": "nuner"}


def label_scores(m: np.ndarray, strategy: str, temperature: float) -> np.ndarray:
    return max_scores(m) if strategy == "max" else entropy_scores(m, temperature)


def selection_rule(cfg: SplitConfig, n_labels: int) -> SelectionRule:
    """The paper's quantiles for the source's profile, with the config's overrides."""
    profile = cfg.profile or SOURCE_PROFILES.get(cfg.source) or profile_for(n_labels)
    return default_rule(profile, cfg.strategy).with_overrides(cfg.low_q, cfg.high_q, cfg.medium_q)


def build(
    store: Store,
    cfg: SplitConfig,
    out: Path | None = None,
    *,
    progress: bool = False,
    command: str | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> list[BuildResult]:
    """Score, select, materialise and measure; with `out`, write every folder at once.

    Returns one result per benchmark group: with `per_benchmark`, each benchmark gets its own
    scores and subsets; otherwise the scores are over the union of the benchmarks' labels (the
    paper's definition). Every level of every group is computed before anything is written.
    """
    stage = on_stage or (lambda s: None)
    sets = label_sets(resolve_benchmarks(list(cfg.benchmarks) or None), cfg.keep_misc)
    table = LabelTable.load(store, cfg.source)
    all_evals = union_labels(sets)
    stage(f"embedding {len(table.labels):,} training and {len(all_evals)} evaluation labels")
    m_all, new = similarity_matrix(
        store,
        cfg.model,
        table.labels,
        all_evals,
        progress,
        backend=cfg.backend,
        precision=cfg.precision,
    )
    groups = [{b: ls} for b, ls in sets.items()] if cfg.per_benchmark else [sets]
    results = []
    for group in groups:
        cols = np.array([all_evals.index(z) for z in union_labels(group)])
        res = _build_group(store, cfg, table, group, m_all[:, cols], stage)
        res.embedded_new = new
        results.append(res)
    if out is not None:
        from builders.splits.subsets import write_results

        stage(f"writing {sum(len(r.subsets) for r in results)} folders to {out}")
        write_results(Path(out), results, command=command)
    return results


def _subset(
    store: Store,
    cfg: SplitConfig,
    table: LabelTable,
    mask: np.ndarray,
    name: str,
    selection: dict[str, object],
    fam: Callable[[np.ndarray], FamiliarityReport],
) -> SubsetResult:
    """One level: its rows (store SQL) and the Familiarity of its labels' counts."""
    counts = np.where(mask, table.mentions, 0)
    if counts.sum() == 0:
        raise BuildersError(
            f"{selection['level']} label-shift cut selects no label "
            f"(thresholds {selection['thresholds']}); widen its quantile"
        )
    selected = [lab for lab, keep in zip(table.labels, mask, strict=True) if keep]
    rows = store.subset_rows(cfg.source, selected)
    return SubsetResult(
        name=name,
        level=str(selection["level"]),
        strategy=cfg.strategy,
        selection=selection,
        sentences=rows.num_rows,
        mentions=int(counts.sum()),
        labels=len(selected),
        familiarity=fam(counts),
        rows=rows,
    )


def _build_group(
    store: Store,
    cfg: SplitConfig,
    table: LabelTable,
    group: dict[str, tuple[str, ...]],
    m: np.ndarray,
    stage: Callable[[str], None],
) -> BuildResult:
    """Scores, cuts, the full corpus and every level of one benchmark group."""
    rule = selection_rule(cfg, len(table.labels))
    stage(f"scoring ({cfg.strategy}) against {m.shape[1]} labels")
    scores = label_scores(m, cfg.strategy, cfg.temperature)
    cuts = select(scores, cfg.strategy, rule)
    sims_zd = np.ascontiguousarray(m.T)
    model = canonical_name(cfg.model)

    def fam(counts: np.ndarray) -> FamiliarityReport:
        return familiarity_report(
            sims_zd,
            counts,
            table.labels,
            group,
            model=model,
            k=cfg.k,
            weighting=cfg.weighting,
            seed=cfg.seed,
        )

    stage("Familiarity of the full corpus")
    full = SubsetResult(
        name=cfg.source,
        level="full",
        strategy=cfg.strategy,
        selection={},
        sentences=store.count_sentences(cfg.source),
        mentions=int(table.mentions.sum()),
        labels=len(table.labels),
        familiarity=fam(table.mentions),
    )
    suffix = f"-{next(iter(group))}" if cfg.per_benchmark else ""
    subsets = []
    for level in cfg.levels:
        name = f"{cfg.source}{suffix}-{level}-shift"
        stage(f"materialising {name}")
        selection = {**cuts[level].to_dict(), "profile": rule.profile}
        subsets.append(_subset(store, cfg, table, cuts[level].mask, name, selection, fam))
    return BuildResult(
        config=cfg,
        profile=rule.profile,
        benchmarks=group,
        full=full,
        subsets=subsets,
        table=table,
        scores=scores,
        cuts=cuts,
    )
