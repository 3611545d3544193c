"""Faults around the output folder: hostile names, a second writer, a killed writer, a
read-only or full disk. Each ends in a one-line error or a correct result, with nothing
written outside --out and earlier folders byte-identical."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from builders.cli.main import cli
from builders.errors import BuildersError, BuildersNote, BuildersWarning
from builders.files import TMP_PREFIX
from builders.hub import outdir
from builders.hub.folder import atomic_dirs
from builders.hub.outdir import JOURNAL, LOCK, MANIFEST, OutLock
from builders.names import check_name, printable
from builders.splits import SplitConfig
from builders.splits.pipeline import folder_names

MINILM = "all-MiniLM-L6-v2"
ROOT = Path(__file__).resolve().parents[2]


def tree(folder: Path) -> dict[str, str]:
    """Every file under `folder` (hidden ones too) -> the sha256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def store_copy(sample_results: dict, tmp_path: Path) -> Path:
    db = tmp_path / "s.duckdb"
    shutil.copy(sample_results["db"], db)
    return db


def build_args(db: Path, out: Path, *extra: str) -> list[str]:
    return [
        "build-splits", "--source", "pilener-sample", "--strategy", "max", "--model", MINILM,
        "--db", str(db), "--out", str(out), "-q", *extra,
    ]  # fmt: skip


# ------------------------------------------------------------------ names
HOSTILE = ["../evil", "/abs/x", "a/b", "a\\b", "..", ".hidden", "a\x1b[2Jb", "a\nb", "", "x" * 201]
#: A file name of another encoding as Python decodes it (a lone surrogate): not UTF-8.
HOSTILE += ["caf\udce9", "a/\udcff"]


@pytest.mark.parametrize("name", [*HOSTILE, " ", " lead", "trail "])
def test_a_name_that_would_leave_its_folder_is_refused(name: str) -> None:
    with pytest.raises(BuildersError, match="cannot name a folder") as err:
        check_name(name, "source name", "pass --name NAME")
    assert "\x1b" not in str(err.value) and "\n" not in str(err.value)  # shown escaped


@pytest.mark.parametrize("name", ["pilener", "my corpus", "crossner-ai", "v1.2_x", "Ünï"])
def test_ordinary_names_pass(name: str) -> None:
    assert check_name(name, "source name") == name


def test_control_characters_are_shown_escaped() -> None:
    assert printable("a\x1b[31mb\x07c\x00d\ne\u2028") == "a\\x1b[31mb\\x07c\\x00d\\ne\\u2028"
    assert printable("person, lieu d'étude") == "person, lieu d'étude"


def test_ingest_under_a_name_leading_out_is_refused_and_leaves_no_store(
    tmp_path: Path, data_dir: Path
) -> None:
    db = tmp_path / "new" / "s.duckdb"
    for name in ("../evil", "/abs/x", "ok\x1bname"):
        res = CliRunner().invoke(
            cli,
            ["ingest", "crossner-ai", "--path", str(data_dir / "crossner/ai-test.txt"), "--name", name,
             "--db", str(db)],
        )  # fmt: skip
        assert res.exit_code == 1 and "cannot name a folder" in res.output, res.output
        assert "\x1b" not in res.output
    assert not (tmp_path / "new").exists()  # neither the store nor its folder
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_per_benchmark_folder_name_is_checked_before_any_work() -> None:
    cfg = SplitConfig("pilener-sample", "max", per_benchmark=True)
    assert folder_names(cfg, ["mit-movie"])[0] == "pilener-sample-mit-movie-low-shift"
    with pytest.raises(BuildersError, match="cannot name a folder"):
        folder_names(cfg, ["../../PB"])


def test_build_splits_refuses_a_hostile_benchmark_name_writing_nothing(
    store_copy: Path, tmp_path: Path
) -> None:
    labels = tmp_path / "labels.txt"
    labels.write_text("person\nlocation\nfilm\n", encoding="utf-8")
    out = tmp_path / "out"
    res = CliRunner().invoke(
        cli,
        build_args(store_copy, out, "--per-benchmark", "--benchmarks", f"../../PB=file:{labels}"),
    )
    assert res.exit_code == 1 and "cannot name a folder" in res.output, res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.txt", "s.duckdb"]


