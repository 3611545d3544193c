"""`builders export-gliner`: a built folder as GLiNER training json, or a stored benchmark as
GLiNER's evaluation folder."""

from __future__ import annotations

from pathlib import Path

import click

from builders.cli.common import common_options, emit_json, handle_errors, note, open_store


@click.command("export-gliner", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("folder", required=False)
@click.option(
    "--config", help="Config (strategy) to export: entropy, max. Default: the folder's default."
)
@click.option(
    "--split", default="train", show_default=True, help="Split (Few-NERD: validation, test too)."
)
@click.option(
    "--benchmark",
    metavar="SOURCE",
    help="Instead of FOLDER: write this stored source as GLiNER's evaluation folder "
    "(train/dev/test.json + labels.json) at --out.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="The GLiNER json file to write (with --benchmark: the folder).",
)
@common_options
@handle_errors
def export_gliner_cmd(
    folder: str | None,
    config: str | None,
    split: str,
    benchmark: str | None,
    out: Path,
    db: Path,
    as_json: bool,
    quiet: bool,
) -> None:
    """Export FOLDER (built by build-splits or fewnerd-splits, or its Hub repo ORG/NAME) to
    GLiNER training json, or a stored benchmark to GLiNER's evaluation folder.

    Training json is a list of {"tokenized_text", "ner": [[start, end_inclusive, label], ...],
    "ner_negatives", "negative_ner"} (the keys GLiNER's trainer reads; `ner_negatives` only on
    rows that have negatives; `negative_ner`, span-level negatives in the layout of `ner`, only
    on rows that have them: `builders ingest gliner` reads them back, GLiNER ignores them).
    FOLDER that is not a local folder is downloaded from the Hub. A local FOLDER is first
    checked against the manifest its build wrote (see publish).

    Example: builders export-gliner out/pilener-low-shift --config max --out pilener-low-max.json

    Example: builders export-gliner --benchmark crossner-ai --out gliner-data/CrossNER_AI
    """
    if (folder is None) == (benchmark is None):
        raise click.UsageError("give FOLDER (a built folder or Hub repo) or --benchmark SOURCE")
    if benchmark is not None:
        _export_benchmark(benchmark, out, db, as_json, quiet)
        return
    from builders.hub.export import export_gliner, local_folder

    assert folder is not None
    where, repo_id = local_folder(folder, config)
    if repo_id:
        note(f"{folder}: not a local folder; read from the Hub dataset repo {repo_id}", quiet)
    else:
        _check_level(where, config, quiet)
    counts = export_gliner(where, config, out, split=split)
    if as_json:
        emit_json({"folder": folder, "config": config, "split": split, "out": str(out), **counts})
        return
    note(
        f"{folder}: {counts['rows']:,} rows, {counts['mentions']:,} mentions, "
        f"{counts['negatives']:,} negatives, {counts['negative_spans']:,} negative spans -> {out}",
        quiet,
    )


def _check_level(folder: Path, config: str | None, quiet: bool) -> None:
    """The config to export (the folder's default when None) is the one its build wrote."""
    from builders.hub.folder import configs_of
    from builders.hub.manifest import check_levels

    if config is None and folder.is_dir():
        config = next(iter(configs_of(folder)), None)
    if config is not None:
        check_levels([folder], config, note=lambda text: note(f"note: {text}", quiet))


def _export_benchmark(source: str, out: Path, db: Path, as_json: bool, quiet: bool) -> None:
    from builders.hub.export import EVAL_FILES, export_gliner_benchmark

    with open_store(db, read_only=True) as store:
        res = export_gliner_benchmark(store, source, out)
    if as_json:
        emit_json(res)
        return
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
