"""Shared pieces of the command line: options, output, progress and error handling."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from builders.defaults import DB_ENV, DEFAULT_DB, DEFAULT_PROTOCOL, PROTOCOLS
from builders.errors import BuildersError, SourceNotStored

if TYPE_CHECKING:
    from builders.store import Store

#: Options that say where this machine keeps things or how it prints, not what is computed.
LOCAL_OPTIONS = frozenset({"db", "as_json", "quiet"})


def output_options(f: Callable) -> Callable:
    """`--json` and `--quiet`, shared by every command (sqlite-utils style)."""
    f = click.option("--quiet", "-q", is_flag=True, help="No progress bars or notes on stderr.")(f)
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print {command, version, config, result} as JSON on stdout.",
    )(f)


def common_options(f: Callable) -> Callable:
    """`--db`, `--json` and `--quiet`: what every command that opens the store takes."""
    f = output_options(f)
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
        help="Embedding runtime: auto (the fastest installed one whose vectors equal torch's, "
        "checked once per model; LABELSHIFT_BACKEND pins it), torch (any device), onnx or "
        "openvino (CPU; pip install 'labelshift-builders[onnx]' / '[openvino]').",
    )(f)


def handle_errors(f: Callable) -> Callable:
    """Turn the library's errors (`BuildersError`: the store's typed errors too, which it makes
    of DuckDB's damage, full-disk and memory errors) and the OSErrors a user's machine causes
    into one-line `click.ClickException`s. Anything else is a bug: its traceback is printed,
    with a request to report it."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except click.ClickException:  # a usage error or one already made clean
            raise
        except BuildersError as exc:
            raise click.ClickException(printable_message(str(exc))) from exc
        except OSError as exc:
            message = os_error_message(exc)
            if message is None:
                raise
            raise click.ClickException(message) from exc
        except Exception as exc:
            raise _bug(exc) from exc

    return wrapper


def _bug(exc: Exception) -> click.ClickException:
    """An exception the toolkit did not expect: its traceback on stderr, then one line asking
    for a report."""
    import traceback

    from builders import __version__

    traceback.print_exception(exc, file=sys.stderr)
    return click.ClickException(
        f"unexpected {type(exc).__name__} (a bug in builders {__version__}): please report it "
        "with the command line and the traceback above"
    )


#: What the user can do about an OSError they can cause, by errno name.
_OS_FIXES = {
    "ENOSPC": "free space there, or point --out / --db (or TMPDIR) at another disk",
    "EDQUOT": "free space within your quota, or point --out / --db at another disk",
    "EROFS": "the file system is read-only: pass --out / --db a writable place",
    "EACCES": "you may not write there: pass --out / --db a folder you can write to",
    "EPERM": "you may not write there: pass --out / --db a folder you can write to",
    "EIO": "the disk reported an error: check it, then run the command again",
    "EFBIG": "a file grew past the largest this system lets it be (`ulimit -f`, or the file "
    "system's own limit): raise the limit, or point --out / --db at another disk",
}


def os_error_message(exc: OSError) -> str | None:
    """One line for an OSError the user's machine caused (disk full, read-only, permission):
    what, where and the fix; None for others (they are bugs: a traceback is shown)."""
    import errno

    name = errno.errorcode.get(exc.errno or -1)
    if name not in _OS_FIXES:
        return None
    where = exc.filename if exc.filename is not None else "a file"
    return printable_message(f"{exc.strerror or name}: {where}: {_OS_FIXES[name]}.")


def printable_message(text: str) -> str:
    """An error message for the terminal: control characters from the data escaped (lines
    of the message itself stay lines)."""
    from builders.names import printable

    return "\n".join(printable(line) for line in text.split("\n"))


def k_option(f: Callable) -> Callable:
    from builders.defaults import K

    return click.option(
        "--k",
        "-k",
        "k",
        type=click.IntRange(min=1),
        default=K,
        show_default=True,
        help="Familiarity keeps the top K similarities (repeated by their mentions).",
    )(f)


def weighting_option(f: Callable) -> Callable:
    from builders.defaults import WEIGHTING, WEIGHTINGS

    return click.option(
        "--weighting",
        type=click.Choice(WEIGHTINGS),
        default=WEIGHTING,
        show_default=True,
        help="Weights of the top K: zipf (1/k, the paper's), linear decay, or none.",
    )(f)


def model_option(f: Callable) -> Callable:
    from builders.defaults import DEFAULT_MODEL

    return click.option(
        "--model",
        default=DEFAULT_MODEL,
        show_default=True,
        help="Sentence-transformer: all-mpnet-base-v2 (the paper's), all-MiniLM-L6-v2 (fast), "
        "a local folder or a Hub name.",
    )(f)


def protocol_option(f: Callable) -> Callable:
    """--protocol ours|paper."""
    return click.option(
        "--protocol",
        type=click.Choice(PROTOCOLS),
        default=DEFAULT_PROTOCOL,
        show_default=True,
        help="`ours` (METHOD.md: our verbalised label sets, the union macro, scores against "
        "their union) or `paper` (the Familiarity authors' code: GLiNER's label lists with "
        "`else`, lower-cased training labels, scores per benchmark with pooled quantiles). "
        "Both headline figures are reported either way.",
    )(f)


def source_options(f: Callable) -> Callable:
    """--source and --path: the training corpus, ingested first when needed (`ensure_ingested`)."""
    f = click.option(
        "--path", help="Local files of the source, ingested first (no-op if unchanged)."
    )(f)
    return click.option(
        "--source", required=True, help="Training corpus in the store (ingested if needed)."
    )(f)


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
    from builders.hub.outdir import missing_folders

    made = missing_folders(db.parent)
    existed = db.exists()
    from builders.store import Store, store_errors, wal_path

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
    from builders.errors import StoreError

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
    from builders.sources import SOURCES
    from builders.store.ingest import ingest

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
    from builders.shift.benchmarks import stored_sources

    for src in stored_sources(evalsets):
        warn_older_reads(store, src)


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


def emit_json(result: Any, config: dict[str, Any] | None = None) -> None:
    """The one `--json` envelope: `{command, version, config, result}`. `config` defaults to
    the command's options as parsed (paths absolute; --db, --json and --quiet left out)."""
    from builders import __version__

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
    from rich.markup import escape
    from rich.table import Table

    title = printable_message(title) if title else None
    table = Table(title=escape(title) if title else None, show_lines=False)
    for i, col in enumerate(columns):
        table.add_column(escape(col), justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*[escape(_fmt(v)) for v in row])  # `[ai]` is text, not markup
    console = Console()
    if not console.is_terminal:  # a pipe or a file: the table's own width, not 80 columns
        wide = Console(width=100_000)
        natural = max(wide.measure(table).maximum, len(title or ""))
        console = Console(width=max(80, natural))
    console.print(table)


def _fmt(v: Any) -> str:
    """A table cell; text from the data with its control characters escaped."""
    from builders.names import printable

    if isinstance(v, float):
        return f"{v:.3f}"
    if isinstance(v, int):
        return f"{v:,}"
    return "" if v is None else printable(str(v))


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
