"""`builders export` and `export-gliner` (its GLiNER format): GLiNER json or flair's column
files."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from builders.cli.errors import handle_errors
from builders.cli.options import common_options, option, stacked
from builders.cli.output import emit_json, note
from builders.cli.session import open_store
from builders.errors import ConflictingOptions
from builders.hub.export import EVAL_FILES, FORMATS, ExportRequest, export
from builders.hub.windows import MAX_TOKENS, MAX_TYPES, MAX_WIDTH, MAX_WORDS, Limits
from builders.splits.strategies import NAMES


def _limit(name: str, default: int, what: str) -> Callable:
    return option(name, type=click.IntRange(min=1), default=default, help=what)


def _options(out_help: str) -> Callable:
    """export-gliner's argument and options (`--out` helped with `out_help`)."""
    return stacked(
        click.argument("folder", required=False),
        click.option(
            "--config",
            help=f"Config (strategy) to export: {', '.join(NAMES)}. Default: the folder's default.",
        ),
        option(
            "--split",
            default="train",
            help="Split (Few-NERD folders: validation, test too; --source: any stored split).",
        ),
        click.option(
            "--source",
            metavar="NAME",
            help="Instead of FOLDER: write this stored corpus (every sentence of --split, with its "
            "mentions and negatives) as GLiNER training json.",
        ),
        click.option(
            "--benchmark",
            metavar="SOURCE",
            help="Instead of FOLDER: write this stored source as GLiNER's evaluation folder "
            "(train/dev/test.json + labels.json) at --out.",
        ),
        _limit("--max-words", MAX_WORDS, "Words a window holds at most (GLiNER's max_len)."),
        _limit(
            "--max-width",
            MAX_WIDTH,
            "Widest entity GLiNER keeps, in words (its max_width): wider ones are counted.",
        ),
        _limit(
            "--max-tokens",
            MAX_TOKENS,
            "Encoder tokens a window takes at most, its label prompt "
            "and the encoder's special tokens included (deberta-v3: 512).",
        ),
        _limit("--max-types", MAX_TYPES, "Labels in a row's prompt (GLiNER's max_types)."),
        click.option(
            "--tokenizer",
            metavar="PATH",
            help="Count tokens with this Hugging Face tokenizer (the encoder's: a local folder or "
            "a cached Hub name). Default: an estimate that counts high (METHOD.md section 4).",
        ),
        click.option(
            "--no-windows",
            is_flag=True,
            help="Write rows whole (GLiNER truncates what is over the limits; still counted).",
        ),
        click.option(
            "--out",
            type=click.Path(path_type=Path),
            required=True,
            help=out_help,
        ),
        common_options,
        handle_errors,
    )


@click.command("export-gliner")
@_options("The GLiNER json file to write (with --benchmark: the folder).")
def export_gliner_cmd(**options: Any) -> None:
    """Export a built FOLDER or a stored corpus as GLiNER training json.

    FOLDER is written by build-splits or fewnerd-splits (checked against its manifest) or its
    Hub repo ORG/NAME; --benchmark writes a stored benchmark as GLiNER's evaluation folder.
    Rows GLiNER would truncate are cut into windows it keeps whole (docs/GUIDE.md); what it
    still cannot keep is counted (--json: not_kept, whole_rows).

    Example: builders export-gliner out/pilener-low-shift --config max --out pilener-low-max.json

    Example: builders export-gliner --source pilener --tokenizer ~/deberta-v3-large --out all.json

    Example: builders export-gliner --benchmark crossner-ai --out gliner-data/CrossNER_AI
    """
    _export("gliner", **options)


@click.command("export")
@option(
    "--format",
    type=click.Choice(FORMATS),
    default="gliner",
    help="gliner: export-gliner's json (its options, its bytes); flair: flair's column files.",
)
@_options("The file to write (--benchmark, --format flair: the folder).")
def export_cmd(format: str, **options: Any) -> None:
    """Export a built FOLDER as GLiNER json or flair's column files.

    --format gliner is export-gliner (see its --help). --format flair writes a folder of
    train.txt, dev.txt, test.txt (TOKEN<TAB>TAG, BIO) for flair's ColumnCorpus(OUT, {0: "text",
    1: "ner"}); a word holds one tag, the outermost mention's: the others are counted
    (--json: not_kept), as are negatives.

    Example: builders export out/pilener-low-shift --config max --format flair --out flair/low-max
    """
    _export(format, **options)


def _export(fmt: Any, *, out: Path, db: Path, as_json: bool, quiet: bool, **o: Any) -> None:
    """Build the request of the options given (the others None), export, print."""
    ctx = click.get_current_context()
    given = {k for k in o if ctx.get_parameter_source(k) is not ParameterSource.DEFAULT}
    limits = Limits(o["max_words"], o["max_width"], o["max_tokens"], o["max_types"])
    try:
        request = ExportRequest(
            out,
            folder=o["folder"],
            source=o["source"],
            benchmark=o["benchmark"],
            config=o["config"],
            split=o["split"] if "split" in given else None,
            limits=replace(limits, windows=not o["no_windows"]) if given & _LIMITS else None,
            tokenizer=o["tokenizer"],
            format=fmt,
        )
    except ConflictingOptions as exc:  # not one of FOLDER, --source and --benchmark
        raise click.UsageError(str(exc)) from None
    res = export(request, lambda: open_store(db, read_only=True), on_note=lambda s: note(s, quiet))
    if as_json:
        emit_json(res)
    elif request.format == "flair":
        _flair_summary(request, res, quiet)
    elif request.benchmark is not None:
        _benchmark_summary(request.benchmark, res, request.out, quiet)
    else:
        _summary(request, res, quiet)


