"""Faults around the store: a mistyped --db, a store another process writes, a damaged or cut
store, a full disk. Each is a one-line error; no command leaves a store it did not find, and
a failed command leaves the store's bytes as they were."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from builders.cli.main import cli
from builders.errors import StoreError
from builders.store import Store

MINILM = "all-MiniLM-L6-v2"
ROOT = Path(__file__).resolve().parents[2]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line_error(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), output
    return lines[0]


@pytest.fixture
def store_copy(sample_results: dict, tmp_path: Path) -> Path:
    db = tmp_path / "s.duckdb"
    shutil.copy(sample_results["db"], db)
    return db


@pytest.mark.parametrize(
    "args",
    [
        ["familiarity", "--source", "pilener-sample", "--model", MINILM],
        ["build-splits", "--source", "pilener-sample", "--model", MINILM, "--out", "OUT"],
        ["leakage", "--source", "mine"],
        ["stats"],
        ["labels", "pilener-sample"],
    ],
)
def test_a_mistyped_db_creates_nothing(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "typo" / "labelshfit.duckdb"
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    if args[0] in ("familiarity", "build-splits"):
        args[2] = "my-corpus"  # a source with no default origin: nothing to ingest
    res = CliRunner().invoke(cli, [*args, "--db", str(db)])
    assert res.exit_code != 0
    assert "Traceback" not in res.output
    assert list(tmp_path.iterdir()) == []  # no store, no folder for it, no --out


def test_a_missing_store_names_the_command_that_makes_one(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["stats", "--db", str(tmp_path / "x.duckdb")])
    line = one_line_error(res.output)
    assert "no store here" in line and "builders ingest" in line


HOLD = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[2])
print("held", flush=True)
time.sleep(60)
"""


def test_a_store_another_process_writes_is_named_with_that_process(
    store_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "LABELSHIFT_LOCK_WAIT", "0"
    )  # refused at once (tests/faults/test_store_locks.py waits)
    marker = f"holder-{uuid.uuid4().hex[:8]}"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, marker, str(store_copy)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for args in (["stats"], ["labels", "pilener-sample"]):
            res = CliRunner().invoke(cli, [*args, "--db", str(store_copy)])
            line = one_line_error(res.output)
            assert f"in use by process {holder.pid}" in line and marker in line
            assert "which writes to it: wait for it to finish" in line
            assert "LABELSHIFT_LOCK_WAIT=SECONDS" in line and "pass --db another store" in line
    finally:
        holder.kill()
        holder.wait()


def _damaged_in_the_middle(good: Path, work: Path) -> Path:
    """A copy of `good` with 64 bytes overwritten where the store still opens and its counts
    still read, but a data block no longer matches its checksum."""
    size = good.stat().st_size
    for offset in range(size // 4, size, 65_536):
        shutil.copy(good, work)
        with open(work, "r+b") as fh:
            fh.seek(offset)
            fh.write(b"\xff" * 64)
        try:
            with Store(work, read_only=True) as st:
                st.stats()
                try:
                    st.check()
                except StoreError:
                    return work
        except Exception:
            continue
    pytest.fail("no offset damaged a data block only")


def test_stats_finds_a_store_damaged_in_the_middle(store_copy: Path, tmp_path: Path) -> None:
    bad = _damaged_in_the_middle(store_copy, tmp_path / "bad.duckdb")
    before = sha(bad)
    res = CliRunner().invoke(cli, ["stats", "--db", str(bad)])
    assert res.exit_code == 1
    line = one_line_error(res.output)
    assert "the store is damaged (table " in line and "Restore it from a copy" in line
    assert sha(bad) == before
    quick = CliRunner().invoke(cli, ["stats", "--db", str(bad), "--no-check"])
    assert quick.exit_code == 0 and "integrity: not checked" in quick.output
    good = CliRunner().invoke(cli, ["stats", "--db", str(store_copy)])
    assert good.exit_code == 0 and "integrity: ok" in good.output


def test_a_cut_store_is_one_line(store_copy: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(store_copy.read_bytes()[: store_copy.stat().st_size // 3])
    for args in (["stats"], ["labels", "pilener-sample"]):
        res = CliRunner().invoke(cli, [*args, "--db", str(cut)])
        assert "the store is damaged" in one_line_error(res.output)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MB tmpfs (needs the right to mount: root on Linux; skipped elsewhere)."""
    where = tmp_path / "disk"
    where.mkdir()
    if sys.platform != "linux" or shutil.which("mount") is None:
        pytest.skip("a small tmpfs needs Linux' mount")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True
    )
    if made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def test_a_full_disk_during_ingest_leaves_the_store_byte_identical(
    small_disk: Path, data_dir: Path
) -> None:
    db = small_disk / "s.duckdb"
    first = ["ingest", "crossner-ai", "--path", str(data_dir / "crossner/ai-test.txt")]
    assert CliRunner().invoke(cli, [*first, "--db", str(db), "-q"]).exit_code == 0
    before = sha(db)
    res = CliRunner().invoke(cli, ["ingest", "pilener-sample", "--db", str(db), "-q"])
    line = one_line_error(res.output)
    assert "no space left on the device" in line and "nothing was written" in line
    assert sha(db) == before
    assert sorted(p.name for p in small_disk.iterdir()) == ["s.duckdb"]  # no empty WAL
    with Store(db, read_only=True) as st:
        assert [s["source"] for s in st.stats()["sources"]] == ["crossner-ai"]
