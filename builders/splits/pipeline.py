"""The splitter: score training labels against benchmark labels and build label-shift subsets.

    labels + counts (store) -> embeddings (cached) -> M[d, z] = sim(d, z)
    -> the strategy's levels (`builders.splits.strategies`) -> subset rows (store SQL)
    -> Familiarity of the full corpus and of every subset against every benchmark
    -> (with `out`) every folder written at once (`builders.splits.subsets`)

METHOD.md sections 2-4 and 8.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from builders.deferred import np
from builders.errors import opt
from builders.files import TMP_PREFIX
from builders.hub.folder import subset_features, write_parquet_batches
from builders.hub.outdir import OutLock
from builders.labels import union_labels
from builders.names import check_name
from builders.shift.benchmarks import EvalSet, resolve, stored_sources, unscannable
from builders.shift.embedder import Embedder, canonical_name
from builders.shift.leakage import LeakageScan, scan
from builders.shift.report import (
    FamiliarityReport,
    LabelTable,
    familiarity_report,
    similarity_matrix,
)
from builders.splits.composition import describe
from builders.splits.config import BuildResult, SplitConfig, SubsetResult
from builders.splits.fitting import table_counts
from builders.splits.leakage import leakage_record, refuse_unscannable
from builders.splits.levels import (
    Level,
    check_verdicts,
    verdicts,
)
from builders.splits.provenance import provenance
from builders.splits.strategies import strategy
from builders.splits.strategies.base import Group
from builders.store import Store
from builders.store.subsets import Selection

log = logging.getLogger(__name__)


def build(
    store: Store,
    cfg: SplitConfig,
    out: Path | None = None,
    *,
    progress: bool = False,
    command: str | None = None,
    on_stage: Callable[[str], None] | None = None,
    org: str | None = None,
) -> list[BuildResult]:
    """Score, select, materialise and measure; with `out`, write every folder at once (their
    cards name the repo `org/folder` when `org` is given).

    Returns one result per benchmark group: with `per_benchmark`, each benchmark gets its own
    scores and subsets; otherwise the scores are over the union of the benchmarks' labels (the
    paper's definition). Every level of every group is computed before anything is written.
    With `leakage` (or `decontaminate`) the corpus is scanned for the benchmarks' sentences
    first; `decontaminate` builds from the corpus without the overlapping sentences.
    """
    start = time.perf_counter()
    stage = on_stage or (lambda s: None)
    command = command or cfg.command_line()
    evalsets = resolve(
        list(cfg.benchmarks) or None,
        store=store,
        keep_misc=cfg.keep_misc,
        mapping=cfg.label_map,
        protocol=cfg.metric.protocol,
    )
    sets = {s.name: s.labels for s in evalsets}
    names = folder_names(cfg, list(sets))
    if cfg.decontaminate:  # refused before any work, not a build that drops nothing
        refuse_unscannable(unscannable(store, evalsets), list(sets))
    if out is None:
        return _timed_total(_build(store, cfg, evalsets, stage, progress), start)
    with (
        OutLock(Path(out), command),  # found unwritable or busy before any work
        tempfile.TemporaryDirectory(prefix=f"{TMP_PREFIX}rows.", dir=out) as spill,
    ):
        results = _build(store, cfg, evalsets, stage, progress, Path(spill))
        from builders.splits.subsets import write_results

        stage(f"writing {len(names)} folders to {out}")
        written = time.perf_counter()
        write_results(Path(out), results, command=command, org=org)
        for res in results:
            res.timings["write"] = time.perf_counter() - written
    return _timed_total(results, start)


def _timed_total(results: list[BuildResult], start: float) -> list[BuildResult]:
    """The results with the whole build's seconds recorded (`BuildResult.timings`), and
    every phase's logged at DEBUG (what scripts/bench_splits.py reads)."""
    for res in results:
        res.timings["total"] = time.perf_counter() - start
        for phase, seconds in res.timings.items():
            log.debug("phase %s %s %.3f", res.config.strategy, phase, seconds)
    return results


@contextmanager
def _timed(timings: dict[str, float], phase: str) -> Iterator[None]:
    """Add the block's seconds to `timings[phase]`."""
    begun = time.perf_counter()
    try:
        yield
    finally:
        timings[phase] = timings.get(phase, 0.0) + time.perf_counter() - begun


