"""`builders export-gliner`: a built subset as GLiNER training json."""

from __future__ import annotations

from pathlib import Path

import click

from builders.cli.common import common_options, emit_json, handle_errors, note


@click.command("export-gliner", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--config", help="Config (strategy) to export: entropy, max. Default: the folder's default."
)
@click.option(
    "--split", default="train", show_default=True, help="Split (Few-NERD: validation, test too)."
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The GLiNER json file to write.",
)
@common_options
@handle_errors
def export_gliner_cmd(
    folder: Path,
    config: str | None,
    split: str,
    out: Path,
    db: Path,
    as_json: bool,
    quiet: bool,
) -> None:
    """Export FOLDER (a subset built by build-splits, or a Few-NERD folder) to GLiNER json.

    Writes a list of {"tokenized_text", "ner": [[start, end_inclusive, label], ...],
    "negatives"}; the folder's exclusive span ends become GLiNER's inclusive ones.

    Example: builders export-gliner out/pilener-low-shift --config max --out pilener-low-max.json
    """
    from builders.hub.export import export_gliner

    rows = export_gliner(folder, config, out, split=split)
    if as_json:
        emit_json(
            {"folder": str(folder), "config": config, "split": split, "out": str(out), "rows": rows}
        )
        return
    note(f"{folder}: {rows:,} rows -> {out}", quiet)
