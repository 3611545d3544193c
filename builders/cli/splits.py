"""`build-splits` and `familiarity`: the splitter and the metric on the command line."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click

from builders.cli.common import (
    common_options,
    embedding_options,
    emit_json,
    handle_errors,
    note,
    open_store,
    print_table,
    progress_bar,
)
from builders.defaults import (
    DEFAULT_MODEL,
    DEFAULT_STRATEGY,
    LEVELS,
    SEED,
    STRATEGIES,
    TEMPERATURE,
    WEIGHTING,
    WEIGHTINGS,
    K,
)
from builders.labels import ZERO_SHOT, benchmarks
from builders.shift.report import FamiliarityReport
from builders.splits import SplitConfig, build
from builders.splits.config import BuildResult


def _ensure_ingested(store: Any, source: str, path: str | None, quiet: bool) -> None:
    """Ingest the source when it is not in the store yet, or when --path is given (a no-op
    if that input is unchanged)."""
    from builders.store.ingest import ingest

    if path is None and store.has_source(source):
        return
    with progress_bar(f"ingest {source}", quiet, unit=" sent") as bar:
        res = ingest(store, source, path, progress=bar)
    note(
        f"{source}: {res.status} ({res.sentences:,} sentences, {res.mentions:,} mentions, "
        f"{res.types:,} labels)",
        quiet,
    )


#: Options that say where this machine keeps things or how it prints, not what is built.
_LOCAL_OPTIONS = {"--db": True, "--out": True, "--json": False, "--quiet": False, "-q": False}


def _command_line(name: str, argv: list[str] | None = None) -> str:
    """The command as the user typed it, for the card: `builders build-splits ...` and the
    stand-alone `build-splits ...` both give `build-splits ...`, without the local-only
    options (--db, --out, --json, --quiet), so the same build gives the same card."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == name:
        args = args[1:]
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        opt = arg.split("=", 1)[0]
        if opt in _LOCAL_OPTIONS:
            skip = _LOCAL_OPTIONS[opt] and "=" not in arg
            continue
        kept.append(arg)
    return shlex.join([name, *kept])


def _benchmarks_option(f: Any) -> Any:
    return click.option(
        "--benchmarks",
        default="all",
        show_default=True,
        help="Comma-separated benchmark names, or `all` (the seven zero-shot benchmarks: "
        + ", ".join(ZERO_SHOT)
        + f"). Known: {', '.join(benchmarks())}.",
    )(f)


def _model_option(f: Any) -> Any:
    return click.option(
        "--model",
        default=DEFAULT_MODEL,
        show_default=True,
        help="Sentence-transformer: all-mpnet-base-v2 (the paper's), all-MiniLM-L6-v2 (fast), "
        "a local folder or a Hub name.",
    )(f)


def _short(benchmark: str) -> str:
    """`crossner-ai` -> `ai`, `mit-movie` -> `movie`: table headers that fit a terminal."""
    return benchmark.removeprefix("crossner-").removeprefix("mit-")


def _summary_rows(res: BuildResult) -> tuple[list[str], list[list[Any]]]:
    names = list(res.benchmarks)
    cols = [
        "set",
        "sentences",
        "mentions",
        "labels",
        *map(_short, names),
        "macro",
        "VB.5",
        "95% CI",
    ]
    rows = []
    for sub in [res.full, *res.subsets]:
        f = sub.familiarity
        rows.append(
            [
                "full" if sub.level == "full" else sub.level,
                sub.sentences,
                sub.mentions,
                sub.labels,
                *[f.per_benchmark[b].familiarity for b in names],
                f.union_macro,
                f.summary["vb_0.5"],
                f"{f.summary['ci_low']:.3f}-{f.summary['ci_high']:.3f}",
            ]
        )
    return cols, rows


