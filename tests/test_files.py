"""`builders.files`: a file or folder appears whole at its path, or not at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builders.files import atomic_open, atomic_path, rename_into_place, temp_dir


def test_a_written_file_has_the_umasks_permissions_and_no_temp_is_left(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        with atomic_open(tmp_path / "sub" / "a.bin", binary=True) as fh:
            fh.write(b"\x00\x01")
    finally:
        os.umask(old)
    path = tmp_path / "sub" / "a.bin"
    assert path.read_bytes() == b"\x00\x01"
    assert path.stat().st_mode & 0o777 == 0o640
    assert os.listdir(path.parent) == ["a.bin"]


def test_a_failed_block_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(path, prefix=".tmp-1-") as tmp:
        tmp.write_text("half")
        raise RuntimeError("stopped")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["a.txt"]


def test_a_folder_made_once_keeps_the_complete_one_already_there(tmp_path: Path) -> None:
    target = tmp_path / "model"
    for text in ("first", "second"):
        with temp_dir(target) as work:
            (work / "done").write_text(text)
            rename_into_place(work, target, lambda t: (t / "done").is_file())
    assert (target / "done").read_text() == "first"
    assert os.listdir(tmp_path) == ["model"]
    with pytest.raises(OSError), temp_dir(target) as work:
        (work / "x").write_text("x")
        rename_into_place(work, target, lambda t: False)
    assert os.listdir(tmp_path) == ["model"]
