"""`sources`, `ingest`, `labels` and `stats`: loading the store and what it holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from builders.cli.errors import handle_errors
from builders.cli.options import common_options, output_options, parse_options
from builders.cli.output import emit_json, note, print_table
from builders.cli.session import open_store, warn_older_reads
from builders.labels import normalise_label
from builders.names import check_name
from builders.progress import progress_bar
from builders.shift.benchmarks import read_label_map
from builders.shift.embedder import is_stale_key
from builders.sources import SOURCES, check_split, reader_options
from builders.store import wal_holds_writes, wal_path
from builders.store.ingest import plan_ingest
from builders.store.writer import prepare_source


@click.command("sources")
@output_options
@handle_errors
def sources_cmd(as_json: bool, quiet: bool) -> None:
    """List the sources that can be loaded, their kind, default origin and reader options.

    Example: builders sources --json
    """
    rows: list[dict[str, Any]] = [
        {
            "source": spec.name,
            "kind": spec.kind,
            "origin": spec.origin + (f" [{spec.origin_config}]" if spec.origin_config else "")
            if spec.origin
            else None,
            "local": str(local) if (local := spec.default_path()) else None,
            "license": spec.license,
            "description": spec.description,
            "reader": spec.module,
            "options": dict(spec.options),
            "reader_options": reader_options(spec.module).describe(),
        }
        for spec in SOURCES.values()
    ]
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
    click.echo("Fixed options (the source's reader gets them; -o KEY=VALUE overrides):")
    for r in rows:
        if r["options"]:
            fixed = " ".join(f"{k}={_shown(v)}" for k, v in r["options"].items())
            click.echo(f"  {r['source']} ({r['reader']}): {fixed}")
    click.echo(_options_help())


def _shown(value: object) -> str:
    return {"\t": "tab", " ": "space"}.get(str(value), str(value))


def _options_help() -> str:
    """Every reader's options, for `sources` and `ingest --help`."""
    lines = ["Reader options (-o KEY=VALUE; the source's fixed options come first):"]
    for module in dict.fromkeys(spec.module for spec in SOURCES.values()):
        described = reader_options(module).describe()
        if not described:
            lines.append(f"  {module}: none")
            continue
        lines.append(f"  {module}:")
        for o in described:
            default = "unset" if o["default"] is None else _shown(o["default"])
            lines.append(f"    {o['name']} ({o['type']}, default {default}): {o['help']}")
    return "\n".join(lines)


