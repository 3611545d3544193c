"""One writer per output folder, and what a killed writer left behind (METHOD.md section 4).

    with OutLock(out, "builders build-splits ..."):   # refuses while another run writes there
        ...

A run that writes under `--out` holds `OUT/.labelshift.lock`, an OS file lock whose file names
the holder; a run that made `--out` and failed removes it again when empty. Taking the lock
first finishes what a killed run left: its swap journal is played forward (the journal's
manifest entries merged once its folders are in place), and its `.labelshift-tmp.*` entries
are removed.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from builders.errors import (
    BuildersError,
    BuildersNote,
    BuildersWarning,
    OutputFolderError,
    opt,
)
from builders.files import TMP_PREFIX, atomic_write_text

LOCK = ".labelshift.lock"
JOURNAL = ".labelshift-swap.json"
#: What each config of the folders was written by: `{"version": 1, "folders": {folder:
#: {config: {"build": id, "levels": [folder, ...], "files": {name: sha256}}}}}`.
MANIFEST = ".labelshift-manifest.json"


#: Output folders this process holds, with how many `OutLock`s hold each (they nest).
_HELD: dict[Path, int] = {}


class OutLock:
    """Hold `out` for one writing run; nested holds of one folder in one process take it once."""

    def __init__(self, out: Path, command: str, *, elsewhere: bool = True):
        self.out = Path(out)
        self.command = command
        self.elsewhere = elsewhere  # a refusal names `--out` (the command writes where it says)
        self._fd: int | None = None
        self._made: list[Path] = []
        self._key = Path(os.path.abspath(self.out))

    def __enter__(self) -> OutLock:
        if _HELD.get(self._key):
            _HELD[self._key] += 1
            return self
        made = missing_folders(self.out)
        try:
            _make_writable_folder(self.out)
            fd = _take(self.out / LOCK)
        except BuildersError:
            _remove_empty(made)
            raise
        if fd is None:
            raise OutputFolderError(_busy_message(self.out, self.elsewhere))
        try:
            _write_owner(fd, self.command)
            for line in recover(self.out):
                warnings.warn(f"{self.out}: {line}", BuildersNote, stacklevel=2)
        except BaseException:
            _give_back(self.out / LOCK, fd)
            _remove_empty(made)
            raise
        self._fd, self._made = fd, made
        _HELD[self._key] = 1
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        _HELD[self._key] -= 1
        if self._fd is None:
            return
        del _HELD[self._key]
        _give_back(self.out / LOCK, self._fd)
        if exc_type is not None:
            _remove_empty(self._made)


def missing_folders(folder: Path) -> list[Path]:
    """`folder` and its ancestors that do not exist yet, innermost first."""
    missing = []
    folder = Path(os.path.abspath(folder))
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders a failed run made (innermost first), where still empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


def _take(path: Path) -> int | None:
    """An open descriptor of the lock file `path`, locked; None when another process holds it.
    A descriptor locked after its holder removed the file is let go and the lock taken anew."""
    for _ in range(100):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise OutputFolderError(_unwritable(path.parent, exc)) from exc
        if not _lock(fd):
            os.close(fd)
            return None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)
    raise OutputFolderError(f"{path}: cannot take the lock (it keeps being replaced)")


def _lock(fd: int) -> bool:
    """Lock `fd` without waiting; False if another process holds it."""
    try:
        import fcntl
    except ImportError:  # Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _give_back(path: Path, fd: int) -> None:
    """Remove the lock file, then let go of it (closing the descriptor unlocks it)."""
    try:
        path.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _make_writable_folder(out: Path) -> None:
    """Create `out` and prove it takes a file; a BuildersError naming it otherwise."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=TMP_PREFIX, dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputFolderError(_unwritable(out, exc)) from exc


def _unwritable(out: Path, exc: OSError) -> str:
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return (
            f"{opt('out', out)}: {why}: free space there or pass {opt('out')} a folder on "
            "another disk"
        )
    return f"{opt('out', out)}: cannot write there ({why}): pass {opt('out')} a folder you can write to"


def _write_owner(fd: int, command: str) -> None:
    """Say in the lock file who holds it (what a refused second run shows)."""
    record = {"pid": os.getpid(), "command": command, "started": time.strftime("%F %T")}
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(record) + "\n").encode("utf-8"), 0)


def _busy_message(out: Path, elsewhere: bool = True) -> str:
    try:
        owner: dict[str, Any] = json.loads((out / LOCK).read_text(encoding="utf-8"))
        who = f"process {owner['pid']} ({owner['command']}, started {owner['started']})"
    except (OSError, ValueError, KeyError, TypeError):
        who = "another run"
    other = f", or pass another {opt('out')}" if elsewhere else ""
    return f"{opt('out', out) if elsewhere else out} is being written by {who}: wait for it to finish{other}"