# ------------------------------------------------------------------ one writer
HOLD = """
import sys, time
from collections.abc import Callable
from pathlib import Path
from builders.hub.outdir import OutLock
with OutLock(Path(sys.argv[1]), "builders build-splits --source other"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_second_writer_is_refused_naming_the_first(store_copy: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        res = CliRunner().invoke(cli, build_args(store_copy, out))
        assert res.exit_code == 1, res.output
        assert f"is being written by process {holder.pid}" in res.output
        assert "builders build-splits --source other" in res.output
        assert "pass another --out" in res.output
        assert [p.name for p in out.iterdir() if not p.name.startswith(".")] == []
    finally:
        holder.kill()
        holder.wait()
    # killed with -9: the OS let go of the lock; the next run writes and leaves no owner file
    res = CliRunner().invoke(cli, build_args(store_copy, out))
    assert res.exit_code == 0, res.output
    assert len([p for p in out.iterdir() if p.name.endswith("-shift")]) == 3
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [MANIFEST]


def test_nested_holds_in_one_process_take_the_folder_once(tmp_path: Path) -> None:
    with OutLock(tmp_path, "a"), OutLock(tmp_path, "b"):
        assert json.loads((tmp_path / LOCK).read_text())["command"] == "a"
    assert list(tmp_path.iterdir()) == []  # the lock file goes with the run
    with OutLock(tmp_path, "c"):  # released: a new hold works
        pass


# ------------------------------------------------------------------ killed writers
KILL_BETWEEN_SWAPS = """
import os, signal, sys
from collections.abc import Callable
from pathlib import Path
from builders.hub import folder
out = Path(sys.argv[1])
real, made = folder.swap_in, []
def swap_then_die(tmp, target):
    if made:
        os.kill(os.getpid(), signal.SIGKILL)
    made.append(target)
    return real(tmp, target)
folder.swap_in = swap_then_die
with folder.atomic_dirs([out / "a-shift", out / "b-shift", out / "c-shift"]) as tmps:
    for t in tmps:
        (t / "which").write_text("new")
"""


def test_a_kill_between_swaps_is_finished_by_the_next_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for name in ("a-shift", "b-shift", "c-shift"):
        (out / name).mkdir(parents=True)
        (out / name / "which").write_text("old")
    run = subprocess.run([sys.executable, "-c", KILL_BETWEEN_SWAPS, str(out)], cwd=ROOT)
    assert run.returncode == -signal.SIGKILL
    seen = {n: (out / n / "which").read_text() for n in ("a-shift", "b-shift", "c-shift")}
    assert seen == {"a-shift": "new", "b-shift": "old", "c-shift": "old"}  # the damage
    assert (out / JOURNAL).exists()
    with OutLock(out, "next run"):
        pass
    seen = {n: (out / n / "which").read_text() for n in ("a-shift", "b-shift", "c-shift")}
    assert seen == {"a-shift": "new", "b-shift": "new", "c-shift": "new"}
    assert sorted(p.name for p in out.iterdir()) == ["a-shift", "b-shift", "c-shift"]


def test_leftovers_of_dead_runs_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / f"{TMP_PREFIX}x-shift.abc123").mkdir(parents=True)
    (out / f"{TMP_PREFIX}card.md.zz").write_text("half")
    (out / "kept-shift").mkdir()
    with pytest.warns(BuildersNote) as notes, OutLock(out, "next run"):
        assert sorted(p.name for p in out.iterdir()) == [LOCK, "kept-shift"]  # fmt: skip
    said = sorted(str(n.message) for n in notes)
    assert said == [
        f"{out}: removed {TMP_PREFIX}card.md.zz, left by a run that was stopped",
        f"{out}: removed {TMP_PREFIX}x-shift.abc123, left by a run that was stopped",
    ]


def test_a_leftover_that_cannot_be_removed_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dead run's folder holding a read-only folder (as root, a chmod does not stop the
    removal: the failure is simulated) is named in a warning, every run, not passed over."""
    from builders.hub import outdir

    out = tmp_path / "out"
    stuck = out / f"{TMP_PREFIX}x-shift.abc123"
    (stuck / "cfg").mkdir(parents=True)

    def refuse(path: str, **handler: Callable[..., None]) -> None:
        err = PermissionError(errno.EACCES, "Permission denied", str(stuck / "cfg"))
        if "onexc" in handler:  # Python 3.12 on
            handler["onexc"](os.rmdir, str(stuck / "cfg"), err)
        else:
            handler["onerror"](os.rmdir, str(stuck / "cfg"), (PermissionError, err, None))

    monkeypatch.setattr(outdir.shutil, "rmtree", refuse)
    for _ in range(2):
        with pytest.warns(BuildersWarning, match="left behind") as warned, OutLock(out, "run"):
            pass
        [line] = [str(w.message) for w in warned if w.category is BuildersWarning]
        assert line.startswith(f"{stuck}: left behind, could not be removed (")
        assert "Permission denied" in line and "remove it by hand" in line
        assert stuck.is_dir()


