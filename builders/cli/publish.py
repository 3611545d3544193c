"""`publish` and `regenerate`: push repo folders to the Hub, rebuild the published scenarios."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from builders.cli.errors import handle_errors
from builders.cli.options import common_options, option, org_option, output_options, tag_option
from builders.cli.output import emit_json, human_size, note, print_table
from builders.cli.session import open_store
from builders.hub.publish import plan_publishes, publish
from builders.scenarios.book import load_scenarios
from builders.scenarios.regenerate import regenerate

#: How wide regenerate's table is when not printed to a terminal (its changes column wraps).
TABLE_WIDTH = 100


def _log_to_stderr(quiet: bool) -> None:
    """Progress of the push on stderr (never the token: nothing logs it)."""
    logger = logging.getLogger("builders.hub.publish")
    if quiet or logger.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def publish_options(f: Callable) -> Callable:
    """`--private/--public`, `--tag`, `--dry-run`: `publish`'s, and `regenerate --publish`'s."""
    f = click.option(
        "--dry-run", is_flag=True, help="Show what would be pushed (on stdout); push nothing."
    )(f)
    f = tag_option(
        "Tag each pushed commit with this version (e.g. v1.0; a name git takes for a tag)."
    )(f)
    f = click.option(
        "--private/--public",
        default=None,
        help="Make the repos private (or public), new and existing ones. "
        "Default: new repos public, existing ones as they are.",
    )(f)
    return f


@click.command("publish")
@click.argument(
    "folders", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=Path)
)
@org_option(required=True, help="Hub user or organisation: repos are ORG/FOLDER-NAME.")
@publish_options
@output_options
@handle_errors
def publish_cmd(
    folders: tuple[Path, ...],
    org: str,
    private: bool | None,
    tag: str | None,
    dry_run: bool,
    as_json: bool,
    quiet: bool,
) -> None:
    """Push dataset repo folders to the Hugging Face Hub, one commit per repo.

    Each FOLDER (written by build-splits or fewnerd-splits, checked against its build's
    manifest first) becomes the dataset repo ORG/FOLDER-NAME; the commit holds every file of
    the folder and removes remote files it no longer has. The token comes from HF_TOKEN or
    `hf auth login`; HF_ENDPOINT selects another Hub.

    Example: builders publish out/pilener-low-shift out/pilener-high-shift --org my-org --tag v1.0
    """

    plans = plan_publishes(folders, org, note=lambda text: note(f"note: {text}", quiet), tag=tag)
    if dry_run and as_json:
        repos = [p.to_dict() for p in plans]
        emit_json({"dry_run": True, "tag": tag, "private": private, "repos": repos})
        return
    if dry_run:
        visibility = {True: " (private)", False: " (public)", None: ""}[private]
        for plan in plans:
            click.echo(
                f"would push {plan.repo_id}: {len(plan.files)} files, "
                f"{human_size(plan.total_bytes)}" + (f", tag {tag}" if tag else "") + visibility
            )
            for f in plan.to_dict()["files"]:
                click.echo(f"  {f['path']}  {human_size(f['size'])}")
        return
    _log_to_stderr(quiet)
    results = publish(plans, private=private, tag=tag)
    if as_json:
        emit_json({"dry_run": False, "tag": tag, "repos": [r.to_dict() for r in results]})
        return
    for r in results:
        click.echo(
            f"{r.repo_id}: {r.files} files in commit {r.commit_oid}"
            + (f", {len(r.deleted)} removed" if r.deleted else "")
            + (f", tag {r.tag}" if r.tag else "")
            + (f"\n  {r.commit_url}" if r.commit_url else "")
        )


@click.command("regenerate")
@option(
    "--scenarios",
    "scenarios_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("scenarios.toml"),
    help="The scenarios file.",
)
@click.option("--only", multiple=True, help="Only this scenario (repeatable).")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the repo folders go (default: the file's [defaults] out, else `out`).",
)
@click.option("--force", is_flag=True, help="Rebuild even what has not changed.")
@click.option(
    "--allow-shrink",
    "allow_shrink",
    multiple=True,
    metavar="SOURCE",
    help="Accept that this stored source's input shrinks this time: a split gone, or more "
    "than half of its sentences (refused otherwise; repeatable).",
)
@org_option("--publish", "publish_org", help="Then push what was (re)built to ORG (see publish).")
@publish_options
@common_options
@handle_errors
def regenerate_cmd(
    scenarios_path: Path,
    only: tuple[str, ...],
    out: Path | None,
    force: bool,
    allow_shrink: tuple[str, ...],
    publish_org: str | None,
    private: bool | None,
    tag: str | None,
    dry_run: bool,
    db: Path,
    as_json: bool,
    quiet: bool,
) -> None:
    """Rebuild the published scenarios listed in scenarios.toml; reuse what has not changed.

    A scenario whose input and parameters match its last build is reused; otherwise it is
    rebuilt (with every scenario reading the same source), and the change is reported and
    added to its changelog (docs/GUIDE.md). --publish ORG pushes what this run rebuilt.

    Example: builders regenerate --publish my-org --tag v1.1 --dry-run
    """

    if (tag or dry_run or private is not None) and not publish_org:
        raise click.UsageError("--tag, --dry-run, --private and --public go with --publish ORG")
    book = load_scenarios(scenarios_path)
    if publish_org and not dry_run:
        _log_to_stderr(quiet)
    with open_store(db, create=True, shared=True) as store:
        reports = regenerate(
            store,
            book.scenarios,
            out or book.out,
            only=list(only) or None,
            publish_org=publish_org,
            force=force,
            tag=tag,
            progress=not quiet,
            on_stage=lambda s: note(s, quiet),
            publish_kwargs={"private": private, "dry_run": dry_run},
            allow_shrink=allow_shrink,
        )
    if as_json:
        emit_json([r.to_dict() for r in reports])
        return
    rows: list[list[Any]] = []
    for r in reports:  # a row per line of the change: a cell holds no line break
        lines = r.lines() or [""]
        rows.append([r.name, r.status, ", ".join(r.folders), lines[0]])
        rows += [["", "", "", line] for line in lines[1:]]
    columns = ["scenario", "status", "folders", "changes"]  # wrapped below even when piped
    print_table("Scenarios", columns, rows, wrap=TABLE_WIDTH, text_columns=4)
    pushed = list({p["repo_id"]: p for r in reports for p in r.published}.values())
    if publish_org and not pushed:
        click.echo(f"nothing to publish: {publish_org} has every build as it is here")
    for p in pushed:
        verb = "would push" if p.get("dry_run") else "pushed"
        click.echo(
            f"{verb} {p['repo_id']}: {p['files']} files"
            + (f", tag {p['tag']}" if p.get("tag") else "")
            + (f", commit {p['commit_oid']}" if p.get("commit_oid") else "")
        )
        for line in str(p.get("message", "")).splitlines():
            click.echo(f"  | {line}" if line else "  |")
        if p.get("dry_run"):
            for f in p.get("paths") or []:
                click.echo(f"  {f}")
