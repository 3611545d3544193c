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

import tempfile
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from builders.defaults import LEVELS, TARGET_TOLERANCE
from builders.errors import BuildersError
from builders.hub.folder import SUBSET_FEATURES, write_parquet_batches
from builders.hub.outdir import TMP_PREFIX, OutLock
from builders.labels import union_labels
from builders.names import check_name
from builders.shift.benchmarks import EvalSet, resolve, stored_sources
from builders.shift.coverage import Ranking, familiarity_ranking
from builders.shift.embedder import Embedder, canonical_name
from builders.shift.familiarity import closed_form
from builders.shift.leakage import LeakageScan, scan
from builders.shift.report import (
    FamiliarityReport,
    LabelTable,
    familiarity_report,
    similarity_matrix,
)
from builders.shift.scoring import (
    SelectionResult,
    SelectionRule,
    default_rule,
    entropy_scores,
    max_scores,
    paper_scores,
    profile_for,
    select,
    select_pooled,
)
from builders.sources import source_profiles
from builders.splits.composition import describe
from builders.splits.config import BuildResult, SplitConfig, SubsetResult
from builders.splits.dial import Dial, Placement, Unreachable, choose
from builders.splits.leakage import leakage_record
from builders.splits.levels import (
    Level,
    check_levels,
    check_verdicts,
    from_cuts,
    match_levels,
    verdicts,
)
from builders.splits.provenance import provenance
from builders.store import Store
from builders.store.subsets import Selection

#: Named sources whose quantile profile is fixed by the paper, whatever their label count.
SOURCE_PROFILES = source_profiles()  # the registry says which corpus uses which profile


def label_scores(m: np.ndarray, strategy: str, temperature: float) -> np.ndarray:
    return max_scores(m) if strategy == "max" else entropy_scores(m, temperature)


def _score_and_cut(
    cfg: SplitConfig, rule: SelectionRule, group: dict[str, tuple[str, ...]], m: np.ndarray
) -> tuple[np.ndarray, dict[str, SelectionResult]]:
    """Our protocol: one score per label against the union, cut at its quantiles. The paper's:
    one score per (label, benchmark), cut at the pooled quantiles, a label kept if it
    qualifies for any benchmark (scores of shape (D, B))."""
    if cfg.protocol != "paper":
        scores = label_scores(m, cfg.strategy, cfg.temperature)
        return scores, select(scores, cfg.strategy, rule)
    evals = union_labels(group)
    cols = [np.array([evals.index(z) for z in labels]) for labels in group.values()]
    rows = paper_scores(m, cols, cfg.strategy, cfg.temperature)
    return rows, select_pooled(rows, cfg.strategy, rule)


def selection_rule(cfg: SplitConfig, n_labels: int) -> SelectionRule:
    """The paper's quantiles for the source's profile, with the config's overrides."""
    profile = cfg.profile or SOURCE_PROFILES.get(cfg.source) or profile_for(n_labels)
    return default_rule(profile, cfg.strategy).with_overrides(
        cfg.low_quantile, cfg.high_quantile, cfg.medium_band
    )


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
    stage = on_stage or (lambda s: None)
    command = command or cfg.command_line()
    evalsets = resolve(
        list(cfg.benchmarks) or None,
        store=store,
        keep_misc=cfg.keep_misc,
        mapping=cfg.label_map,
        protocol=cfg.protocol,
    )
    sets = {s.name: s.labels for s in evalsets}
    names = folder_names(cfg, list(sets))
    if out is None:
        return _build(store, cfg, evalsets, stage, progress)
    with (
        OutLock(Path(out), command),  # found unwritable or busy before any work
        tempfile.TemporaryDirectory(prefix=f"{TMP_PREFIX}rows.", dir=out) as spill,
    ):
        results = _build(store, cfg, evalsets, stage, progress, Path(spill))
        from builders.splits.subsets import write_results

        stage(f"writing {len(names)} folders to {out}")
        write_results(Path(out), results, command=command, org=org)
    return results


