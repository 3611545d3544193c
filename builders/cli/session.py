"""A command's time with the store: opened (waited for) and closed, a store the command made
removed when it fails, the training source ingested when needed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from builders.cli.output import note
from builders.errors import SourceNotStored, StoreError
from builders.hub.outdir import missing_folders
from builders.progress import progress_bar
from builders.sources import SOURCES
from builders.store import Store, store_errors, wal_path
from builders.store.ingest import ingest


@contextmanager
def open_store(
    db: Path, read_only: bool = False, create: bool = False, *, shared: bool = False
) -> Iterator[Store]:
    """The store at `db`, closed after the block; one another process holds is waited for.
    `create`: make it when there is none, removed again (with its new folders) if the block
    fails. `shared`: a read-only connection other readers share; the label vectors embedded
    are written at the end (`_flush_and_close`)."""
    made = missing_folders(db.parent)
    existed = db.exists()

    def forget() -> None:  # what this call made
        if not existed:
            for leftover in (db, wal_path(db)):
                leftover.unlink(missing_ok=True)
            for folder in made:  # innermost first; only if still empty
                with contextlib.suppress(OSError):
                    folder.rmdir()

    try:
        store = Store(db, read_only=read_only, create=create, shared=shared, on_wait=note)
    except BaseException:
        forget()  # a store whose making failed (its first checkpoint, out of memory)
        raise
    try:
        with store_errors(db):  # DuckDB's errors as the store's typed ones
            yield store
    except BaseException:
        store.close()
        forget()
        raise
    _flush_and_close(store)


def _flush_and_close(store: Store) -> None:
    """Write the label vectors a shared store holds, then close it; a write the lock kept out
    is a warning."""
    held = store.pending_vectors
    try:
        store.flush_vectors(close=True)
    except StoreError as exc:
        note(
            f"warning: {held:,} new label vectors were not cached in the store (the "
            f"results are complete; a later run embeds them again): {exc}"
        )
    finally:
        store.close()


def ensure_ingested(store: Store, source: str, path: str | None, quiet: bool) -> None:
    """Ingest the source when it is not stored yet, or when --path is given."""
    if path is None and store.has_source(source):
        warn_older_reads(store, source)
        return
    if path is None and source not in SOURCES:  # a stored name (mistyped, or another --db)
        raise SourceNotStored(store.missing_source(source), source)
    with progress_bar(f"ingest {source}", quiet, unit=" sent") as bar:
        res = ingest(store, source, path, progress=bar)
    new = f"; {store.path} is a new store (none was there)" if store.created else ""
    note(
        f"{source}: {res.status} ({res.sentences:,} sentences, {res.mentions:,} mentions, "
        f"{res.types:,} labels){new}",
        quiet,
    )


def warn_older_reads(store: Store, source: str | None = None) -> None:
    """Say on stderr (even with --quiet) which stored splits an older reader read."""
    for text in store.older_read_notes(source):
        click.echo(f"warning: {text}", err=True)
