"""`familiarity`: the metric on the command line, with the authors' figures beside ours."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from builders.cli.errors import handle_errors
from builders.cli.leakage import leakage_options, print_leakage
from builders.cli.options import (
    benchmarks_option,
    common_options,
    embedding_options,
    metric_options,
    model_option,
    source_options,
)
from builders.cli.output import emit_json, note, print_table
from builders.cli.session import ensure_ingested, open_store
from builders.labels import paper_table, reference_familiarity
from builders.shift.survey import FamiliarityRequest, survey

if TYPE_CHECKING:
    from builders.shift.report import FamiliarityReport
    from builders.shift.specs import EmbeddingSpec, MetricSpec


@click.command("familiarity")
@source_options
@benchmarks_option
@model_option
@metric_options("protocol", "k", "weighting")
@click.option("--keep-misc", is_flag=True, help="Keep `misc` (as `else`) in benchmark label sets.")
@metric_options("seed")
@click.option("--per-label", is_flag=True, help="Also list F(z) for every evaluation label.")
@click.option(
    "--reference",
    metavar="CORPUS",
    help="Show the Familiarity paper's figures for CORPUS (pilener, nuner, fewnerd, ...) beside "
    "ours [default: the source's name, when the authors measured a corpus by that name].",
)
@leakage_options
@embedding_options
@common_options
@handle_errors
def familiarity_cmd(
    source: str,
    path: str | None,
    benchmarks: str,
    label_map: str | None,
    embedding: EmbeddingSpec,
    metric: MetricSpec,
    keep_misc: bool,
    per_label: bool,
    reference: str | None,
    leakage: bool,
    ngram: int,
    db: Path,
    as_json: bool,
    quiet: bool,
) -> None:
    """How familiar is a training corpus with the benchmarks? (before you report zero-shot F1)

    Familiarity per benchmark and over the union of their labels, with VB robustness, a
    bootstrap CI and label overlap; the paper's figures beside ours where it measured the corpus.

    Example: builders familiarity --source pilener-sample --benchmarks crossner-ai,mit-movie
    """
    authors = reference_familiarity(reference or source)
    if reference and authors is None:
        raise click.BadParameter(
            f"the authors measured no corpus {reference!r}", param_hint="--reference"
        )
    request = FamiliarityRequest(
        source,
        benchmarks,
        label_map=label_map,
        keep_misc=keep_misc,
        leakage=leakage,
        ngram=ngram,
        embedding=embedding,
        metric=metric,
    )
    with open_store(db, create=True, shared=True) as store:
        ensure_ingested(store, source, path, quiet)
        found = survey(
            store,
            request,
            on_note=lambda s: note(s, quiet),
            on_warning=lambda s: click.echo(f"warning: {s}", err=True),
            progress=not quiet,
        )
        req, corpus = found.request, reference or source
        if as_json:
            ref = None
            if authors is not None:
                ref = {"corpus": corpus, **paper_table()["source"], "familiarity": authors}
            emit_json({**found.to_dict(), "reference": ref})
            return
        title = (
            f"Familiarity of {req.source} ({req.embedding.model}, K={req.metric.k}, "
            f"{req.metric.weighting}, {req.metric.protocol} protocol)"
        )
        _print_familiarity(title, found.report, per_label, authors)
        if authors:
            note(
                f"authors: the Familiarity paper's figures for its corpus {corpus!r} "
                "(K=1000, Zipf, all-mpnet-base-v2, --protocol paper); they compare with ours "
                "only when this source holds that same corpus and the same options are used",
                quiet,
            )
        if found.leakage is not None:
            title = f"Leakage of {req.source} (n = {req.ngram}; --no-leakage skips)"
            print_leakage(title, found.leakage, quiet)


def _print_familiarity(
    title: str, rep: FamiliarityReport, per_label: bool, authors: dict[str, float] | None
) -> None:
    """A report as a table: a row per benchmark, then both headline figures (the authors'
    beside ours when given); optionally F(z) per label."""
    ref = (authors or {}).get
    rows: list[list[Any]] = []
    for name, b in rep.per_benchmark.items():
        top = ", ".join(t.label for t in b.top_training_labels[:3])
        rows.append(
            [name, b.familiarity, ref(name), b.summary["vb_0.5"], b.summary["vb_1"], b.overlap, top]
        )
    s = rep.summary
    ci = f"95% CI {s['ci_low']:.3f}-{s['ci_high']:.3f}"
    rows.append(["union macro", rep.union_macro, None, s["vb_0.5"], s["vb_1"], rep.overlap, ci])
    n = sum(len(b.labels) for b in rep.per_benchmark.values())
    rows.append([f"paper figure ({n} labels)", rep.paper_figure, ref("paper_figure"), *[None] * 4])
    cols = [
        "benchmark",
        "Familiarity",
        "authors",
        "VB 0.5",
        "VB 1",
        "overlap",
        "most familiar labels",
    ]
    if not authors:
        cols.pop(2)
        rows = [r[:2] + r[3:] for r in rows]
    print_table(title, cols, rows)
    if per_label:
        print_table(
            "per evaluation label",
            ["label", "F"],
            [[z, v] for z, v in sorted(rep.per_label.items(), key=lambda kv: -kv[1])],
        )