def folder_names(cfg: SplitConfig, benchmarks: list[str]) -> list[str]:
    """The repo folders a build writes (`{source}[-{benchmark}]-{level}-shift`), each checked
    to be one folder name (no separator, `..`, leading dot or control character)."""
    groups = [f"-{b}" for b in benchmarks] if cfg.per_benchmark else [""]
    what = "a benchmark name" if cfg.per_benchmark else "the source name"
    check_name(cfg.source, "source name", f"ingest it again with {opt('name', 'NAME')}")
    return [
        check_name(f"{cfg.source}{g}-{lv}-shift", f"folder name (from {what})")
        for g in groups
        for lv in cfg.levels
    ]


def _build(
    store: Store,
    cfg: SplitConfig,
    evalsets: list[EvalSet],
    stage: Callable[[str], None],
    progress: bool,
    spill: Path | None = None,
) -> list[BuildResult]:
    """Every group's results, measured; nothing written but, with `spill`, each level's rows
    (`_subset`)."""
    sets = {s.name: s.labels for s in evalsets}
    for src in stored_sources(evalsets):
        for text in store.older_read_notes(src):
            stage(f"warning: {text}")
    emb = Embedder.of(cfg.embedding)  # one model load
    found = _scan(store, cfg, evalsets, stage, emb)
    if found is not None and cfg.decontaminate:  # a local copy that lacks the split
        refuse_unscannable(found.not_scanned, list(sets))
    drop = found.overlapping_training_ids() if found is not None and cfg.decontaminate else []
    clean = store.without_sentences(cfg.source, drop) if cfg.decontaminate else nullcontext()
    with clean as dropped:
        results = _measure(store, cfg, sets, progress, stage, emb, spill)
        after = _scan(store, cfg, evalsets, stage, emb) if cfg.decontaminate else found
    if found is not None and after is not None:
        for res in results:
            res.leakage = leakage_record(res, found, after, dropped)
    origin = provenance(store, cfg, emb.cache_key)  # the key the vectors were cached under
    for res in results:
        res.provenance = origin
        res.all_benchmarks = tuple(sets)
    return results


def _measure(
    store: Store,
    cfg: SplitConfig,
    sets: dict[str, tuple[str, ...]],
    progress: bool,
    stage: Callable[[str], None],
    emb: Embedder,
    spill: Path | None = None,
) -> list[BuildResult]:
    """Every group's scores, cuts, subsets and Familiarity."""
    begun = time.perf_counter()
    table = LabelTable.load(store, cfg.source, cfg.metric.protocol)
    all_evals = union_labels(sets)
    stage(f"labels: {len(table.labels):,} training, {len(all_evals)} evaluation")
    m_all, new = similarity_matrix(store, emb, table.labels, all_evals, progress)
    total = len(set(table.labels) | set(all_evals))
    stage(f"embeddings: {new:,} labels embedded, {total - new:,} read from the cache")
    checks = {}  # each check model's (D, Z): `familiarity` places by them, all report under them
    for name in cfg.check_model:
        model = canonical_name(name)
        stage(f"check model {model}: the labels' similarities under it")
        check = Embedder.of(cfg.embedding.with_model(name))
        checks[model], _ = similarity_matrix(store, check, table.labels, all_evals, progress)
    groups = [{b: ls} for b, ls in sets.items()] if cfg.per_benchmark else [sets]
    similarities = time.perf_counter() - begun  # every group's, and the check models'
    results = []
    for group in groups:
        cols = np.array([all_evals.index(z) for z in union_labels(group)])
        mine = {model: m[:, cols] for model, m in checks.items()}
        res = _build_group(Group(store, cfg, table, group, m_all[:, cols], stage, mine), spill)
        res.embedded_new = new
        res.timings = {"similarities": similarities, **res.timings}
        results.append(res)
    return results


def _check(cfg: SplitConfig, res: BuildResult, checks: dict[str, np.ndarray]) -> None:
    """The full corpus and every level scored again under each check model (same counts, K,
    weighting and benchmarks), and the verdicts told whether the order and the gaps hold
    under each."""
    table = res.table
    index = {lab: i for i, lab in enumerate(table.labels)}
    for model, m in checks.items():
        sims = np.ascontiguousarray(m.T)
        for sub in [res.full, *res.subsets]:
            counts = table.mentions
            if sub.level != "full":
                counts = np.zeros(len(table.labels), dtype=np.int64)
                for lab, n in sub.label_counts.items():
                    counts[index[lab]] = n
            sub.checks.append(
                familiarity_report(
                    sims, counts, table.labels, res.benchmarks, model=model, metric=cfg.metric
                )
            )
    min_gap = strategy(cfg.strategy).promised_gap(cfg)
    check_verdicts(res.verdicts, res.full, res.subsets, min_gap=min_gap)


