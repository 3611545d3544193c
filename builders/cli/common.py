"""Shared pieces of the command line: options, output, progress and error handling."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from builders.errors import BuildersError
from builders.store import DB_ENV, DEFAULT_DB, Store


def common_options(f: Callable) -> Callable:
    """`--db`, `--json` and `--quiet`, shared by every command (sqlite-utils style)."""
    f = click.option("--quiet", "-q", is_flag=True, help="No progress bars or notes on stderr.")(f)
    f = click.option(
        "--json", "as_json", is_flag=True, help="Print a machine-readable summary on stdout."
    )(f)
    f = click.option(
        "--db",
        type=click.Path(dir_okay=False, path_type=Path),
        default=DEFAULT_DB,
        envvar=DB_ENV,
        show_default=True,
        help=f"The DuckDB span store (env {DB_ENV}).",
    )(f)
    return f


def embedding_options(f: Callable) -> Callable:
    """--backend and --precision: the runtime that embeds labels (cached apart per choice)."""
    from builders.defaults import BACKENDS, DEFAULT_BACKEND, DEFAULT_PRECISION, PRECISIONS

    f = click.option(
        "--precision",
        type=click.Choice(PRECISIONS),
        default=DEFAULT_PRECISION,
        show_default=True,
        help="Embedding precision: fp16 / bf16 for a GPU (torch), bf16 with openvino.",
    )(f)
    return click.option(
        "--backend",
        type=click.Choice(BACKENDS),
        default=DEFAULT_BACKEND,
        show_default=True,
        help="Embedding runtime: torch (any device), onnx or openvino (CPU; "
        "pip install 'labelshift-builders[onnx]' / '[openvino]').",
    )(f)


def handle_errors(f: Callable) -> Callable:
    """Turn the library's errors into clean `click.ClickException`s."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except BuildersError as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper


def open_store(db: Path, read_only: bool = False) -> Store:
    return Store(db, read_only=read_only)


def ensure_ingested(store: Store, source: str, path: str | None, quiet: bool) -> None:
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


def _some_benchmarks(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """`--benchmarks ''` (or only commas) names no benchmark: say so instead of failing later."""
    if not value.replace(",", "").strip():
        raise click.BadParameter("name at least one benchmark, or `all`")
    return value


def benchmarks_option(f: Callable) -> Callable:
    """`--benchmarks` and `--label-map`: the evaluation label sets
    (`builders.shift.benchmarks.resolve` reads them)."""
    from builders.labels import ZERO_SHOT, benchmarks

    f = click.option(
        "--label-map",
        type=click.Path(dir_okay=False, exists=True),
        help="Verbalisation map (raw tag -> label) for the benchmarks' tags: a JSON object or "
        "a TOML [verbalise] table; it comes before the packaged table.",
    )(f)
    return click.option(
        "--benchmarks",
        default="all",
        show_default=True,
        help="Comma-separated: `all` ("
        + ", ".join(ZERO_SHOT)
        + "), a packaged name ("
        + ", ".join(benchmarks())
        + "), a stored source (`mine`: its test split; `mine:dev`), a label file "
        "(`file:labels.txt`, one a line; `file:labels.json`, a list or label -> count), a "
        "Few-NERD part (`fewnerd-inter`, `fewnerd-intra:dev`); `NAME=...` names an entry.",
        callback=_some_benchmarks,
    )(f)


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))


def note(msg: str, quiet: bool = False) -> None:
    if not quiet:
        click.echo(msg, err=True)


@contextmanager
def progress_bar(
    desc: str, quiet: bool, total: int | None = None, unit: str = "it"
) -> Iterator[Callable[[int], None]]:
    """A tqdm bar on stderr; yields an `update(n)` callable (a no-op when quiet)."""
    if quiet:
        yield lambda n: None
        return
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)
    try:
        yield bar.update
    finally:
        bar.close()


def print_table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    """A rich table on stdout (plain text when not a terminal)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*[_fmt(v) for v in row])
    Console(soft_wrap=True, width=max(120, len(columns) * 12)).print(table)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return "" if v is None else str(v)


def parse_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    """`-o key=value` pairs; values parsed as JSON when they look like it (ints, bools)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="-o/--option")
        try:
            out[key.replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            out[key.replace("-", "_")] = value
    return out


def org_option(*decls: str, required: bool = False, help: str, metavar: str = "ORG") -> Callable:
    """An option naming a Hub user or organisation (`--org` by default), checked when the
    command line is parsed (before any model loads)."""

    def check(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        from builders.hub.readme import valid_org

        try:
            return None if value is None else valid_org(value)
        except BuildersError as exc:
            raise click.BadParameter(str(exc).removeprefix("--org "), ctx, param) from None

    return click.option(
        *(decls or ("--org",)), required=required, callback=check, metavar=metavar, help=help
    )
