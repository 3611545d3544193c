"""Atomic writes: a file or a folder appears at its path whole, or not at all.

A file is written to a temporary file beside it (`TMP_PREFIX<name>.<random>` unless a `prefix`
is given; the umask's permissions), flushed, renamed over `path` and its folder flushed: a
crash leaves the old file or the new one. A block that fails removes the temporary entry.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: Prefix of the temporary entries written beside a target (`hub.outdir` removes those a
#: killed run left in an output folder).
TMP_PREFIX = ".labelshift-tmp."


@contextlib.contextmanager
def atomic_path(path: Path, prefix: str | None = None) -> Iterator[Path]:
    """An empty temporary file beside `path` to write; see the module docstring."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{prefix or f'{TMP_PREFIX}{path.name}.'}{uuid.uuid4().hex[:8]}"
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))  # the umask applies
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # a folder that cannot be opened cannot be flushed
        _fsync(path.parent)


@contextlib.contextmanager
def atomic_open(path: Path, binary: bool = False) -> Iterator[Any]:
    """A file (text: UTF-8, `\\n` newlines) that appears at `path` when the block succeeds."""
    with (
        atomic_path(path) as tmp,
        open(tmp, "wb") if binary else open(tmp, "w", encoding="utf-8", newline="\n") as fh,
    ):
        yield fh


def atomic_write_text(path: Path, text: str, prefix: str | None = None) -> None:
    """`text` (UTF-8, `\\n` newlines) in `path`, written through `atomic_path`."""
    with atomic_path(path, prefix) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")


@contextlib.contextmanager
def temp_dir(target: Path, prefix: str | None = None) -> Iterator[Path]:
    """A new private folder beside `target`, removed with whatever is left in it (unless it
    was renamed away) when the block ends, however it ends."""
    target.parent.mkdir(parents=True, exist_ok=True)
    work = tempfile.mkdtemp(prefix=prefix or f"{TMP_PREFIX}{target.name}.", dir=target.parent)
    try:
        yield Path(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def rename_into_place(src: Path, target: Path, done: Callable[[Path], bool]) -> None:
    """Rename the folder `src` to `target`; when that fails because another process put a
    complete one there first (`done(target)`), that one is kept."""
    try:
        os.replace(src, target)
    except OSError:
        if not done(target):
            raise


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