def folder_names(cfg: SplitConfig, benchmarks: list[str]) -> list[str]:
    """The repo folders a build writes (`{source}[-{benchmark}]-{level}-shift`), each checked
    to be one folder name (no separator, `..`, leading dot or control character)."""
    groups = [f"-{b}" for b in benchmarks] if cfg.per_benchmark else [""]
    what = "a benchmark name" if cfg.per_benchmark else "the source name"
    check_name(cfg.source, "source name", "ingest it again with --name NAME")
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
    emb = Embedder(cfg.model, backend=cfg.backend, precision=cfg.precision)  # one model load
    found = _scan(store, cfg, evalsets, stage, emb)
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
    table = LabelTable.load(store, cfg.source, cfg.protocol)
    all_evals = union_labels(sets)
    stage(f"labels: {len(table.labels):,} training, {len(all_evals)} evaluation")
    m_all, new = similarity_matrix(
        store,
        cfg.model,
        table.labels,
        all_evals,
        progress,
        backend=cfg.backend,
        precision=cfg.precision,
        embedder=emb,
    )
    total = len(set(table.labels) | set(all_evals))
    stage(f"embeddings: {new:,} labels embedded, {total - new:,} read from the cache")
    checks = _check_matrices(store, cfg, table, all_evals, progress, stage)
    groups = [{b: ls} for b, ls in sets.items()] if cfg.per_benchmark else [sets]
    results = []
    for group in groups:
        cols = np.array([all_evals.index(z) for z in union_labels(group)])
        mine = {model: m[:, cols] for model, m in checks.items()}
        res = _build_group(store, cfg, table, group, m_all[:, cols], stage, spill, mine)
        res.embedded_new = new
        results.append(res)
    return results


def _check_matrices(
    store: Store,
    cfg: SplitConfig,
    table: LabelTable,
    evals: tuple[str, ...],
    progress: bool,
    stage: Callable[[str], None],
) -> dict[str, np.ndarray]:
    """Each check model's similarity matrix (D, Z), computed once: the `familiarity`
    strategy places its levels by all of them, and every strategy reports under them."""
    out = {}
    for name in cfg.check_model:
        model = canonical_name(name)
        stage(f"check model {model}: the labels' similarities under it")
        check = Embedder(name, backend=cfg.backend, precision=cfg.precision)
        out[model], _ = similarity_matrix(
            store,
            name,
            table.labels,
            evals,
            progress,
            backend=cfg.backend,
            precision=cfg.precision,
            embedder=check,
        )
    return out


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
                    sims,
                    counts,
                    table.labels,
                    res.benchmarks,
                    model=model,
                    k=cfg.k,
                    weighting=cfg.weighting,
                    seed=cfg.seed,
                    protocol=cfg.protocol,
                )
            )
    min_gap = cfg.min_gap if cfg.strategy == "familiarity" else None
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
    return scan(
        store,
        cfg.source,
        evalsets,
        n=cfg.ngram,
        model=cfg.model,
        on_note=stage,
        backend=cfg.backend,
        precision=cfg.precision,
        texts=False,
        embedder=emb,
    )


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
            n_rows = write_parquet_batches(reader.schema, reader, rows_file, SUBSET_FEATURES)
    counts = _table_counts(table, chosen)
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


def _choose(store: Store, cfg: SplitConfig, table: LabelTable, level: Level) -> Selection:
    """The sentences the level keeps (a seeded draw for its capped labels)."""
    whole = table.stored(level.labels(table))
    return store.select_sentences(cfg.source, whole, level.capped(table), seed=cfg.seed)


#: Levels cut to one size whose written sizes differ by more than this share of the smallest
#: are all fitted again to the smallest (a level's own labels may not fill the size: the
#: sentences of its whole labels can hold more of a capped label than its cap).
EQUAL_WITHIN = 0.004
EQUAL_ROUNDS = 4


def _equal_sizes(
    store: Store, cfg: SplitConfig, table: LabelTable, fitted: list[tuple[Level, Selection]]
) -> list[tuple[Level, Selection]]:
    """The fitted levels, fitted again to the smallest one's written size while they differ
    by more than `EQUAL_WITHIN` (a level fitted to a smaller size can write less than it:
    sizes only fall, a few rounds at most; levels not cut to a size are left as they are)."""
    for _ in range(EQUAL_ROUNDS):
        sized = [chosen.mentions for lv, chosen in fitted if lv.take is not None]
        if len(sized) < 2 or max(sized) <= min(sized) * (1 + EQUAL_WITHIN):
            break
        smallest = min(sized)
        out = []
        for lv, chosen in fitted:
            if lv.take is not None and chosen.mentions > smallest * (1 + EQUAL_WITHIN):
                lv, chosen = _fitted(store, cfg, table, replace(lv, size=smallest))
            out.append((lv, chosen))
        fitted = out
    return fitted