@click.command("build-splits", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--source", required=True, help="Training corpus in the store (ingested if needed).")
@click.option("--path", help="Local files of the source, ingested first (no-op if unchanged).")
@click.option(
    "--strategy", type=click.Choice(STRATEGIES), default=DEFAULT_STRATEGY, show_default=True
)
@click.option("--levels", default=",".join(LEVELS), show_default=True, help="Subsets to build.")
@_benchmarks_option
@_model_option
@click.option("--k", "k", type=int, default=K, show_default=True, help="Familiarity top-K.")
@click.option(
    "--temperature", type=float, default=TEMPERATURE, show_default=True, help="Entropy softmax T."
)
@click.option("--low-quantile", "low_q", type=float, help="Override the low-shift quantile.")
@click.option("--high-quantile", "high_q", type=float, help="Override the high-shift quantile.")
@click.option(
    "--medium-band", "medium_q", type=(float, float), help="Override q_lo q_hi of medium."
)
@click.option("--profile", type=click.Choice(["pilener", "nuner"]), help="Quantile profile.")
@click.option("--per-benchmark", is_flag=True, help="One set of subsets per benchmark.")
@click.option("--keep-misc", is_flag=True, help="Keep `misc` (as `else`) in benchmark label sets.")
@click.option("--seed", type=int, default=SEED, show_default=True, help="Bootstrap seed.")
@embedding_options
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out"),
    show_default=True,
    help="Where the dataset folders are written.",
)
@common_options
@handle_errors
def build_splits(
    path: str | None, out: Path, db: Path, as_json: bool, quiet: bool, **params: Any
) -> None:
    """Build low / medium / high label-shift subsets of a training corpus.

    Scores every training label against the benchmark labels (max similarity or softmax
    entropy), cuts them at the paper's quantiles, writes each subset as a Hub-ready folder
    OUT/{source}-{level}-shift/{strategy}/ and reports its Familiarity per benchmark.

    Example: build-splits --source nuner --path NuNER/ --strategy entropy --out out/
    """
    cfg = SplitConfig(**params)  # the options are SplitConfig's parameters, by name
    command = _command_line("build-splits")
    with open_store(db) as store:
        _ensure_ingested(store, cfg.source, path, quiet)
        results = build(
            store, cfg, out, progress=not quiet, command=command, on_stage=lambda s: note(s, quiet)
        )
    if as_json:
        emit_json([r.to_dict() for r in results])
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


@click.command("familiarity")
@click.option("--source", required=True, help="Training corpus in the store (ingested if needed).")
@click.option("--path", help="Local files of the source, ingested first (no-op if unchanged).")
@_benchmarks_option
@_model_option
@click.option("--k", "k", type=int, default=K, show_default=True, help="Familiarity top-K.")
@click.option(
    "--weighting",
    type=click.Choice(WEIGHTINGS),
    default=WEIGHTING,
    show_default=True,
)
@click.option("--keep-misc", is_flag=True, help="Keep `misc` (as `else`) in benchmark label sets.")
@click.option("--seed", type=int, default=SEED, show_default=True, help="Bootstrap seed.")
@click.option("--per-label", is_flag=True, help="Also list F(z) for every evaluation label.")
@embedding_options
@common_options
@handle_errors
def familiarity_cmd(
    source: str,
    path: str | None,
    benchmarks: str,
    model: str,
    k: int,
    weighting: str,
    keep_misc: bool,
    seed: int,
    per_label: bool,
    backend: str,
    precision: str,
    db: Path,
    as_json: bool,
    quiet: bool,
) -> None:
    """How familiar is a training corpus with the benchmarks? (before you report zero-shot F1)

    Familiarity per benchmark and over the union of their labels, with VB robustness, a
    bootstrap CI, exact label overlap and the most familiar training labels.

    Example: builders familiarity --source pilener-sample --benchmarks crossner-ai,mit-movie
    """
    from builders.labels import label_sets, resolve_benchmarks
    from builders.shift.embedder import canonical_name
    from builders.shift.report import LabelTable, measure
    from builders.shift.runtime import check_choice

    check_choice(backend, precision)  # before any ingest or load

    with open_store(db) as store:
        _ensure_ingested(store, source, path, quiet)
        sets = label_sets(resolve_benchmarks(benchmarks), keep_misc)
        table = LabelTable.load(store, source)
        rep = measure(
            store,
            table,
            sets,
            model=canonical_name(model),
            k=k,
            weighting=weighting,
            seed=seed,
            progress=not quiet,
            backend=backend,
            precision=precision,
        )
    if as_json:
        emit_json(
            {
                "source": source,
                "model": model,
                "k": k,
                "weighting": weighting,
                "backend": backend,
                "precision": precision,
                "labels": len(table.labels),
                "mentions": int(table.mentions.sum()),
                **rep.to_dict(),
            }
        )
        return
    _print_familiarity(f"Familiarity of {source} ({model}, K={k}, {weighting})", rep, per_label)


def _print_familiarity(title: str, rep: FamiliarityReport, per_label: bool) -> None:
    """A report as a table: one row per benchmark, then the union; optionally F(z) per label."""
    rows: list[list[Any]] = []
    for name, b in rep.per_benchmark.items():
        top = ", ".join(t.label for t in b.top_training_labels[:3])
        rows.append([name, b.familiarity, b.summary["vb_0.5"], b.summary["vb_1"], b.overlap, top])
    s = rep.summary
    ci = f"95% CI {s['ci_low']:.3f}-{s['ci_high']:.3f}"
    rows.append(["union (macro)", rep.union_macro, s["vb_0.5"], s["vb_1"], rep.overlap, ci])
    print_table(
        title,
        ["benchmark", "Familiarity", "VB 0.5", "VB 1", "overlap", "most familiar labels"],
        rows,
    )
    if per_label:
        print_table(
            "per evaluation label",
            ["label", "F"],
            [[z, v] for z, v in sorted(rep.per_label.items(), key=lambda kv: -kv[1])],
        )
