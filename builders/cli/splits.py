"""`build-splits`: the splitter on the command line."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from builders import __version__
from builders.cli.errors import handle_errors
from builders.cli.leakage import leakage_options, print_build_leakage
from builders.cli.options import (
    benchmarks_option,
    common_options,
    embedding_options,
    metric_options,
    model_option,
    option,
    org_option,
    source_options,
)
from builders.cli.output import emit_json, note, print_table
from builders.cli.session import ensure_ingested, open_store
from builders.defaults import (
    DEFAULT_STRATEGY,
    LEVELS,
    MATCH_MODES,
    MIN_GAP,
    MIN_LEVEL_LABELS,
    MIN_LEVEL_MENTIONS,
    TARGET_TOLERANCE,
)
from builders.labels import reference_splits
from builders.splits import SplitConfig, build
from builders.splits.strategies import NAMES, strategy

if TYPE_CHECKING:
    from builders.splits import SplitConfig
    from builders.splits.config import BuildResult


def _short(benchmark: str) -> str:
    """`crossner-ai` -> `ai`, `mit-movie` -> `movie`: table headers that fit a terminal."""
    return benchmark.removeprefix("crossner-").removeprefix("mit-")


def _summary_rows(res: BuildResult) -> tuple[list[str], list[list[Any]]]:
    names = list(res.benchmarks)
    cols = ["set", "sentences", "mentions", "labels", *_COMPOSITION, *map(_short, names)]
    cols += ["union", "paper", "VB.5", "95% CI"]

    authors = reference_splits(res.config.source, res.config.strategy)
    if authors:
        cols.append("authors")
    rows = []
    for sub in [res.full, *res.subsets]:
        f = sub.familiarity
        row = [
            "full" if sub.level == "full" else sub.level,
            sub.sentences,
            sub.mentions,
            sub.labels,
            *_composition_cells(sub.composition),
            *[f.per_benchmark[b].familiarity for b in names],
            f.union_macro,
            f.paper_figure,
            f.summary["vb_0.5"],
            f"{f.summary['ci_low']:.3f}-{f.summary['ci_high']:.3f}",
        ]
        if authors:
            row.append(authors.get(sub.level))
        rows.append(row)
    return cols, rows


#: What makes the levels comparable beside their Familiarity (METHOD.md section 4): sentences
#: also in another level, effective labels, the largest label and its share of the mentions.
_COMPOSITION = ["shared", "eff. labels", "largest"]


def _composition_cells(comp: dict[str, Any] | None) -> list[str]:
    """A level's `_COMPOSITION` cells (blank for the full corpus)."""
    if comp is None:
        return [""] * len(_COMPOSITION)
    largest = comp["largest_label"]
    top = f"{largest['label']} {largest['share']:.1%}" if largest else ""
    return [f"{comp['sentences_shared']:,}", f"{comp['effective_labels']:.1f}", top]


_QUANTILE = click.FloatRange(0, 1)


def _ordered_band(
    ctx: click.Context, param: click.Parameter, value: tuple[float, float] | None
) -> tuple[float, float] | None:
    if value is not None and value[0] > value[1]:
        raise click.BadParameter(f"LOW {value[0]} is above HIGH {value[1]}: write them in order")
    return value


def _targets(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[float, ...] | None:
    if value is None:
        return None
    try:
        return tuple(float(x) for x in value.split(","))
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: write one Familiarity per level, e.g. 0.55,0.42,0.30"
        ) from None