def _fitted(
    store: Store, cfg: SplitConfig, table: LabelTable, level: Level
) -> tuple[Level, Selection]:
    """The level and its sentences. A level cut to a size (familiarity windows, `--match
    mentions`) holds that size counted on what it writes: the sentences of its whole labels
    may hold more of a capped label than its cap, and those mentions are kept, so its labels
    are taken along its order while they fit (`Store.fit_level`)."""
    if level.take is None or level.order is None:
        return level, _choose(store, cfg, table, level)
    size = level.size if level.size is not None else int(level.take.sum())
    order = [table.labels[i] for i in level.order.tolist()]
    whole, caps = store.fit_level(cfg.source, order, level.take, size)
    index = {lab: i for i, lab in enumerate(table.labels)}
    fit = level.realised([index[lab] for lab in whole], {index[k]: v for k, v in caps.items()})
    chosen = _choose(store, cfg, table, fit)
    fit.selection = {
        **level.selection,
        "written": {
            "mentions": chosen.mentions,
            "planned": size,
            "labels_planned": level.n_labels(),  # the window's (or cut's) labels
            "labels": fit.n_labels(),
            "over_cap": chosen.over(fit.capped(table)),
            "sentences_drawn": chosen.drawn,
        },
    }
    return fit, chosen


def _table_counts(table: LabelTable, chosen: Selection) -> np.ndarray:
    """The selection's mentions per label of the table (stored labels summed into the label
    the protocol spells them as)."""
    spelled = {m: lab for lab, ms in table.members.items() for m in ms}
    index = {lab: i for i, lab in enumerate(table.labels)}
    counts = np.zeros(len(table.labels), dtype=np.int64)
    for lab, n in chosen.counts.items():
        counts[index[spelled.get(lab, lab)]] += n
    return counts


def _build_group(
    store: Store,
    cfg: SplitConfig,
    table: LabelTable,
    group: dict[str, tuple[str, ...]],
    m: np.ndarray,
    stage: Callable[[str], None],
    spill: Path | None = None,
    checks: dict[str, np.ndarray] | None = None,
) -> BuildResult:
    """Scores, cuts, checked levels, the full corpus and every level of one benchmark group
    (and their Familiarity under each check model: `checks`, model -> (D, Z) similarities)."""
    sims_zd = np.ascontiguousarray(m.T)
    extra: dict[str, Any] = {}
    checks = checks or {}
    if cfg.strategy == "familiarity":
        profile = "familiarity"
        scores, cuts, fitted, extra = _placed_on_what_is_written(
            store, cfg, table, m, stage, checks
        )
    else:
        profile, scores, cuts, levels = _by_quantiles(cfg, table, group, m, stage)
        check_levels(levels, table, cfg)
        stage("choosing each level's sentences")
        fitted = _equal_sizes(store, cfg, table, [_fitted(store, cfg, table, lv) for lv in levels])
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
            protocol=cfg.protocol,
        )

    stage("Familiarity of the full corpus")
    full = _full(store, cfg, table, fam(table.mentions))
    suffix = f"-{next(iter(group))}" if cfg.per_benchmark else ""
    subsets = []
    levels = [lv for lv, _ in fitted]
    for level, chosen in fitted:
        name = f"{cfg.source}{suffix}-{level.level}-shift"
        stage(f"materialising {name}")
        subsets.append(_subset(store, cfg, table, level, chosen, name, fam, spill))
    describe(subsets, spill)  # from the rows written: sentences shared, label spread
    kept = {lv.level: set(lv.kept(table)) for lv in levels}
    res = BuildResult(
        config=cfg,
        profile=profile,
        benchmarks=group,
        full=full,
        subsets=subsets,
        table=table,
        scores=scores,
        cuts=cuts,
        levels=levels,
        verdicts=verdicts(full, subsets, kept, min_gap=cfg.min_gap),
        **extra,
    )
    if checks:
        _check(cfg, res, checks)
    return res


#: A familiarity placement is measured on the rows the levels write (fitted to their size,
#: whole sentences) under every model; where a gap falls short of --min-gap there, the levels
#: are placed again with the gap widened by the shortfall, at most this many times in all.
PLACE_ROUNDS = 3