def _scan(
    store: Store,
    cfg: SplitConfig,
    evalsets: list[EvalSet],
    stage: Callable[[str], None],
    emb: Embedder,
) -> LeakageScan | None:
    """The leakage scan of the corpus (as the store shows it now), or None when not asked."""
    if not (cfg.leakage or cfg.decontaminate):
        return None
    stage(f"leakage: scanning {cfg.source} for the benchmarks' sentences (n = {cfg.ngram})")
    return scan(store, cfg.source, evalsets, n=cfg.ngram, embedding=emb, on_note=stage, texts=False)


def _subset(
    store: Store,
    cfg: SplitConfig,
    table: LabelTable,
    level: Level,
    chosen: Selection,
    name: str,
    fam: Callable[[np.ndarray], FamiliarityReport],
    spill: Path | None,
) -> SubsetResult:
    """One level's rows (store SQL; written to `spill/NAME.parquet` as they come when a
    folder is given, else kept in memory) and the Familiarity of the mentions it keeps (each
    of its labels' mentions in the sentences it keeps: every one, none stripped)."""
    labels = table.stored(level.kept(table))
    rows, rows_file = None, None
    if spill is None:
        rows = store.subset_rows(cfg.source, labels, chosen=chosen)
        n_rows = rows.num_rows
    else:
        rows_file = spill / f"{name}.parquet"
        with store.subset_reader(cfg.source, labels, chosen=chosen) as reader:
            n_rows = write_parquet_batches(reader.schema, reader, rows_file, subset_features())
    counts = table_counts(table, chosen)
    return SubsetResult(
        name=name,
        level=level.level,
        strategy=cfg.strategy,
        selection=level.selection,
        sentences=n_rows,
        mentions=int(counts.sum()),
        labels=level.n_labels(),
        familiarity=fam(counts),
        rows=rows,
        rows_file=rows_file,
        label_counts={table.labels[i]: int(counts[i]) for i in np.flatnonzero(counts)},
    )


def _build_group(g: Group, spill: Path | None) -> BuildResult:
    """Scores, cuts, checked levels, the full corpus and every level of one benchmark group
    (and their Familiarity under each check model)."""
    store, cfg, table, group, stage = g.store, g.cfg, g.table, g.benchmarks, g.stage
    begun = time.perf_counter()
    timings: dict[str, float] = {}
    sims_zd = np.ascontiguousarray(g.m.T)
    method = strategy(cfg.strategy)
    with _timed(timings, "placement"):  # scores, cuts or windows, levels fitted
        placed = method.place(g)
    model = canonical_name(cfg.embedding.model)

    def fam(counts: np.ndarray) -> FamiliarityReport:
        return familiarity_report(
            sims_zd, counts, table.labels, group, model=model, metric=cfg.metric
        )

    stage("Familiarity of the full corpus")
    full = SubsetResult(  # the full corpus, the row every level stands beside
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
    subsets, levels = [], [lv for lv, _ in placed.fitted]
    for level, chosen in placed.fitted:
        name = f"{cfg.source}{suffix}-{level.level}-shift"
        stage(f"materialising {name}")
        with _timed(timings, "rows"):  # the level's rows (parquet with `spill`), Familiarity
            subsets.append(_subset(store, cfg, table, level, chosen, name, fam, spill))
    describe(subsets, spill)  # from the rows written: sentences shared, label spread
    kept = {lv.level: set(lv.kept(table)) for lv in levels}
    res = BuildResult(
        config=cfg,
        profile=placed.profile,
        benchmarks=group,
        full=full,
        subsets=subsets,
        table=table,
        scores=placed.scores,
        cuts=placed.cuts,
        levels=levels,
        verdicts=verdicts(
            full,
            subsets,
            kept,
            min_gap=method.promised_gap(cfg),
            order_remedy=method.order_remedy,
        ),
        **placed.extra,
    )
    if g.checks:
        _check(cfg, res, g.checks)
    res.timings = {**timings, "measure": time.perf_counter() - begun - sum(timings.values())}
    return res
