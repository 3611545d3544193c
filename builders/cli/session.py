"""A command's time with the store: opened (waited for while another process holds it) and
closed, the label vectors a shared store held written at the end, a store the command made
removed again when it fails, the training source ingested when needed, and warnings about
splits an older reader read."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from builders.cli.output import note, printable_message
from builders.errors import SourceNotStored, StoreError
from builders.hub.outdir import missing_folders
from builders.progress import progress_bar
from builders.shift.benchmarks import stored_sources
from builders.sources import SOURCES
from builders.store import Store, store_errors, wal_path
from builders.store.ingest import ingest


@contextmanager
def open_store(
    db: Path, read_only: bool = False, create: bool = False, *, shared: bool = False
) -> Iterator[Store]:
    """The store at `db`, closed after the block. A store another process holds is waited
    for ($LABELSHIFT_LOCK_WAIT seconds), saying so on stderr.

    Args:
        create: make the store when there is none (a command that may ingest). A store this
            call created is removed again, with the folders made for it, when the block fails:
            a failed command, or a mistyped --db, leaves nothing behind.
        shared: read through a read-only connection, which other commands' readers share;
            each ingest takes the write lock for its own length, and the label vectors the
            block embedded are written when it ends (`Store.flush_vectors`). A write that
            finds the store held past the wait is a warning: the block's results stand.
    """
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
        store = Store(db, read_only=read_only, create=create, shared=shared, on_wait=_waiting)
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


def _waiting(message: str) -> None:
    """A store another process holds is waited for: said on stderr, even with --quiet."""
    click.echo(printable_message(message), err=True)


def _flush_and_close(store: Store) -> None:
    """Write the label vectors a shared store holds, then close it; a write the store's lock
    kept out is a warning (the vectors are embedded again by the next run that needs them)."""
    held = store.pending_vectors
    try:
        store.flush_vectors(close=True)
    except StoreError as exc:
        click.echo(
            printable_message(
                f"warning: {held:,} new label vectors were not cached in the store (the "
                f"results are complete; a later run embeds them again): {exc}"
            ),
            err=True,
        )
    finally:
        store.close()


def ensure_ingested(store: Store, source: str, path: str | None, quiet: bool) -> None:
    """Ingest the source when it is not in the store yet, or when --path is given (a no-op
    if that input is unchanged)."""
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
    """Say (on stderr, even with --quiet) which stored splits an older version of their reader
    read: the figures come from that reading until the source is ingested again."""
    for text in store.older_read_notes(source):
        click.echo(f"warning: {text}", err=True)


def warn_older_benchmarks(store: Store, evalsets: Iterable[Any]) -> None:
    """`warn_older_reads` for the stored sources whose sentences the benchmarks come from."""
    for src in stored_sources(evalsets):
        warn_older_reads(store, src)
