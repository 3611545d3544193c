"""`builders cache`: the per-user embedding cache (`builders.shift.vector_cache`), shown and
cleared."""

from __future__ import annotations

import time
from typing import Any

import click

from builders.cli.common import (
    emit_json,
    handle_errors,
    human_size,
    note,
    output_options,
    print_table,
)


def _cache() -> Any:
    from builders.errors import BuildersError
    from builders.shift.vector_cache import EMBEDDINGS_ENV, VectorCache

    cache = VectorCache.default()
    if cache is None:
        raise BuildersError(f"the embedding cache is switched off ({EMBEDDINGS_ENV}=off)")
    return cache


@click.group("cache", invoke_without_command=True)
@output_options
@click.pass_context
@handle_errors
def cache_cmd(ctx: click.Context, as_json: bool, quiet: bool) -> None:
    """Show the per-user embedding cache: where it is, its bound, and per model and runtime
    how many label vectors it holds.

    Every store and `familiarity_of` read label vectors from it before embedding, and add
    what they embed. LABELSHIFT_EMBEDDINGS moves it (`off`: none); LABELSHIFT_EMBEDDINGS_MAX
    bounds it (default 4G; the least recently used models' vectors go first).

    Example: builders cache && builders cache clear --model all-MiniLM-L6-v2
    """
    if ctx.invoked_subcommand is not None:
        return
    cache = _cache()
    entries = cache.entries()
    rows = [_row(e) for e in entries]
    total = sum(e.bytes for e in entries)
    if as_json:
        emit_json(
            {"path": str(cache.root), "max_bytes": cache.max_bytes, "bytes": total, "keys": rows},
            config={},
        )
        return
    title = f"{cache.root}: {human_size(total)} of {human_size(cache.max_bytes)}"
    if not rows:
        note(f"{title}: empty", quiet)
        return
    columns = ["model", "runtime", "weights", "labels", "size", "last used"]
    print_table(title, columns, [[r[c] for c in columns] for r in rows])


def _row(entry: Any) -> dict[str, Any]:
    parts = entry.parts
    runtime = " ".join(parts.get(p, "?") for p in ("backend", "precision", "device"))
    return {
        "model": parts.get("model", entry.key),
        "runtime": f"{runtime}, {parts.get('rows', '?')} rows",
        "weights": parts.get("weights", "?"),
        "labels": entry.labels,
        "size": human_size(entry.bytes),
        "last used": time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.last_used)),
        "key": entry.key,
    }


@cache_cmd.command("clear")
@click.option("--model", default=None, help="Only this model's vectors (its name or alias).")
@output_options
@handle_errors
def cache_clear_cmd(model: str | None, as_json: bool, quiet: bool) -> None:
    """Remove the cache's vectors: all of them, or one model's. Stores keep their own."""
    from builders.shift.models import canonical_name

    cache = _cache()
    keys, removed = cache.clear(canonical_name(model) if model else None)
    if as_json:
        emit_json({"path": str(cache.root), "keys": keys, "bytes": removed})
        return
    what = f"{model}'s vectors" if model else "every vector"
    note(f"removed {what}: {keys} cache keys, {human_size(removed)} from {cache.root}", quiet)