@click.command("build-splits", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="build-splits")
@source_options
@option(
    "--strategy",
    type=click.Choice(NAMES),
    default=DEFAULT_STRATEGY,
    help="entropy, max: the paper's label scores cut at quantiles (the levels' order is not "
    "guaranteed); familiarity: levels of equal size placed by their Familiarity, ordered by "
    "construction (METHOD.md section 8); random: the control, levels of equal size whose labels "
    "are drawn with --seed, not ordered by shift.",
)
@click.option(
    "--targets",
    callback=_targets,
    metavar="LOW,MEDIUM,HIGH",
    help="familiarity: the Familiarity asked of each level (union macro), each met within "
    f"{TARGET_TOLERANCE:g}; refused, naming the range the corpus reaches, when it cannot be.",
)
@option(
    "--min-gap",
    type=click.FloatRange(0, 1, max_open=True),
    default=MIN_GAP,
    help="familiarity: the smallest Familiarity gap between consecutive levels.",
)
@click.option(
    "--level-mentions",
    type=click.IntRange(min=1),
    help="familiarity: mentions in every level. Default: the largest size, of at least K "
    "mentions, at which the levels asked for can be placed. random: the same, by default the "
    "size the familiarity levels write.",
)
@click.option(
    "--check-model",
    multiple=True,
    metavar="MODEL",
    help="Another embedding model (repeatable): every level's Familiarity under it is "
    "reported beside, and the verdicts say whether the order holds under it too. "
    "familiarity: the levels are placed so that --min-gap holds under every model.",
)
@click.option(
    "--max-label-share",
    type=click.FloatRange(0, 1, min_open=True),
    help="The most of a level's mentions one label may hold: labels over it keep a seeded "
    "draw of their sentences. Default: 0.3 for familiarity (its levels hold 13-26% of one "
    "label on the shared corpora), none for entropy and max (the paper's protocol); 1: none.",
)
@option("--levels", default=",".join(LEVELS), help="Subsets to build.")
@benchmarks_option
@model_option
@metric_options("protocol", "k", "weighting", "temperature")
@click.option("--low-quantile", type=_QUANTILE, help="Override the low-shift quantile (0 to 1).")
@click.option("--high-quantile", type=_QUANTILE, help="Override the high-shift quantile (0 to 1).")
@click.option(
    "--medium-band",
    type=(_QUANTILE, _QUANTILE),
    callback=_ordered_band,
    metavar="LOW HIGH",
    help="Override the medium band's quantiles: LOW <= HIGH, both 0 to 1.",
)
@click.option("--profile", type=click.Choice(["pilener", "nuner"]), help="Quantile profile.")
@click.option("--per-benchmark", is_flag=True, help="One set of subsets per benchmark.")
@click.option("--keep-misc", is_flag=True, help="Keep `misc` (as `else`) in benchmark label sets.")
@metric_options("seed")
@embedding_options
@option(
    "--min-labels",
    type=click.IntRange(min=1),
    default=MIN_LEVEL_LABELS,
    help="Refuse a build whose smallest level has fewer labels.",
)
@option(
    "--min-mentions",
    type=click.IntRange(min=1),
    default=MIN_LEVEL_MENTIONS,
    help="Refuse a build whose smallest level has fewer mentions.",
)
@option(
    "--match",
    type=click.Choice(MATCH_MODES),
    default="none",
    help="Cut every level to the same number of mentions (or labels), in score order, so "
    "that the levels differ in label shift and not in size.",
)
@leakage_options
@click.option(
    "--decontaminate",
    is_flag=True,
    help="Drop training sentences that overlap the benchmarks' sentences (exact or n-gram) "
    "before cutting; the card says how many.",
)
@option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out"),
    help="Where the dataset folders are written.",
)
@org_option(help="Hub user or organisation the folders are for: their cards name ORG/FOLDER.")
@common_options
@handle_errors
def build_splits(
    path: str | None,
    out: Path,
    org: str | None,
    db: Path,
    as_json: bool,
    quiet: bool,
    **params: Any,
) -> None:
    """Build low / medium / high label-shift subsets of a training corpus.

    --strategy says how (METHOD.md sections 2-4 and 8). Each subset is a Hub-ready folder
    OUT/{source}-{level}-shift/{strategy}/; its Familiarity per benchmark is reported with
    verdicts on the order.

    Example: build-splits --source mine --strategy familiarity --targets 0.55,0.42,0.30
    (the paper's: build-splits --source nuner --path NuNER/ --strategy entropy)
    """

    cfg = SplitConfig.from_dict(params)  # its parameters by name (the specs whole)
    # shared: the store is only read while labels are embedded and levels built (other
    # commands read beside it); new label vectors are written when the block ends
    with open_store(db, create=True, shared=True) as store:
        ensure_ingested(store, cfg.source, path, quiet)
        results = build(
            store,
            cfg,
            out,
            progress=not quiet,
            on_stage=lambda s: note(s, quiet),
            org=org,
        )
        _print_results(cfg, results, as_json, quiet)


