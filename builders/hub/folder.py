"""Hub-ready dataset folders: typed parquet files, atomic folder swaps, and the folder's configs.

    pilener-low-shift/
        README.md                         card (YAML `configs` + `dataset_info` + prose)
        entropy/train-00000-of-00001.parquet, build.json, scores.parquet
        max/...

Parquet bytes depend only on the rows (no timestamps).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builders.defaults import config_order
from builders.deferred import pa, pq
from builders.files import atomic_write_text, temp_dir
from builders.hub.outdir import exchange, merge_manifest, swap_in, write_journal

if TYPE_CHECKING:
    import datasets
    import pyarrow.dataset as pa_ds


@cache
def subset_features() -> datasets.Features:
    """The features of a subset config's rows (on first use: `datasets` is slow to import)."""
    from datasets import Features, List, Value

    span = {"start": Value("int32"), "end": Value("int32"), "label": Value("string")}
    return Features(
        {
            "id": Value("string"),
            "tokens": List(Value("string")),
            "spans": List(span),
            "negatives": List(Value("string")),
            "negative_spans": List(span),
        }
    )


PARQUET_NAME = "{split}-00000-of-00001.parquet"
#: Rows per parquet row group (and per Arrow table `datasets` builds when it loads one).
ROW_GROUP = 100_000
#: A subset config's record, and a Few-NERD folder's.
BUILD_JSON = "build.json"
#: build.json's key for a level's measured difficulty (`builders evaluate --runs --record`).
MEASURED = "measured_difficulty"
SUMMARY_JSON = "summary.json"


def write_parquet(table: pa.Table, path: Path, features: datasets.Features) -> None:
    """Write `table` cast to `features` (with the Hugging Face schema metadata), deterministically."""
    write_parquet_batches(table.schema, table.to_batches(), path, features)


def write_parquet_batches(
    schema: pa.Schema, batches: Iterable[pa.RecordBatch], path: Path, features: datasets.Features
) -> int:
    """Write record batches as `write_parquet` writes their table, one row group at a time (no
    copy of the whole table): the bytes depend on the rows alone, not on their batches.
    Returns the rows written."""
    target = features.arrow_schema
    options = {"compression": "zstd", "write_statistics": True, "use_dictionary": True}
    rows = 0
    with pq.ParquetWriter(path, target, **options) as writer:
        for group in _row_groups(schema, batches, ROW_GROUP):
            group = group.select(list(target.names)).combine_chunks().cast(target)
            writer.write_table(group, ROW_GROUP)
            rows += group.num_rows
    return rows


def _row_groups(
    schema: pa.Schema, batches: Iterable[pa.RecordBatch], size: int
) -> Iterator[pa.Table]:
    """The rows of `batches` in tables of `size` rows (at least one table)."""
    pending: list[pa.RecordBatch] = []
    held = 0
    emitted = False
    for batch in batches:
        pending.append(batch)
        held += batch.num_rows
        while held >= size:
            table = pa.Table.from_batches(pending, schema)
            yield table.slice(0, size)
            emitted = True
            rest = table.slice(size)
            pending, held = rest.to_batches(), rest.num_rows
    if held or not emitted:
        yield pa.Table.from_batches(pending, schema)


def dataset_sizes(
    data_files: Mapping[str, Sequence[Path]], features: datasets.Features
) -> dict[str, int]:
    """`{split: num_bytes, ..., "download_size": bytes}` of these parquet files, as
    `load_dataset` records them: the Arrow sizes of the tables `datasets`' Parquet builder
    makes (one per row group, cast to `features`, chunks combined), without writing them."""
    schema = features.arrow_schema
    sizes = {
        split: sum(_arrow_bytes(p, schema) for p in files) for split, files in data_files.items()
    }
    sizes["download_size"] = sum(p.stat().st_size for files in data_files.values() for p in files)
    return sizes


def _arrow_bytes(path: Path, schema: pa.Schema) -> int:
    """The Arrow bytes `datasets` counts for one parquet file, its row groups read in parallel."""
    import pyarrow.dataset as pa_ds
    import pyarrow.fs as pa_fs

    fragment = pa_ds.ParquetFileFormat().make_fragment(str(path), pa_fs.LocalFileSystem())
    groups = fragment.split_by_row_group()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = min(len(groups), cpus or 1, 4)
    if workers <= 1:
        return sum(_group_bytes(g, schema) for g in groups)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return sum(pool.map(_group_bytes, groups, [schema] * len(groups)))