# ---------------------------------------------------------------- crash recovery
def recover(out: Path) -> list[str]:
    """Finish a killed run's swaps in `out` and remove its temporary entries (holding the
    lock); returns what was done, one line each."""
    done = play_journal(out)
    for entry in sorted(out.glob(TMP_PREFIX + "*")):
        if _remove(entry):
            done.append(f"removed {entry.name}, left by a run that was stopped")
    return done


def write_journal(
    parent: Path, pairs: list[tuple[Path, Path]], manifest: dict[str, Any] | None = None
) -> Path:
    """Record the swaps about to be made (new folder -> target, in `parent`) with each new
    folder's inode, and the manifest entries to merge once they are all made."""
    swaps = [
        {"tmp": tmp.name, "target": target.name, "inode": tmp.stat().st_ino}
        for tmp, target in pairs
    ]
    record: Any = swaps if manifest is None else {"swaps": swaps, "manifest": manifest}
    path = parent / JOURNAL
    atomic_write_text(path, json.dumps(record))
    return path


def play_journal(out: Path) -> list[str]:
    """Complete the swaps a journal in `out` records (every new folder in it was complete),
    then merge its manifest entries of the folders now in place."""
    path = out / JOURNAL
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except ValueError:  # killed while writing it: no swap had begun
        path.unlink()
        return []
    old_form = isinstance(record, list)  # a journal of a version before the manifest
    swaps = record if old_form else record["swaps"]
    done, in_place = [], set()
    for e in swaps:
        tmp, target = out / e["tmp"], out / e["target"]
        if _inode(target) != e["inode"] and _inode(tmp) == e["inode"]:
            old = swap_in(tmp, target)
            _remove(old or tmp)
            done.append(f"finished writing {target.name} (an earlier run was stopped)")
        if _inode(target) == e["inode"]:
            in_place.add(target.name)
    if not old_form:
        entries = record["manifest"]
        merge_manifest(out, {f: configs for f, configs in entries.items() if f in in_place})
    path.unlink()
    return done


def read_manifest(out: Path) -> dict[str, Any] | None:
    """`out`'s manifest; None when it has none, an error when it is not one."""
    path = out / MANIFEST
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise OutputFolderError(_bad_manifest(path, str(exc))) from None
    if not isinstance(record, dict) or not isinstance(record.get("folders"), dict):
        raise OutputFolderError(_bad_manifest(path, "no `folders`"))
    return record


def _bad_manifest(path: Path, why: str) -> str:
    return (
        f"{path}: not a build manifest ({why}): run the builds into {path.parent} again, "
        "or remove it to read the folders unchecked"
    )


def merge_manifest(out: Path, entries: dict[str, dict[str, Any]]) -> None:
    """Merge `entries` (folder -> config -> entry) into `out`'s manifest (holding the lock),
    dropping configs no longer in `out`."""
    try:
        current = read_manifest(out)
    except BuildersError:  # damaged: what this write knows replaces it
        current = None
    known = current["folders"] if current else {}
    folders = {f: dict(c) for f, c in known.items() if isinstance(c, dict)}
    for folder, configs in entries.items():
        folders.setdefault(folder, {}).update(configs)
    kept = {
        folder: {c: e for c, e in sorted(configs.items()) if (out / folder / c).is_dir()}
        for folder, configs in sorted(folders.items())
    }
    record = {"version": 1, "folders": {f: c for f, c in kept.items() if c}}
    atomic_write_text(out / MANIFEST, json.dumps(record, indent=2, sort_keys=True) + "\n")


def swap_in(tmp: Path, target: Path) -> Path | None:
    """Put `tmp` in `target`'s place. Returns where the old folder went when that is not
    `tmp` itself (no old folder: `tmp` no longer exists; exchanged: `tmp` holds it)."""
    if not target.exists():
        os.replace(tmp, target)
        return None
    if exchange(tmp, target):
        return None
    old = target.parent / f"{TMP_PREFIX}{target.name}.old.{os.getpid()}"
    os.replace(target, old)
    try:
        os.replace(tmp, target)
    except BaseException:
        os.replace(old, target)
        raise
    return old


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux `renameat2` with RENAME_EXCHANGE); False if the
    system cannot."""
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def _remove(path: Path) -> bool:
    """Remove a temporary entry or an old folder; False, with a warning, where it cannot."""
    errors: list[OSError] = []

    def keep(_f: object, _p: object, exc: object) -> None:  # each failure of shutil.rmtree
        err = exc[1] if isinstance(exc, tuple) else exc
        errors.append(err if isinstance(err, OSError) else OSError(str(err)))

    try:
        if not path.is_dir() or path.is_symlink():
            path.unlink(missing_ok=True)
        elif sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=keep)
        else:
            shutil.rmtree(path, onerror=keep)
    except OSError as exc:
        errors.append(exc)
    if not errors or not os.path.lexists(path):
        return True
    warnings.warn(
        f"{path}: left behind, could not be removed ({errors[0]}): a leftover of a write "
        "into this folder, not part of any level; remove it by hand",
        BuildersWarning,
        stacklevel=2,
    )
    return False