def _placed_on_what_is_written(
    store: Store,
    cfg: SplitConfig,
    table: LabelTable,
    m: np.ndarray,
    stage: Callable[[str], None],
    checks: dict[str, np.ndarray],
) -> tuple[np.ndarray, dict[str, Any], list[tuple[Level, Selection]], dict[str, Any]]:
    """The `familiarity` levels placed, fitted and measured: a placement's gaps hold on its
    plan (label counts), and the written levels can differ (a whole label's sentences hold
    more of a frequent label than its cap), so the gaps are checked on what is written and
    the placement redone with a wider gap where one falls short. The round with the smallest
    shortfall is kept; a gap still short is a Limitation in the verdicts."""
    sims = [np.ascontiguousarray(m.T), *(np.ascontiguousarray(c.T) for c in checks.values())]
    gap, size = cfg.min_gap, cfg.level_mentions
    best: tuple[float, float, Any] | None = None  # (shortfall, gap placed with, placement)
    for _ in range(PLACE_ROUNDS):
        try:
            found = _by_familiarity(cfg, table, m, sims[0], stage, checks, gap, size)
        except BuildersError:
            if best is None:
                raise
            if size == cfg.level_mentions:
                break
            size = cfg.level_mentions  # no wider placement at that size: search the sizes
            continue
        scores, cuts, levels, extra = found
        check_levels(levels, table, cfg)
        stage("choosing each level's sentences")
        fitted = _equal_sizes(store, cfg, table, [_fitted(store, cfg, table, lv) for lv in levels])
        short = _gap_shortfall(cfg, table, sims, fitted)
        if best is None or short < best[0]:
            best = (short, gap, (scores, cuts, fitted, extra))
        if short <= 0 or cfg.targets is not None:
            break
        gap += short + 0.002  # the same size, windows further apart
        size = size or int(levels[0].size or 0) or None
        stage(f"a gap on the written levels is {short:.3f} short of --min-gap: placing again")
    assert best is not None
    if best[1] != cfg.min_gap:
        for lv, _ in best[2][2]:
            lv.selection = {**lv.selection, "placed_with_gap": round(best[1], 6)}
    return best[2]


def _gap_shortfall(
    cfg: SplitConfig,
    table: LabelTable,
    sims: list[np.ndarray],
    fitted: list[tuple[Level, Selection]],
) -> float:
    """By how much the written levels' smallest gap (union macro, any model) misses
    --min-gap (0 or less: none misses); the union as the dial computes a window's."""
    worst = -1.0
    for s in sims:
        union = []
        for _, chosen in fitted:
            counts = _table_counts(table, chosen)
            cols = np.flatnonzero(counts)  # labels by text: ties by label text, as everywhere
            f = closed_form(
                np.maximum(s[:, cols], 0), counts[cols], np.arange(cols.size), cfg.k, cfg.weighting
            )
            union.append(float(np.sort(f).mean()))
        for a, b in pairwise(union):
            worst = max(worst, cfg.min_gap - (a - b))
    return worst


def _full(
    store: Store, cfg: SplitConfig, table: LabelTable, familiarity: FamiliarityReport
) -> SubsetResult:
    """The full corpus as the row every level stands beside."""
    return SubsetResult(
        name=cfg.source,
        level="full",
        strategy=cfg.strategy,
        selection={},
        sentences=store.count_sentences(cfg.source),
        mentions=int(table.mentions.sum()),
        labels=len(table.labels),
        familiarity=familiarity,
    )


def _by_quantiles(
    cfg: SplitConfig,
    table: LabelTable,
    group: dict[str, tuple[str, ...]],
    m: np.ndarray,
    stage: Callable[[str], None],
) -> tuple[str, np.ndarray, dict[str, Any], list[Level]]:
    """The paper's strategies: the profile, every label's score, the cuts and the levels."""
    rule = selection_rule(cfg, len(table.labels))
    stage(f"scoring ({cfg.strategy}, {cfg.protocol} protocol) against {m.shape[1]} labels")
    scores, cuts = _score_and_cut(cfg, rule, group, m)
    levels = from_cuts(cuts, cfg.levels, rule.profile)
    levels = match_levels(levels, scores, table, cfg.strategy, cfg.match)
    return rule.profile, scores, dict(cuts), levels


