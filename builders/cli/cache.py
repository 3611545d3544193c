"""`builders cache`: the per-user embedding cache shown and cleared."""

from __future__ import annotations

import time
from typing import Any

import click

from builders.cli.errors import handle_errors
from builders.cli.options import output_options
from builders.cli.output import emit_json, human_size, note, print_table
from builders.errors import CacheError
from builders.shift.models import canonical_name
from builders.shift.scan_cache import ScanCache
from builders.shift.vector_cache import EMBEDDINGS_ENV, VectorCache


def _cache() -> Any:
    cache = VectorCache.default()
    if cache is None:
        raise CacheError(f"the embedding cache is switched off ({EMBEDDINGS_ENV}=off)")
    return cache


@click.group("cache", invoke_without_command=True)
@output_options
@click.pass_context
@handle_errors
def cache_cmd(ctx: click.Context, as_json: bool, quiet: bool) -> None:
    """Show the per-user embedding cache and the label vectors it holds.

    Where it is, its bound, and per model and runtime how many label vectors it holds; then
    the leakage-scan cache. LABELSHIFT_EMBEDDINGS / LABELSHIFT_SCANS move them (`off`: none),
    LABELSHIFT_EMBEDDINGS_MAX / LABELSHIFT_SCANS_MAX bound them (4G, 2G).

    Example: builders cache && builders cache clear --model all-MiniLM-L6-v2
    """
    if ctx.invoked_subcommand is not None:
        return
    cache = _cache()
    entries = cache.entries()
    rows = [_row(e) for e in entries]
    total = sum(e.bytes for e in entries)
    scans = _scans_summary()
    if as_json:
        doc = {"path": str(cache.root), "max_bytes": cache.max_bytes, "bytes": total, "keys": rows}
        emit_json({**doc, "scans": scans}, config={})
        return
    title = f"{cache.root}: {human_size(total)} of {human_size(cache.max_bytes)}"
    if not rows:
        note(f"{title}: empty", quiet)
    else:
        columns = ["model", "runtime", "weights", "labels", "size", "last used"]
        print_table(title, columns, [[r[c] for c in columns] for r in rows])
    if scans is not None:
        size = f"{human_size(scans['bytes'])} of {human_size(scans['max_bytes'])}"
        note(f"leakage scans: {scans['path']}: {scans['entries']} cached, {size}", quiet)


def _scans_summary() -> dict[str, Any] | None:
    """Where the leakage-scan cache is, how many scans it holds and their size (None: off)."""
    scans = ScanCache.default()
    if scans is None:
        return None
    entries = scans.entries()
    return {
        "path": str(scans.root),
        "max_bytes": scans.max_bytes,
        "entries": len(entries),
        "bytes": sum(size for _, size, _ in entries),
    }


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
@click.option("--model", help="Only this model's vectors (its name or alias).")
@output_options
@handle_errors
def cache_clear_cmd(model: str | None, as_json: bool, quiet: bool) -> None:
    """Remove the cache's vectors: all of them, or one model's (stores keep their own); without
    --model, the cached leakage scans too."""
    cache = _cache()
    cached = sorted({e.parts.get("model", e.key) for e in cache.entries()})
    keys, removed = cache.clear(canonical_name(model) if model else None)
    scans = ScanCache.default() if model is None else None
    n_scans, scan_bytes = scans.clear() if scans is not None else (0, 0)
    if as_json:
        doc = {"path": str(cache.root), "keys": keys, "bytes": removed}
        emit_json({**doc, "scans": n_scans, "scan_bytes": scan_bytes})
        return
    if model and not keys:  # a misspelt name removes nothing: say so, with what is there
        here = ", ".join(cached) if cached else "none"
        note(
            f"nothing removed: no vectors of {model!r} ({canonical_name(model)}) are cached in "
            f"{cache.root}; cached models: {here}",
            quiet,
        )
    else:
        what = f"{model}'s vectors" if model else "every vector"
        note(f"removed {what}: {keys} cache keys, {human_size(removed)} from {cache.root}", quiet)
    if scans is not None:
        note(f"removed {n_scans} leakage scans, {human_size(scan_bytes)} from {scans.root}", quiet)