_LIMITS = {"max_words", "max_width", "max_tokens", "max_types", "no_windows"}


def _flair_summary(request: ExportRequest, res: dict[str, Any], quiet: bool) -> None:
    """The sentences and mentions written, then what the column files cannot hold."""
    rows = ", ".join(f"{name} {n:,}" for name, n in res["rows"].items())
    lost, renamed = res["not_kept"], res["labels_renamed"]
    note(
        f"{request.folder}: {rows} sentences, {res['mentions']:,} mentions -> {request.out}", quiet
    )
    note(
        f"not written: {lost['nested']:,} nested and {lost['overlapping']:,} overlapping mentions "
        f"(a word holds one tag; the outermost kept), {res['negatives_left_out']:,} negatives, "
        f"{res['negative_spans_left_out']:,} negative spans; {len(renamed):,} labels written "
        "with _ for whitespace (--json lists them)",
        quiet,
    )


def _summary(request: ExportRequest, res: dict[str, Any], quiet: bool) -> None:
    """The counts written, then what GLiNER still cannot keep and what windows saved."""
    what, out = request.folder or request.source, request.out
    rows = f"{res['rows']:,} rows"
    if res["windows"] != res["rows"]:
        rows += f" -> {res['windows']:,} windows ({res['rows_cut']:,} rows cut)"
    note(
        f"{what}: {rows}, {res['mentions']:,} mentions, {res['negatives']:,} negatives, "
        f"{res['negative_spans']:,} negative spans -> {out}",
        quiet,
    )
    lim = res["limits"]
    within = (
        f"{lim['max_words']} words, {lim['max_tokens']} tokens ({lim['tokens']}), "
        f"{lim['max_width']}-word entities, {lim['max_types']} types"
    )
    kept, whole = res["not_kept"], res["whole_rows"]
    if any(kept.values()):
        note(f"GLiNER cannot keep (limits {within}): {_losses(kept)}", quiet)
    else:
        note(f"GLiNER keeps every word and mention (limits {within})", quiet)
    if lim["windows"] and whole != kept:
        note(f"written whole, the rows could lose: {_losses(whole)}", quiet)
    if lim["tokens"] == "estimated" and res["rows_cut"]:
        note(
            "note: tokens are estimated high; --tokenizer with the encoder's tokenizer cuts "
            "rows only where it must",
            quiet,
        )


def _losses(d: dict[str, int]) -> str:
    """`Losses` in words: the figures that are not 0."""
    parts = [
        (d["mentions_too_wide"], "mentions wider than the limit"),
        (d["rows_over_words"], f"rows over the word limit ({d['words_over']:,} words past it)"),
        (
            d["rows_over_tokens"],
            f"rows over the token limit ({d['tokens_over']:,} tokens, "
            f"{d['words_past_tokens']:,} words past it)",
        ),
        (d["mentions_cut"], "mentions in the words past a limit"),
        (d["rows_over_types"], "rows with more types than the limit"),
        (
            d["words_without_tokens"],
            f"words the tokenizer gives no token ({d['mentions_shifted']:,} mentions after "
            "them, which GLiNER misplaces)",
        ),
    ]
    return "; ".join(f"{n:,} {text}" for n, text in parts if n) or "nothing"


def _benchmark_summary(source: str, res: dict[str, Any], out: Path, quiet: bool) -> None:
    """What a benchmark's evaluation folder holds, and what GLiNER's evaluation makes of it."""
    rows = ", ".join(f"{name} {n:,}" for name, n in res["rows"].items())
    note(f"{source}: {rows} sentences, {res['labels']} labels -> {out}", quiet)
    missing = [name for name in EVAL_FILES if name not in res["rows"]]
    if missing:
        note(
            f"{source} has no {', '.join(missing)} split: GLiNER's create_dataset reads "
            "train, dev and test; its evaluation (get_for_one_path) uses test only",
            quiet,
        )
    if res["splits_left_out"] or res["negatives_left_out"] or res["negative_spans_left_out"]:
        note(
            f"left out: splits {res['splits_left_out'] or 'none'} (no GLiNER file name), "
            f"{res['negatives_left_out']:,} negatives and {res['negative_spans_left_out']:,} "
            "negative spans (the layout has none)",
            quiet,
        )
    if any(w in out.name for w in ("train", "dev", "test", "labels")):
        note(
            f"{out.name}: GLiNER's open_content matches 'train', 'dev', 'test', 'labels' "
            "anywhere in a file's path; rename the folder before you evaluate on it",
            quiet,
        )