def _print_results(
    cfg: SplitConfig, results: list[BuildResult], as_json: bool, quiet: bool
) -> None:
    """The build's output: the JSON envelope, or per group its table, levels and verdicts."""
    if as_json:
        emit_json([r.to_dict() for r in results], config=results[0].config_dict())
        return
    for res in results:
        cols, rows = _summary_rows(res)
        how = strategy(cfg.strategy).size_text(res)
        title = f"{cfg.source}: label-shift subsets ({cfg.strategy}, {how}, {cfg.embedding.model}, K={cfg.metric.k})"
        print_table(title, cols, rows)
        for sub in res.subsets:
            text = strategy(cfg.strategy).selection_text(sub.selection)
            note(f"{sub.level}: {text} -> {sub.path}", quiet)
        _print_verdicts(res, quiet)
        if res.leakage is not None:
            print_build_leakage(cfg.source, res.leakage, quiet)


def _falls_line(falls: dict[str, Any], model: str = "") -> str:
    union = falls["union"]
    order = ", ".join(f"{lv} {x:.3f}" for lv, x in union["values"].items())
    n = sum(f["falls"] for f in falls.values()) - union["falls"]
    under = f" under {model}" if model else ""
    return (
        f"verdict: Familiarity falls from level to level over the union{under}: "
        f"{'yes' if union['falls'] else 'NO'} ({order}); on {n} of {len(falls) - 1} benchmarks"
    )


def _print_verdicts(res: BuildResult, quiet: bool) -> None:
    """The build's verdicts under its table: what passed, what did not, what to keep in mind.
    When the order fails, which benchmarks break it and what to do go to stderr too."""
    v = res.verdicts
    click.echo(_falls_line(v.falls))
    for check in v.check or []:
        click.echo(_falls_line(check["falls"], check["model"]))
        gaps = ", ".join(f"{pair} {gap:.3f}" for pair, gap in check.get("gaps", {}).items())
        click.echo(
            f"verdict: the order holds under both models ({check['model']} and the build's): "
            f"{'yes' if check['holds'] else 'NO'}" + (f"; gaps under it: {gaps}" if gaps else "")
        )
    if v.gaps:
        gaps = ", ".join(f"{pair} {gap:.3f}" for pair, gap in v.gaps.items())
        click.echo(
            f"verdict: gaps between levels: {gaps}; level sizes (mentions) differ by up to "
            f"{v.sizes['spread']:.2%} of the largest"
        )
    shares = "; ".join(
        f"{lv} {s['labels']:.1%} of the labels, {s['mentions']:.1%} of the mentions"
        for lv, s in v.shares.items()
    )
    click.echo(f"verdict: shares of the full corpus: {shares}")
    shared = sum(v.overlap.values())
    click.echo(f"verdict: labels shared between levels: {shared}")
    for line in v.failed:
        click.echo(f"limitation: {line}")
    for line in v.notes:
        click.echo(f"note: {line}")
    if not v.falls["union"]["falls"] and len(v.falls["union"]["values"]) > 1:
        broken = [b for b, f in v.falls.items() if b != "union" and not f["falls"]]
        note(
            "the levels' order fails over the union"
            + (f", and on {', '.join(broken)}" if broken else "")
            + (f". {remedy}" if (remedy := strategy(res.config.strategy).order_remedy) else "."),
            quiet,
        )
