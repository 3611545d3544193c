"""Atomic folder and file writes: a reader sees the old or the new content, never a mix."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders.hub import folder as hubfolder
from builders.hub.folder import atomic_dir, atomic_write_text


def _tree(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()
    }


def no_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    """A system without renameat2's RENAME_EXCHANGE: the old folder is renamed away first."""
    from builders.hub import outdir

    monkeypatch.setattr(outdir, "exchange", lambda a, b: False)
    monkeypatch.setattr(hubfolder, "exchange", lambda a, b: False)


@pytest.mark.parametrize("exchange", [True, False])
def test_atomic_dir_replaces_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool
) -> None:
    if not exchange:
        no_exchange(monkeypatch)
    target = tmp_path / "repo" / "entropy"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("one")
    with atomic_dir(target) as tmp:
        (tmp / "b.txt").write_text("two")
    assert _tree(target) == {"b.txt": "two"}
    assert sorted(p.name for p in target.parent.iterdir()) == ["entropy"]  # no temp left
    assert oct(target.stat().st_mode & 0o777) != oct(0o700)


def test_atomic_dir_failure_keeps_the_old_folder(tmp_path: Path) -> None:
    target = tmp_path / "entropy"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("one")
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("half")
        raise RuntimeError("build failed")
    assert _tree(target) == {"a.txt": "one"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entropy"]


def test_fallback_puts_the_old_folder_back_when_the_swap_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "entropy"
    with atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("one")
    no_exchange(monkeypatch)
    real_replace = hubfolder.os.replace

    def flaky(src, dst):  # type: ignore[no-untyped-def]
        if Path(dst) == target and ".old." not in str(src):
            raise OSError("disk full")
        return real_replace(src, dst)

    monkeypatch.setattr(hubfolder.os, "replace", flaky)
    with pytest.raises(OSError, match="disk full"), atomic_dir(target) as tmp:
        (tmp / "b.txt").write_text("two")
    monkeypatch.setattr(hubfolder.os, "replace", real_replace)
    assert _tree(target) == {"a.txt": "one"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entropy"]


def test_atomic_write_text_leaves_no_temp_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "README.md"
    atomic_write_text(path, "old\n")
    monkeypatch.setattr(hubfolder.os, "replace", lambda a, b: (_ for _ in ()).throw(OSError("no")))
    with pytest.raises(OSError):
        atomic_write_text(path, "new\n")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"]