def _by_familiarity(
    cfg: SplitConfig,
    table: LabelTable,
    m: np.ndarray,
    sims_zd: np.ndarray,
    stage: Callable[[str], None],
    checks: dict[str, np.ndarray],
    min_gap: float | None = None,
    size: int | None = None,
) -> tuple[np.ndarray, dict[str, Any], list[Level], dict[str, Any]]:
    """The `familiarity` strategy (METHOD.md section 8): the ranking, then the levels' windows,
    placed so that the gaps hold under the build's model and every check model.

    Returns the per-label gains (the scores), each level's window, the levels, and the
    BuildResult fields it adds (the ranking's columns and the Familiarity along it).
    """
    order = _familiarity_levels(cfg, table, m)
    stage(f"ranking {len(table.labels):,} labels by what they add to Familiarity")
    ranking = familiarity_ranking(m, table.mentions, cfg.k, cfg.weighting)
    stage(f"placing {'/'.join(order)} levels" + _asked(cfg))
    models = [canonical_name(cfg.model), *checks]
    try:
        dial, placed = choose(
            ranking,
            [sims_zd, *(np.ascontiguousarray(c.T) for c in checks.values())],
            order,
            targets=cfg.targets,
            min_gap=cfg.min_gap if min_gap is None else min_gap,
            tolerance=TARGET_TOLERANCE,
            size=size if size is not None else cfg.level_mentions,
            smallest=cfg.min_mentions,
            k=cfg.k,
            weighting=cfg.weighting,
            min_labels=cfg.min_labels,
            models=models,
        )
    except Unreachable as e:
        raise BuildersError(f"{cfg.source}: {e}. Nothing was written. {_REMEDY}") from None
    stage(
        f"levels of {dial.size:,} mentions each"
        + (" (--level-mentions)" if cfg.level_mentions else " (the largest that gives them)")
    )
    after = [p.start for p in placed[1:]] + [len(ranking.order)]
    levels = [
        _level(p, table, dial, cfg, ranking, until) for p, until in zip(placed, after, strict=True)
    ]
    columns = {"rank": ranking.position, "gain": ranking.gain, "max": ranking.best}
    curve = [(int(dial.cum[s]), f) for s, f in sorted(dial.evaluated().items())]
    return ranking.gain, {p.level: p for p in placed}, levels, {"ranking": columns, "curve": curve}


def _familiarity_levels(cfg: SplitConfig, table: LabelTable, m: np.ndarray) -> list[str]:
    """The levels asked for, easy to hard (windows are placed in that order), once the corpus
    is known to have labels enough and there are evaluation labels to place them by."""
    order = [lv for lv in LEVELS if lv in cfg.levels]
    need = len(order) * cfg.min_labels
    if len(table.labels) < need:
        raise BuildersError(
            f"{cfg.source}: {len(table.labels):,} labels cannot give {len(order)} disjoint "
            f"levels of at least {cfg.min_labels} labels each ({need} labels needed; "
            "--min-labels sets the least, --levels fewer levels). Nothing was written."
        )
    if m.shape[1] == 0:
        raise BuildersError(f"{cfg.source}: the benchmarks have no labels to place levels by")
    return order


_REMEDY = (
    "Options that help: --targets (other values), --level-mentions (another size), "
    "--min-gap (a smaller gap), --levels (fewer levels), or --strategy entropy|max"
)


def _asked(cfg: SplitConfig) -> str:
    if cfg.targets is None:
        return ""
    return " at Familiarity " + ", ".join(f"{t:g}" for t in cfg.targets)


#: How far past its window a level may reach for labels to fill its size on what it writes
#: (its window's last labels may hold more mentions than the room they were planned for), as
#: a share of its size; never into another level's window.
SPARE = 0.5


def _level(
    placed: Placement,
    table: LabelTable,
    dial: Dial,
    cfg: SplitConfig,
    ranking: Ranking,
    until: int,
) -> Level:
    """A window as a level: labels taken whole, and the others capped at what it takes; its
    order goes on past the window (up to `until`, the next window's start, and `SPARE` of its
    size) with labels not in any window, which `_fitted` takes only where the window's own
    labels leave room."""
    selection = {
        **placed.to_dict(),
        "level_mentions": dial.size,
        "size": "given" if cfg.level_mentions else "largest",
        "label_cap": cfg.k,
        "capped_labels": int((placed.take < table.mentions[placed.labels]).sum()),
        "min_gap": cfg.min_gap,
        "tolerance": TARGET_TOLERANCE if cfg.targets is not None else None,
    }
    if placed.checks:
        selection["planned_check_familiarity"] = dict(
            zip(dial.models[1:], placed.checks, strict=True)
        )
    spare = ranking.order[placed.stop : until]
    usable = ranking.usable[spare]
    spare = spare[: int(np.searchsorted(np.cumsum(usable), SPARE * dial.size)) + 1]
    level = Level.taking(placed.level, placed.labels, placed.take, table, selection)
    level.order = np.concatenate([placed.labels, spare])
    level.take = np.concatenate([placed.take, ranking.usable[spare]])
    level.size = dial.size
    return level
