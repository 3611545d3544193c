"""Hub-ready dataset folders: typed parquet files, atomic writes, and the folder's configs.

A subset repo folder holds one config per strategy:

    pilener-low-shift/
        README.md                         card (YAML `configs` + `dataset_info` + prose)
        entropy/train-00000-of-00001.parquet
        entropy/build.json                what was built, with which parameters and results
        entropy/scores.parquet            every training label's score and whether it was kept
        max/...

Files are written into a temporary folder beside the target and moved into place, so a
reader never sees half a config; parquet bytes depend only on the rows (no timestamps).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import pyarrow as pa
import pyarrow.parquet as pq

SUBSET_FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "tokens": datasets.List(datasets.Value("string")),
        "spans": datasets.List(
            {
                "start": datasets.Value("int32"),
                "end": datasets.Value("int32"),
                "label": datasets.Value("string"),
            }
        ),
        "negatives": datasets.List(datasets.Value("string")),
    }
)

PARQUET_NAME = "{split}-00000-of-00001.parquet"


def write_parquet(table: pa.Table, path: Path, features: datasets.Features) -> None:
    """Write `table` cast to `features` (with the Hugging Face schema metadata), deterministically."""
    schema = features.arrow_schema
    table = table.select(list(schema.names)).cast(schema)
    pq.write_table(
        table,
        path,
        compression="zstd",
        row_group_size=100_000,
        write_statistics=True,
        use_dictionary=True,
    )


@contextlib.contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temp folder; on success it replaces `target` in one rename (old one removed)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _publishable(tmp)
    old = None
    if target.exists():
        old = target.parent / f".{target.name}.old.{os.getpid()}"
        os.replace(target, old)
    os.replace(tmp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
    os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _publishable(folder: Path) -> None:
    """mkdtemp/mkstemp make private (0700/0600) entries; give them the usual permissions."""
    mask = _umask()
    os.chmod(folder, 0o777 & ~mask)
    for p in folder.rglob("*"):
        os.chmod(p, (0o777 if p.is_dir() else 0o666) & ~mask)


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_default) + "\n")


def _default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def configs_of(folder: Path) -> list[str]:
    """The strategy configs present in a repo folder, `entropy` first (the default)."""
    found = [p.name for p in folder.iterdir() if p.is_dir() and (p / "build.json").exists()]
    return sorted(found, key=lambda n: (n != "entropy", n))
