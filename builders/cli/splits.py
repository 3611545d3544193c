"""`build-splits`: the splitter on the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from builders import __version__
from builders.cli.common import (
    benchmarks_option,
    common_options,
    embedding_options,
    emit_json,
    ensure_ingested,
    handle_errors,
    k_option,
    model_option,
    note,
    open_store,
    org_option,
    print_table,
    protocol_option,
    source_options,
    weighting_option,
)
from builders.cli.leakage import leakage_options, print_build_leakage
from builders.defaults import (
    DEFAULT_STRATEGY,
    LEVELS,
    MATCH_MODES,
    MIN_LEVEL_LABELS,
    MIN_LEVEL_MENTIONS,
    SEED,
    STRATEGIES,
    TEMPERATURE,
)
from builders.labels import reference_splits
from builders.splits import SplitConfig, build
from builders.splits.config import BuildResult


def _short(benchmark: str) -> str:
    """`crossner-ai` -> `ai`, `mit-movie` -> `movie`: table headers that fit a terminal."""
    return benchmark.removeprefix("crossner-").removeprefix("mit-")


def _summary_rows(res: BuildResult) -> tuple[list[str], list[list[Any]]]:
    names = list(res.benchmarks)
    cols = ["set", "sentences", "mentions", "labels", *map(_short, names)]
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


_QUANTILE = click.FloatRange(0, 1)


def _ordered_band(
    ctx: click.Context, param: click.Parameter, value: tuple[float, float] | None
) -> tuple[float, float] | None:
    if value is not None and value[0] > value[1]:
        raise click.BadParameter(f"LOW {value[0]} is above HIGH {value[1]}: write them in order")
    return value


@click.command("build-splits", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="build-splits")
@source_options
@click.option(
    "--strategy", type=click.Choice(STRATEGIES), default=DEFAULT_STRATEGY, show_default=True
)
@click.option("--levels", default=",".join(LEVELS), show_default=True, help="Subsets to build.")
@benchmarks_option
@model_option
@protocol_option
@k_option
@weighting_option
@click.option(
    "--temperature",
    type=click.FloatRange(min=0, min_open=True),
    default=TEMPERATURE,
    show_default=True,
    help="Entropy softmax T.",
)
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
@click.option("--seed", type=int, default=SEED, show_default=True, help="Bootstrap seed.")
@embedding_options
@click.option(
    "--min-labels",
    type=click.IntRange(min=1),
    default=MIN_LEVEL_LABELS,
    show_default=True,
    help="Refuse a build whose smallest level has fewer labels.",
)
@click.option(
    "--min-mentions",
    type=click.IntRange(min=1),
    default=MIN_LEVEL_MENTIONS,
    show_default=True,
    help="Refuse a build whose smallest level has fewer mentions.",
)
@click.option(
    "--match",
    type=click.Choice(MATCH_MODES),
    default="none",
    show_default=True,
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
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out"),
    show_default=True,
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

    Scores every training label against the benchmark labels (max similarity or softmax
    entropy), cuts them at the paper's quantiles, writes each subset as a Hub-ready folder
    OUT/{source}-{level}-shift/{strategy}/ and reports its Familiarity per benchmark.

    Example: build-splits --source nuner --path NuNER/ --strategy entropy --out out/
    """
    cfg = SplitConfig(**params)  # the options are SplitConfig's parameters, by name
    with open_store(db) as store:
        ensure_ingested(store, cfg.source, path, quiet)
        results = build(
            store,
            cfg,
            out,
            progress=not quiet,
            on_stage=lambda s: note(s, quiet),
            org=org,
        )
    if as_json:
        emit_json([r.to_dict() for r in results], config=results[0].config_dict())
        return
    for res in results:
        cols, rows = _summary_rows(res)
        title = (
            f"{cfg.source}: label-shift subsets ({cfg.strategy}, {res.profile} profile, "
            f"{cfg.model}, K={cfg.k})"
        )
        print_table(title, cols, rows)
        for sub in res.subsets:
            sel = sub.selection
            note(
                f"{sub.level}: {sel['side']} q{sel['quantiles']} = "
                f"{', '.join(f'{t:.4g}' for t in sel['thresholds'])} -> {sub.path}",
                quiet,
            )
        _print_verdicts(res)
        if res.leakage is not None:
            print_build_leakage(cfg.source, res.leakage, quiet)


def _print_verdicts(res: BuildResult) -> None:
    """The build's verdicts under its table: what passed, what did not, what to keep in mind."""
    v = res.verdicts
    union = v.falls["union"]
    order = ", ".join(f"{lv} {x:.3f}" for lv, x in union["values"].items())
    falls = sum(f["falls"] for f in v.falls.values())
    click.echo(
        f"verdict: Familiarity falls from level to level over the union: "
        f"{'yes' if union['falls'] else 'NO'} ({order}); on {falls - union['falls']} of "
        f"{len(v.falls) - 1} benchmarks"
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
