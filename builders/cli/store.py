"""`sources`, `ingest`, `labels` and `stats`: what can be loaded, loading it, and what the
store holds."""

from __future__ import annotations

from pathlib import Path

import click

from builders.cli.common import (
    common_options,
    emit_json,
    handle_errors,
    note,
    open_store,
    parse_options,
    print_table,
    progress_bar,
)
from builders.sources import SOURCES


@click.command("sources")
@common_options
@handle_errors
def sources_cmd(db: Path, as_json: bool, quiet: bool) -> None:
    """List the sources that can be loaded, their kind and default origin.

    Example: builders sources --json
    """
    rows = []
    for spec in SOURCES.values():
        local = spec.default_path()
        rows.append(
            {
                "source": spec.name,
                "kind": spec.kind,
                "origin": spec.origin + (f" [{spec.origin_config}]" if spec.origin_config else "")
                if spec.origin
                else None,
                "local": str(local) if local else None,
                "license": spec.license,
                "description": spec.description,
            }
        )
    if as_json:
        emit_json(rows)
        return
    print_table(
        "Sources",
        ["source", "kind", "default origin", "description"],
        [
            [r["source"], r["kind"], r["local"] or r["origin"] or "--path", r["description"]]
            for r in rows
        ],
    )


@click.command("ingest")
@click.argument("source")
@click.option("--path", "path", help="Local file or folder (or, for `hf`, a Hub dataset id).")
@click.option("--split", help="Only this split (train, dev, test).")
@click.option("--name", help="Store it under this name (default: the source name).")
@click.option("--replace", is_flag=True, help="Re-read even if the input is unchanged.")
@click.option(
    "--repair", is_flag=True, help="Read lax tags (I- opening an entity) as B-, and count them."
)
@click.option("-o", "--option", "opts", multiple=True, metavar="KEY=VALUE", help="Reader option.")
@common_options
@handle_errors
def ingest_cmd(
    source: str,
    path: str | None,
    split: str | None,
    name: str | None,
    replace: bool,
    repair: bool,
    opts: tuple[str, ...],
    db: Path,
    as_json: bool,
    quiet: bool,
) -> None:
    """Load SOURCE into the span store, all splits in one transaction.

    Re-ingesting an unchanged input does nothing; --replace forces a re-read.

    Example: builders ingest crossner-ai --path data/crossner/ai --json
    """
    from builders.store.ingest import ingest

    options = parse_options(opts)
    if repair:
        options["repair"] = True
    with open_store(db) as store, progress_bar(f"ingest {source}", quiet, unit=" sent") as bar:
        result = ingest(
            store,
            source,
            path,
            split=split,
            name=name,
            replace=replace,
            options=options,
            progress=bar,
        )
    if as_json:
        emit_json(result.to_dict())
        return
    print_table(
        f"{result.source} ({result.kind}): {result.status}",
        ["split", "status", "sentences", "mentions", "negatives", "types"],
        [[s.split, s.status, s.sentences, s.mentions, s.negatives, s.types] for s in result.splits]
        + [
            [
                "all",
                result.status,
                result.sentences,
                result.mentions,
                result.negatives,
                result.types,
            ]
        ],
    )
    for s in result.splits:
        for key, n in s.report.get("counts", {}).items():
            note(f"{s.split}: {key.replace('_', ' ')}: {n:,}", quiet)
        for text in s.report.get("notes", []):
            note(f"{s.split}: {text}", quiet)


@click.command("labels")
@click.argument("source")
@click.option("--top", type=int, default=None, help="Only the N most frequent labels.")
@click.option("--split", "splits", multiple=True, help="Only these splits (repeatable).")
@common_options
@handle_errors
def labels_cmd(
    source: str, top: int | None, splits: tuple[str, ...], db: Path, as_json: bool, quiet: bool
) -> None:
    """List SOURCE's labels with their mention and sentence counts, most frequent first.

    Example: builders labels pilener-sample --top 20
    """
    from builders.defaults import canonical_split

    with open_store(db, read_only=True) as store:
        rows = store.label_counts(source, [canonical_split(s) for s in splits] or None, top)
    if as_json:
        emit_json([{"label": lab, "mentions": m, "sentences": s} for lab, m, s in rows])
        return
    print_table(f"{source}: labels", ["label", "mentions", "sentences"], [list(r) for r in rows])


@click.command("stats")
@common_options
@handle_errors
def stats_cmd(db: Path, as_json: bool, quiet: bool) -> None:
    """Show what the store holds: sources, splits, counts and cached embeddings.

    Example: builders stats --db labelshift.duckdb
    """
    with open_store(db, read_only=True) as store:
        stats = store.stats()
    if as_json:
        emit_json(stats)
        return
    print_table(
        f"Store {stats['db']}",
        ["source", "kind", "splits", "sentences", "mentions", "negatives", "types"],
        [
            [
                s["source"],
                s["kind"],
                ",".join(s["splits"]),
                s["sentences"],
                s["mentions"],
                s["negatives"],
                s["types"],
            ]
            for s in stats["sources"]
        ],
    )
    for model, n in stats["embeddings"].items():
        click.echo(f"embedding cache: {model}: {n:,} labels")
