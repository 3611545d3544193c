"""What commands print: the `--json` envelope, notes on stderr, tables on stdout; the data's
control characters escaped."""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from pathlib import Path
from typing import Any

import click

from builders import __version__
from builders.names import printable

#: Options that say where this machine keeps things or how it prints, not what is computed.
LOCAL_OPTIONS = frozenset({"db", "as_json", "quiet"})


def emit_json(result: Any, config: dict[str, Any] | None = None) -> None:
    """The `--json` envelope `{command, version, config, result}`; `config` defaults to the
    command's options (paths absolute, `LOCAL_OPTIONS` left out)."""
    ctx = click.get_current_context()
    if config is None:
        config = {k: _jsonable(v) for k, v in ctx.params.items() if k not in LOCAL_OPTIONS}
    envelope = {
        "command": ctx.info_name,
        "version": __version__,
        "config": config,
        "result": result,
    }
    click.echo(json.dumps(envelope, indent=2, sort_keys=False, default=str))


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value.resolve())
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return value


def human_size(n: int) -> str:
    """Bytes in steps of 1024: `812 B`, `8.6 KB`, `1.2 GB`."""
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} GB"


def note(msg: str, quiet: bool = False) -> None:
    """A line on stderr (none with --quiet), control characters from the data escaped."""
    if not quiet:
        click.echo(printable_message(msg), err=True)


def printable_message(text: str) -> str:
    """A message with the data's control characters escaped (its own lines stay lines)."""
    return "\n".join(printable(line) for line in text.split("\n"))


def print_table(
    title: str | None,
    columns: list[str],
    rows: list[list[Any]],
    *,
    wrap: int | None = None,
    text_columns: int | Collection[int] = 1,
) -> None:
    """A rich table on stdout; a long cell wraps, never cut short. When not a terminal the
    table is as wide as its longest line, or at most `wrap` (`$COLUMNS` when set).
    `text_columns`: how many columns, from the first, hold text (left-justified), or which."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    title = printable_message(title) if title else None
    table = Table(title=escape(title) if title else None, show_lines=False)
    text = set(range(text_columns)) if isinstance(text_columns, int) else set(text_columns)
    for i, col in enumerate(columns):
        table.add_column(escape(col), justify="left" if i in text else "right", overflow="fold")
    for row in rows:
        table.add_row(*[escape(_fmt(v)) for v in row])  # `[ai]` is text, not markup
    console = Console()
    if not console.is_terminal:  # a pipe or a file: the table's own width, not 80 columns
        wide = Console(width=100_000)
        natural = max(wide.measure(table).maximum, len(title or ""))
        given = os.environ.get("COLUMNS", "")
        limit = (int(given) if given.isdigit() and int(given) else wrap) if wrap else None
        console = Console(width=min(max(80, natural), limit or natural))
    console.print(table)


def _fmt(v: Any) -> str:
    """A table cell; text from the data with its control characters escaped."""
    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return "" if v is None else printable(str(v))