class _IngestCommand(click.Command):
    """`ingest --help` ends with every reader's options."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_paragraph()
        formatter.write(_options_help() + "\n")


@click.command("ingest", cls=_IngestCommand)
@click.argument("source")
@click.option(
    "--path",
    "paths",
    multiple=True,
    help="A file, folder or quoted glob (repeatable); for `hf`, a Hub dataset id. A folder "
    "whose file names say no split is read as train (shards).",
)
@click.option("--split", help="Only this split (train, dev, test or an alias such as validation).")
@click.option("--name", help="Store it under this name (default: the source name).")
@click.option(
    "--replace", is_flag=True, help="Replace what the store holds for these splits (re-read)."
)
@click.option(
    "--append",
    is_flag=True,
    help="Add these inputs to what the splits hold (shards), in one transaction.",
)
@click.option(
    "--columns",
    metavar="ROLES",
    help="What each column of a column file holds, e.g. tag,token or token,pos,chunk,tag "
    "(default: the tag column is found from the values).",
)
@click.option(
    "--repair", is_flag=True, help="Read lax tags (I- opening an entity) as B-, and count them."
)
@click.option("-o", "--option", "opts", multiple=True, metavar="KEY=VALUE", help="Reader option.")
@click.option(
    "--revision",
    help="A Hub dataset's branch, tag or commit to read (default its main branch); the "
    "commit read is recorded with each input.",
)
@click.option(
    "--label-map",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Raw tag -> label (.json object, or .toml: its [verbalise] table), read before the "
    "packaged table that verbalises tags (PER -> person); the benchmarks' --label-map format.",
)
@common_options
@handle_errors
def ingest_cmd(
    source: str,
    paths: tuple[str, ...],
    split: str | None,
    name: str | None,
    replace: bool,
    append: bool,
    columns: str | None,
    repair: bool,
    opts: tuple[str, ...],
    revision: str | None,
    label_map: Path | None,
    db: Path,
    as_json: bool,
    quiet: bool,
) -> None:
    """Load SOURCE into the span store, all splits in one transaction.

    Re-ingesting an unchanged input does nothing; a split holding a different input needs
    --replace or --append. Raw tags are verbalised (PER -> person).

    Example: builders ingest columns --path conll/train.txt --name mine --label-map tags.toml

    Example: builders ingest brat --path annotations/ --name ours
    """

    options = parse_options(opts)
    if repair:
        options["repair"] = True
    if columns is not None:
        options["columns"] = columns
    mapping = read_label_map(label_map) if label_map is not None else None
    spec, plan = plan_ingest(
        source,
        list(paths) or None,
        split=split,
        options=options,
        label_map=mapping,
        revision=revision,
    )
    check_name(name or spec.name, "source name", "pass --name NAME")  # before any bar
    with (
        open_store(db, create=True) as store,
        progress_bar(f"ingest {source}", quiet, unit=" sent") as bar,
    ):
        result = prepare_source(
            store, spec, plan, name=name, replace=replace, append=append, progress=bar
        ).write()
    if as_json:
        emit_json(result.to_dict())
        return
    keys = ["sentences", "mentions", "negatives"]
    if result.negative_spans:
        keys.append("negative_spans")
    print_table(
        f"{result.source} ({result.kind}): {result.status}",
        ["split", "status", *[k.replace("_", " ") for k in keys], "types"],
        [[s.split, s.status, *[getattr(s, k) for k in keys], s.types] for s in result.splits]
        + [["all", result.status, *[getattr(result, k) for k in keys], result.types]],
    )
    for text in result.notes:
        note(text, quiet)
    for s in result.splits:
        if s.status == "unchanged":  # not read: its report is the stored one (--json has it)
            continue
        for text in report_lines(s.report):
            note(f"{s.split}: {text}", quiet)
    kept = [s.split for s in result.splits if s.status == "unchanged"]
    if kept:
        note(
            f"{', '.join(kept)}: input unchanged, not read again (the reader's report of the "
            "earlier read is in --json)",
            quiet,
        )


def report_lines(report: dict[str, Any]) -> list[str]:
    """A split's reader report as lines: each count a note does not spell out, then the
    notes."""
    notes = report.get("notes", [])
    lines = [
        f"{key.replace('_', ' ')}: {n:,}"
        for key, n in report.get("counts", {}).items()
        if not any(key.replace("_", " ") in text for text in notes)
    ]
    return lines + list(notes)


@click.command("labels")
@click.argument("source")
@click.option("--top", type=click.IntRange(min=1), help="Only the N most frequent labels.")
@click.option("--split", "splits", multiple=True, help="Only these splits (repeatable).")
@common_options
@handle_errors
def labels_cmd(
    source: str, top: int | None, splits: tuple[str, ...], db: Path, as_json: bool, quiet: bool
) -> None:
    """List SOURCE's labels, their raw tags and counts, most frequent first.

    Example: builders labels pilener-sample --top 20
    """
    wanted = [check_split(s) for s in splits] or None
    with open_store(db, read_only=True) as store:
        rows = store.label_counts(source, wanted, top)
        raws: dict[str, set[str]] = {}
        for split in wanted or store.splits_of(source):
            for raw, label, _ in store.raw_labels(source, split):
                raws.setdefault(label, set()).add(raw)
    shown = [(lab, sorted(raws.get(lab, ())), m, s) for lab, m, s in rows]
    if as_json:
        emit_json(
            [{"label": lab, "raw": r, "mentions": m, "sentences": s} for lab, r, m, s in shown]
        )
        return
    print_table(
        f"{source}: labels",
        ["raw -> label", "mentions", "sentences"],
        [[_verbalised(lab, r), m, s] for lab, r, m, s in shown],
    )


def _verbalised(label: str, raws: list[str]) -> str:
    """`PER -> person`; a label its raw spellings only normalise to is shown alone."""
    changed = [r for r in raws if normalise_label(r) != label]
    return f"{', '.join(changed)} -> {label}" if changed else label


@click.command("stats")
@click.option(
    "--drop-embeddings",
    "drop",
    multiple=True,
    metavar="KEY",
    help="Forget the cached vectors of this cache key first (repeatable), e.g. a stale one.",
)
@click.option(
    "--no-check",
    is_flag=True,
    help="Do not read every row to verify the store's checksums (faster on a large store).",
)
@common_options
@handle_errors
def stats_cmd(db: Path, drop: tuple[str, ...], no_check: bool, as_json: bool, quiet: bool) -> None:
    """Show what the store holds and verify its checksums.

    Sources, splits, counts and cached embeddings, after reading every row so that DuckDB
    verifies the checksums (`--no-check` skips it). A .wal's writes are folded in first; a
    stale cache key is marked (`--drop-embeddings KEY` frees it).

    Example: builders stats --db labelshift.duckdb
    """
    pending = db.is_file() and wal_holds_writes(db)  # a write the disk refused to fold in
    with open_store(db, read_only=not (drop or pending)) as store:
        if pending:
            store.checkpoint()
            note(f"{db}: folded the writes {wal_path(db).name} held into the store", quiet)
        for key in drop:
            dropped = store.drop_vectors(key)
            if not dropped:
                raise click.BadParameter(f"no cached vectors under {key!r}", param_hint="KEY")
            note(f"dropped {dropped:,} cached vectors of {key}", quiet)
        stats = store.stats()
        if not no_check:
            store.check()  # a damaged block is a one-line error naming its table
        stats["integrity"] = "not checked" if no_check else "ok: every row read, checksums match"
        warn_older_reads(store)
    if as_json:
        emit_json(stats)
        return
    spans = any(s["negative_spans"] for s in stats["sources"])
    keys = ["sentences", "mentions", "negatives", *(["negative_spans"] if spans else []), "types"]
    print_table(
        f"Store {stats['db']}",
        ["source", "kind", "splits", *[k.replace("_", " ") for k in keys]],
        [
            [s["source"], s["kind"], ",".join(s["splits"]), *[s[k] for k in keys]]
            for s in stats["sources"]
        ],
    )
    for model, n in stats["embeddings"].items():
        stale = " (stale: an older version's key; --drop-embeddings KEY frees it)"
        click.echo(f"embedding cache: {model}: {n:,} labels{stale if is_stale_key(model) else ''}")
    click.echo(f"integrity: {stats['integrity']}")