def test_sigterm_removes_the_temporary_folders(tmp_path: Path) -> None:
    """A `kill` (SIGTERM) ends the command through its `finally` blocks."""
    code = textwrap.dedent(
        """
        import sys, time
        from pathlib import Path
        from builders.cli.main import _exit_on_sigterm
        from builders.hub.folder import atomic_dirs
        _exit_on_sigterm()
        with atomic_dirs([Path(sys.argv[1]) / "x-shift"]) as tmps:
            print("staged", flush=True)
            time.sleep(60)
        """
    )
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "staged"
    assert next(p.name for p in out.iterdir()).startswith(TMP_PREFIX)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert list(out.iterdir()) == []


# ------------------------------------------------------------------ read-only and full disks
def _fail_with(code: int, path_part: str):
    def fail(*args, **kwargs):
        raise OSError(code, os.strerror(code), path_part)

    return fail


def test_a_read_only_out_is_found_before_any_work(
    store_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import builders.splits.pipeline as pipeline

    def no_work(*a, **k):
        raise AssertionError("the build began before --out was checked")

    monkeypatch.setattr(pipeline, "_build", no_work)
    monkeypatch.setattr(outdir.tempfile, "mkstemp", _fail_with(errno.EROFS, "out/probe"))
    res = CliRunner().invoke(cli, build_args(store_copy, tmp_path / "out"))
    assert res.exit_code == 1
    assert res.output.startswith(f"Error: --out {tmp_path / 'out'}: cannot write there")
    assert "pass --out a folder you can write to" in res.output
    assert len(res.output.strip().splitlines()) == 1


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES, errno.EROFS, errno.EFBIG])
def test_a_failing_disk_while_writing_is_one_line_and_keeps_the_old_folders(
    store_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    out = tmp_path / "out"
    assert CliRunner().invoke(cli, build_args(store_copy, out)).exit_code == 0
    before = tree(out)
    import builders.splits.pipeline as pipeline

    # a build writes each level's rows as they come, then links them into the new folders
    monkeypatch.setattr(pipeline, "write_parquet_batches", _fail_with(code, str(out / "x.parquet")))
    res = CliRunner().invoke(cli, build_args(store_copy, out, "--seed", "7"))
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {os.strerror(code)}: {out}")
    assert "--out" in lines[0]
    assert tree(out) == before  # no leftovers, old folders byte-identical


def test_an_unexpected_os_error_is_a_traceback_not_a_disguised_message(
    store_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import builders.splits.pipeline as pipeline

    monkeypatch.setattr(pipeline, "write_parquet_batches", _fail_with(errno.EBADF, "x"))
    res = CliRunner().invoke(cli, build_args(store_copy, tmp_path / "out"))
    assert res.exit_code == 1 and isinstance(res.exception, OSError)


def test_atomic_dirs_journal_is_gone_after_a_normal_write(tmp_path: Path) -> None:
    with atomic_dirs([tmp_path / "a", tmp_path / "b"]) as tmps:
        for t in tmps:
            (t / "f").write_text("x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