def _group_bytes(group: pa_ds.ParquetFileFragment, schema: pa.Schema) -> int:
    """One row group's Arrow bytes, read as `datasets`' Parquet builder reads it."""
    from datasets.table import table_cast

    total = 0
    batches = group.to_batches(
        batch_size=group.row_groups[0].num_rows, batch_readahead=0, fragment_readahead=0
    )
    for batch in batches:
        table = table_cast(pa.Table.from_batches([batch]), schema)
        total += table_cast(table.combine_chunks(), schema).nbytes
    return total


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """`atomic_dirs` of one target."""
    with atomic_dirs([target]) as (tmp,):
        yield tmp


@contextlib.contextmanager
def atomic_dirs(
    targets: Sequence[Path], manifest: Callable[[list[Path]], dict[str, Any]] | None = None
) -> Iterator[list[Path]]:
    """Yield one temp folder beside each target; when the block succeeds they all take their
    targets' places, or none does.

    On Linux each pair is exchanged in one `renameat2(RENAME_EXCHANGE)` (a reader never sees
    neither); elsewhere the old folder is renamed away first. A failed swap undoes those made;
    a journal (`hub.outdir`) lets the next run finish the swaps of a run killed between two.
    `manifest(temp folders)` gives the entries merged into the targets' folder's manifest
    once every swap is made (the journal carries them until then).
    """
    with contextlib.ExitStack() as stack:
        tmps = [stack.enter_context(temp_dir(target)) for target in targets]
        yield tmps
        for tmp in tmps:
            _publishable(tmp)
        _swap_all(tmps, list(targets), manifest(tmps) if manifest is not None else None)


def _swap_all(tmps: list[Path], targets: list[Path], entries: dict[str, Any] | None) -> None:
    """Every tmp into its target's place (journalled when they share a folder), or none; then
    the manifest `entries` merged."""
    parents = {t.parent for t in targets}
    if entries is not None and len(parents) != 1:
        raise ValueError("a manifest is kept per folder: the targets must share one")
    pairs = list(zip(tmps, targets, strict=True))
    several_in_one = len(pairs) > 1 and len(parents) == 1  # one swap needs no journal...
    journalled = several_in_one or entries is not None  # ...unless the manifest follows it
    parent = next(iter(parents)) if parents else None
    journal = write_journal(parent, pairs, entries) if journalled and parent else None
    done: list[tuple[Path, Path, Path | None]] = []
    try:
        for tmp, target in zip(tmps, targets, strict=True):
            done.append((tmp, target, swap_in(tmp, target)))
        if entries is not None and parent is not None:
            merge_manifest(parent, entries)
    except BaseException:
        for tmp, target, old in reversed(done):
            _swap_back(tmp, target, old)
        if journal is not None:
            journal.unlink(missing_ok=True)
        raise
    if journal is not None:
        journal.unlink()
    for tmp, _, old in done:
        shutil.rmtree(old or tmp, ignore_errors=True)  # the old folders


def _swap_back(tmp: Path, target: Path, old: Path | None) -> None:
    """Undo `swap_in`: the new folder goes back to `tmp`, the old one to `target`."""
    if old is not None:
        os.replace(target, tmp)
        os.replace(old, target)
    elif tmp.exists():
        exchange(tmp, target)
    else:
        os.replace(target, tmp)


def link_tree(src: Path, dst: Path, skip: Iterable[str] = ()) -> None:
    """Fill `dst` with `src`'s entries but the top-level `skip` and hidden ones, hard-linked
    where possible (files are never written in place: a link is as good as a copy)."""
    skipped = set(skip)
    if not src.is_dir():
        return
    for entry in sorted(src.iterdir()):
        if entry.name in skipped or entry.name.startswith("."):
            continue
        if entry.is_dir():
            shutil.copytree(entry, dst / entry.name, copy_function=link_or_copy)
        else:
            link_or_copy(str(entry), str(dst / entry.name))


def link_or_copy(src: str, dst: str) -> str:
    """`dst` as a hard link to `src`, or a copy where the file system cannot link."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


def _publishable(folder: Path) -> None:
    """mkdtemp/mkstemp make private (0700/0600) entries; give them the usual permissions."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(folder, 0o777 & ~mask)
    for p in folder.rglob("*"):
        os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


def read_json(path: Path) -> Any:
    """The parsed file, or None when it is missing or not valid JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json_text(obj))


def json_text(obj: Any) -> str:
    """`obj` as the toolkit's JSON files hold it (sorted keys, indented, a final newline)."""
    return json.dumps(obj, indent=2, sort_keys=True, default=_default) + "\n"


def _default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def configs_of(folder: Path) -> list[str]:
    """The strategy configs present in a repo folder, `entropy` first (the default)."""
    found = [p.name for p in folder.iterdir() if p.is_dir() and (p / BUILD_JSON).exists()]
    return config_order(found)
