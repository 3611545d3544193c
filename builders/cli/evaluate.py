"""`evaluate` and `predict`: a model's zero-shot predictions made, scored and set beside the
Familiarity of what it learned from."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from builders.cli.errors import handle_errors, os_error_message
from builders.cli.options import (
    common_options,
    embedding_options,
    metric_options,
    model_option,
    option,
)
from builders.cli.output import emit_json, note, print_table
from builders.cli.session import open_store
from builders.evaluate import EvaluateRequest, evaluate
from builders.evaluate.report import markdown, plot_png, runs_lines, runs_tables, tables, view_lines
from builders.evaluate.runs import evaluate_runs, read_runs, record_difficulty
from builders.evaluate.scoring import MISC_POLICIES
from builders.files import atomic_open
from builders.progress import progress_bar
from builders.shift.embedder import Embedder

if TYPE_CHECKING:
    from builders.shift.specs import EmbeddingSpec, MetricSpec


@click.command("evaluate")
@click.argument("predictions", nargs=-1)
@click.option(
    "--source",
    "training",
    metavar="TRAINING",
    help="What the model was trained on: a source in the store, a folder written by "
    "build-splits (a level), or a label-count file (.json label -> mentions). Without it, "
    "only the scores.",
)
@click.option("--config", help="The level folder's config, where it holds several.")
@option(
    "--misc",
    type=click.Choice(MISC_POLICIES),
    default="keep",
    help="`else` / `misc` kept as a label (GLiNER's published evaluation) or dropped from gold "
    "and predictions (UniversalNER's).",
)
@click.option(
    "--runs",
    "runs_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="A TOML file of [[run]] tables (name, training, predictions per seed, seeds, model, "
    "steps): the paper's Table 3 over the runs, Table 5 over the levels of one build.",
)
@click.option(
    "--record",
    is_flag=True,
    help="With --runs: write each level's measured difficulty into its build.json and card.",
)
@click.option(
    "--markdown",
    "markdown_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the tables as Markdown to this file.",
)
@click.option(
    "--plot",
    "plot_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write Familiarity against F1 and mentions against F1 (with the fit) as a PNG.",
)
@model_option
@metric_options("k", "weighting", "seed")
@embedding_options
@common_options
@handle_errors
def evaluate_cmd(
    predictions: tuple[str, ...],
    training: str | None,
    config: str | None,
    misc: str,
    runs_file: Path | None,
    record: bool,
    markdown_out: Path | None,
    plot_out: Path | None,
    embedding: EmbeddingSpec,
    metric: MetricSpec,
    db: Path,
    as_json: bool,
    quiet: bool,
) -> None:
    """Score a model's predictions on the benchmarks and put each label's F1 in context.

    PREDICTIONS: files or folders of predictions on stored benchmarks' test sets, one file per
    benchmark named after it (`crossner-ai.json`, or NAME=FILE): GLiNER json or per-label score
    tables (.csv/.tsv). With --source, each label's Familiarity and training mentions beside
    its F1 (docs/GUIDE.md, METHOD.md section 9).

    Example: builders evaluate preds/ --source out/demo/pilener-sample-low-shift --plot f1.png
    """
    if bool(predictions) == bool(runs_file):
        raise click.UsageError("give PREDICTIONS, or --runs FILE")
    if runs_file and (training or config or plot_out):
        raise click.UsageError(
            "--source, --config and --plot go with PREDICTIONS (a run names its own)"
        )
    if record and not runs_file:
        raise click.UsageError("--record goes with --runs")
    if plot_out is not None and not training:
        raise click.UsageError("--plot goes with --source (the labels' context)")
    request = EvaluateRequest(predictions, training, config, misc, embedding, metric)
    with open_store(db, create=True, shared=True) as store:
        emb, say = Embedder.of(embedding), (lambda s: note(s, quiet))
        if runs_file is not None:
            result = evaluate_runs(store, read_runs(runs_file), embedder=emb, request=request,
                                   on_note=say, progress=not quiet)  # fmt: skip
            found, lines, data = runs_tables(result), runs_lines(result), result.to_dict
        else:
            ev = evaluate(store, request, embedder=emb, on_note=say, progress=not quiet)
            found, lines, data = tables(ev), view_lines(ev), ev.to_dict
    outputs = {markdown_out: markdown(found, lines).encode("utf-8")} if markdown_out else {}
    if plot_out is not None:
        outputs[plot_out] = plot_png(
            ev.points, ev.views, f"{', '.join(predictions)}, trained on {training}"
        )
    with ExitStack() as files:  # each output appears when every one is written, or none
        for path, data_ in outputs.items():
            files.enter_context(_written(path)).write(data_)
        written = record_difficulty(result) if record else []
    if as_json:
        emit_json({**data(), "recorded": [str(p) for p in written]})
        return
    for title, cols, rows, text in found:
        print_table(title, cols, rows, wrap=120, text_columns=text)
    for line in lines:
        click.echo(line)
    for p in written:
        note(f"measured difficulty written into {p}/build.json and {p.parent}/README.md", quiet)


@contextmanager
def _written(path: Path) -> Iterator[Any]:
    """`atomic_open(path, binary=True)`, an OSError it meets said in one line naming `path`."""
    try:
        with atomic_open(path, binary=True) as fh:
            yield fh
    except OSError as exc:
        raise click.ClickException(
            os_error_message(exc) or f"{path}: cannot write it ({exc.strerror or exc})"
        ) from exc


@click.command("predict")
@click.argument("model", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="The predictions folder to write (replaced whole).")  # fmt: skip
@option("--benchmarks", default="all",
              help="Comma-separated: `all` (the seven zero-shot benchmarks), a packaged name, a stored source.")  # fmt: skip
@option("--threshold", type=click.FloatRange(0, 1), default=0.5, help="GLiNER's threshold.")
@click.option("--nested", is_flag=True, help="Keep overlapping spans (GLiNER's flat_ner off).")
@option("--batch-size", type=click.IntRange(min=1), default=8)
@click.option(
    "--limit", type=click.IntRange(min=1), help="Predict only the first N test sentences of each."
)
@common_options
@handle_errors
def predict_cmd(
    model: Path, out: Path, benchmarks: str, threshold: float, nested: bool, batch_size: int,
    limit: int | None, db: Path, as_json: bool, quiet: bool,
) -> None:  # fmt: skip
    """Predict the benchmarks' test sets with a local GLiNER model, for `builders evaluate`.

    Runs MODEL (a GLiNER folder) over each benchmark's stored test sentences with its own
    labels, on the CPU or $LABELSHIFT_DEVICE, and writes OUT/<benchmark>.json and
    OUT/manifest.json. Needs GLiNER (`make gliner`: .venv-gliner).

    Example: .venv-gliner/bin/builders predict runs/low-s1 --out preds/low-s1
    """
    from builders.evaluate.predict import PredictRequest, predict

    request = PredictRequest(model, out, benchmarks, threshold, not nested, batch_size, limit)
    with open_store(db, create=True, shared=True) as store, ExitStack() as bars:
        manifest = predict(
            store, request, on_note=lambda s: note(s, quiet),
            progress=lambda name, n: bars.enter_context(progress_bar(f"predict {name}", quiet, n, " sent")),
        )  # fmt: skip
    if as_json:
        emit_json(manifest)
        return
    for name, b in manifest["benchmarks"].items():
        click.echo(f"{name}: {b['sentences']:,} sentences, {b['predicted']:,} mentions predicted")
    note(f"wrote {out} (weights {manifest['weights']}); score it: builders evaluate {out}", quiet)
