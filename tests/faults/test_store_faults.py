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

import duckdb
import pytest
from click.testing import CliRunner
from helpers import LABELS_A, bio_corpus

from builders.cli.main import cli
from builders.errors import StoreError
from builders.store import Store
from builders.store.db import wal_path
from builders.store.ingest import ingest

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


def test_a_source_neither_stored_nor_a_reader_names_the_store_and_the_ingest(
    tmp_path: Path,
) -> None:
    db = tmp_path / "typo" / "x.duckdb"
    res = CliRunner().invoke(cli, ["familiarity", "--source", "mine", "--db", str(db)])
    line = one_line_error(res.output)
    assert f"source 'mine' is not in {db} (it holds no source)" in line
    assert f"builders ingest columns --path FILE --name mine --db {db}" in line
    assert list(tmp_path.iterdir()) == []


def test_a_store_made_to_ingest_the_source_is_said_to_be_new(tmp_path: Path) -> None:
    """A --db where no store is, with a source that reads without --path (the bundled
    sample): the store is made and the source ingested, and the note says the store is new."""
    db = tmp_path / "new" / "x.duckdb"
    labels = tmp_path / "labels.txt"
    labels.write_text("person\nrobot\n", encoding="utf-8")
    args = ["familiarity", "--source", "pilener-sample", "--model", MINILM, "--no-leakage"]
    res = CliRunner().invoke(cli, [*args, "--benchmarks", f"file:{labels}", "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert "pilener-sample: ingested (2,217 sentences" in res.output
    assert f"{db} is a new store (none was there)" in res.output


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


# ------------------------------------------------------------------ a write the disk cannot fold in
class _RefusedCheckpoint:
    """A store connection whose CHECKPOINT (the one after a commit) fails as DuckDB's does
    when the disk takes the .wal but not the store file's growth."""

    def __init__(self, con: object) -> None:
        self._con = con

    def execute(self, sql: str, *args: object) -> object:
        if sql == "CHECKPOINT":
            raise duckdb.FatalException(  # as DuckDB words it, stopping the database
                "FATAL Error: Failed to create checkpoint because of error: Could not write "
                'file "s.duckdb": File too large'
            )
        return self._con.execute(sql, *args)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._con, name)


def _refused_ingest(db: Path, data_dir: Path) -> StoreError:
    with Store(db) as store:
        store.con.execute("PRAGMA disable_checkpoint_on_shutdown")  # as a stopped database
        store.con = _RefusedCheckpoint(store.con)  # type: ignore[assignment]
        with pytest.raises(StoreError) as err:
            ingest(store, "crossner-ai", data_dir / "crossner" / "ai-test.txt")
    return err.value


def test_a_write_the_store_file_cannot_take_is_undone(tmp_path: Path, data_dir: Path) -> None:
    """The .wal took the write but the store file could not (a full disk, a size limit): the
    file is cut back and the .wal dropped, so the store is byte-identical and says so."""
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        ingest(store, "columns", bio_corpus(tmp_path / "a.bio", LABELS_A, 20), name="a")
    before = sha(db)
    err = _refused_ingest(db, data_dir)
    assert "nothing was written" in str(err) and "raise the file size limit" in str(err)
    assert sha(db) == before and sorted(p.name for p in tmp_path.glob("s.duckdb*")) == ["s.duckdb"]
    with Store(db, read_only=True) as store:
        assert store.source_names() == ["a"] and store.check()


def test_a_write_that_may_be_folded_in_is_kept_in_the_wal(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the store file's headers changed (DuckDB got further than its blocks), nothing
    is cut: the write stays in the .wal, and the error says to keep it and how to fold it in."""
    from builders.store.failures import FileState

    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        ingest(store, "columns", bio_corpus(tmp_path / "a.bio", LABELS_A, 20), name="a")
    monkeypatch.setattr(FileState, "restore", lambda self, path, fd: False)
    err = str(_refused_ingest(db, data_dir))
    assert "the write is kept in s.duckdb.wal" in err and f"builders stats --db {db}" in err
    assert (tmp_path / "s.duckdb.wal").stat().st_size > 0
    res = CliRunner().invoke(cli, ["stats", "--db", str(db)])
    assert res.exit_code == 0 and "crossner-ai" in res.output and "integrity: ok" in res.output
    assert f"{db}: folded the writes s.duckdb.wal held into the store" in res.output
    assert not wal_path(db).exists()


#: `builders ARGS...` under a file size limit of argv[1] bytes.
LIMITED = """
import resource, sys
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from builders.cli.main import cli
cli(sys.argv[2:], prog_name="builders")
"""


def _limited(limit: int | None, args: list[str]) -> subprocess.CompletedProcess[str]:
    import resource  # not on Windows

    limit = limit if limit is not None else resource.RLIM_INFINITY
    return subprocess.run(
        [sys.executable, "-c", LIMITED, str(limit), *args], capture_output=True, text=True
    )


@pytest.mark.slow  # twenty ingests in new processes
@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE as on Linux")
@pytest.mark.parametrize("size", ["sample", "large"])
def test_every_file_size_limit_ends_in_the_write_or_the_store_as_it_was(
    tmp_path: Path, size: str
) -> None:
    """A ladder of file size limits over an ingest into a store: below the .wal's size the
    commit fails; above it but below the store file's growth, the checkpoint fails (DuckDB
    then stops the database), and a large write (`large`: over DuckDB's 16 MiB, checkpointed
    by its commit) fails in the commit's own checkpoint; above both, it lands. Each ends in
    the ingest or in one line, the store byte-identical and no .wal left."""
    base = tmp_path / "base.duckdb"  # about 6 MiB, so that the file grows past the .wal
    with Store(base) as store:
        ingest(store, "columns", bio_corpus(tmp_path / "a.bio", LABELS_A, 200_000), name="a")
    if size == "sample":
        args, name = ["ingest", "pilener-sample", "-q"], "pilener-sample"
    else:
        big = bio_corpus(tmp_path / "big.bio", LABELS_A[::-1], 120_000)
        args, name = ["ingest", "columns", "--path", str(big), "--name", "big", "-q"], "big"
    whole = tmp_path / "whole.duckdb"
    shutil.copy(base, whole)
    assert _limited(None, [*args, "--db", str(whole)]).returncode == 0
    low, high = base.stat().st_size, 2 * whole.stat().st_size  # the .wal may be the larger
    outcomes = []
    for step in range(10):
        db = tmp_path / f"s{step}.duckdb"
        shutil.copy(base, db)
        res = _limited(low + (high - low) * step // 9, [*args, "--db", str(db)])
        if res.returncode == 0:
            with Store(db, read_only=True) as store:
                assert store.source_names() == sorted(["a", name])
            outcomes.append("ingested")
            continue
        line = one_line_error(res.stderr)
        assert "nothing was written" in line and "ulimit -f" in line, line
        assert sha(db) == sha(base) and not wal_path(db).exists(), line
        outcomes.append("store file" if f'{db.name}"' in line else "wal")
    assert outcomes[0] != "ingested" and outcomes[-1] == "ingested", outcomes
    assert "store file" in outcomes, outcomes  # the window this test is for
