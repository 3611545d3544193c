"""The store's locks between processes. DuckDB lets one process write a store, or any number
read it: `familiarity` and `build-splits` read through a read-only connection while they
embed and compute, so other commands read beside them, and write (new label vectors) in one
short transaction at the end. A command that finds the store held waits for it
($LABELSHIFT_LOCK_WAIT seconds), saying who holds it; past the wait it stops with one line
naming the holder and what to do, except a final write of label vectors, which is a warning
under the complete result."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import LABELS_A, bio_corpus

from builders.cli.main import cli
from builders.store import Store

MINILM = "all-MiniLM-L6-v2"
ROOT = Path(__file__).resolve().parents[2]

#: `builders ARGS...` whose label embedding waits for the file `gate` (touching
#: `gate.embedding` when it starts waiting): a run held in its long reading phase.
GATED = """
import sys, time
from pathlib import Path
from builders.shift.embedder import Embedder

gate = Path(sys.argv[1])
encode = Embedder.encode

def held(self, labels, *args, **kwargs):
    gate.with_name(gate.name + ".embedding").touch()
    while not gate.exists():
        time.sleep(0.05)
    return encode(self, labels, *args, **kwargs)

Embedder.encode = held
from builders.cli.main import cli
cli(sys.argv[2:], prog_name="builders")
"""

#: Holds the store open (read-only with `ro`) until killed.
HOLD = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "ro")
print("held", flush=True)
time.sleep(float(sys.argv[3]))
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A store holding `tiny` (20 labels, 60 sentences) and no label vectors."""
    db = tmp_path / "t.duckdb"
    corpus = bio_corpus(tmp_path / "tiny.bio", LABELS_A, 60)
    args = ["ingest", "columns", "--path", str(corpus), "--name", "tiny", "--db", str(db), "-q"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    return db


@contextmanager
def holding(db: Path, mode: str, seconds: float = 60) -> Iterator[subprocess.Popen]:
    """A process that holds the store open, read-only (`ro`) or read-write (`rw`)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db), mode, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(cli, list(args))
    return res.exit_code, res.output


def long_run(db: Path, tmp_path: Path, command: str) -> list[str]:
    """`familiarity` or `build-splits` of `tiny` with MiniLM, leakage off."""
    common = ["--source", "tiny", "--model", MINILM, "--no-leakage", "--db", str(db), "-q"]
    if command == "familiarity":
        labels = tmp_path / "labels.txt"
        labels.write_text("person\nrobot\n", encoding="utf-8")
        return ["familiarity", *common, "--benchmarks", f"file:{labels}"]
    return [
        "build-splits", *common, "--benchmarks", "crossner-ai", "--min-labels", "1",
        "--min-mentions", "1", "--medium-band", "0.3", "0.7", "--out", str(tmp_path / "out"),
    ]  # fmt: skip


@contextmanager
def embedding(db: Path, tmp_path: Path, command: str) -> Iterator[subprocess.Popen]:
    """`command` run in another process, held while it embeds labels: its long phase."""
    gate = tmp_path / "gate"
    proc = subprocess.Popen(
        [sys.executable, "-c", GATED, str(gate), *long_run(db, tmp_path, command)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    started = gate.with_name("gate.embedding")
    try:
        deadline = time.monotonic() + 300
        while not started.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never reached its embedding"
            time.sleep(0.1)
        yield proc
    finally:
        gate.touch()
        if proc.poll() is None:
            try:
                proc.wait(timeout=300)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.slow  # a real model exported or loaded in a new process
@pytest.mark.parametrize("command", ["familiarity", "build-splits"])
def test_other_commands_read_beside_a_long_run(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setenv("LABELSHIFT_LOCK_WAIT", "1")
    with embedding(tiny, tmp_path, command) as other:
        code, out = run("stats", "--db", str(tiny))
        assert code == 0 and "integrity: ok" in out, out
        code, out = run("labels", "tiny", "--top", "3", "--db", str(tiny))
        assert code == 0 and "tiny: labels" in out, out
        # a second familiarity computes beside it; its own label vectors wait for the store
        code, out = run("familiarity", "--source", "tiny", "--benchmarks", "crossner-ai",
                        "--model", MINILM, "--no-leakage", "--db", str(tiny))  # fmt: skip
        assert code == 0, out
        assert "union macro" in out and "new label vectors were not cached" in out
        assert f"in use by process {other.pid} (" in out and "which reads it" in out
        # a writer is told who reads the store, and what to do
        ingest = ["ingest", "crossner-ai", "--path", str(ROOT / "tests/data/crossner/ai-test.txt")]
        code, out = run(*ingest, "--db", str(tiny))
        assert code == 1
        line = out.strip().splitlines()[-1]
        assert line.startswith("Error: ") and f"in use by process {other.pid} (" in line
        assert "which reads it, and this command writes to it: wait for it to finish" in line
        assert "waited 1 s" in line and "pass --db another store" in line
        assert other.poll() is None  # still in its long phase all along
    out, err = other.communicate()
    assert other.returncode == 0, err
    assert "not cached" not in err
    with Store(tiny, read_only=True) as store:
        cached = store.stats()["embeddings"]
    assert len(cached) == 1 and next(iter(cached.values())) >= 20  # the long run's vectors


def test_a_reader_waits_for_a_short_write(
    tiny: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("LABELSHIFT_LOCK_WAIT", "60")
    with holding(tiny, "rw", seconds=2) as writer:
        code, out = run("stats", "--db", str(tiny), "--no-check")
    assert code == 0, out
    assert f"in use by process {writer.pid} (" in out and "which writes to it" in out
    assert "waiting up to 60 s" in out and "tiny" in out


def test_a_writer_beside_readers_names_them(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABELSHIFT_LOCK_WAIT", "0")
    with holding(tiny, "ro") as first, holding(tiny, "ro") as second:
        code, out = run("stats", "--db", str(tiny), "--no-check")  # readers share it
        assert code == 0, out
        code, out = run("stats", "--db", str(tiny), "--drop-embeddings", "some|key")
    line = out.strip().splitlines()[-1]
    assert code == 1 and line.startswith("Error: ")
    assert f"processes {min(first.pid, second.pid)} (" in line
    assert f"{max(first.pid, second.pid)} (" in line
    assert "which read it, and this command writes to it: wait for it to finish" in line
    assert "waited" not in line  # no wait was asked for


def test_familiarity_keeps_its_result_when_the_store_stays_locked(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LABELSHIFT_LOCK_WAIT", "0.5")
    with holding(tiny, "ro") as reader:
        code, out = run(*long_run(tiny, tmp_path, "familiarity"), "--json")
    assert code == 0, out
    assert "warning: 21 new label vectors were not cached in the store" in out
    assert f"in use by process {reader.pid}" in out
    body = out[out.index("{") : out.rindex("}") + 1]
    assert '"union_macro"' in body
    with Store(tiny, read_only=True) as store:
        assert store.stats()["embeddings"] == {}
    code, out = run(*long_run(tiny, tmp_path, "familiarity"))  # free: the vectors are cached
    assert code == 0 and "not cached" not in out, out
    with Store(tiny, read_only=True) as store:
        assert sum(store.stats()["embeddings"].values()) == 21


#: `builders ARGS...` whose first call of `module:attr` (argv[4]) waits until every run (argv[2]
#: of them, each touching `gate.<argv[3]>.ready`) has reached it: runs that all decided on the
#: same store, then act at once.
RACE = """
import importlib, sys, time
from pathlib import Path

gate, runs, me, target = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
module, _, attr = target.partition(":")
owner = importlib.import_module(module)
*path, name = attr.split(".")
for part in path:
    owner = getattr(owner, part)
original = getattr(owner, name)

def together(*args, **kwargs):
    if not gate.with_name(f"{gate.name}.{me}.ready").exists():
        gate.with_name(f"{gate.name}.{me}.ready").touch()
        deadline = time.monotonic() + 120
        while len(list(gate.parent.glob(gate.name + ".*.ready"))) < runs:
            assert time.monotonic() < deadline, "the other run never got there"
            time.sleep(0.05)
    return original(*args, **kwargs)

setattr(owner, name, together)
"""
#: What a raced process runs after its gate: `builders ARGS...`.
CLI = """
from builders.cli.main import cli
cli(sys.argv[5:], prog_name="builders")
"""
#: ... or an append through the API, on a shared store (read-only but for its writes, as
#: `build-splits` and `familiarity` open theirs): `DB PATH`.
APPEND = """
from builders.store import Store
from builders.store.ingest import ingest
with Store(sys.argv[5], shared=True) as store:
    ingest(store, "columns", sys.argv[6], name="tiny", split="train", append=True)
"""


def race(
    tmp_path: Path, target: str, commands: list[list[str]], main: str = CLI, **env: str
) -> list[str]:
    """`commands` run at once in new processes (`main` with each's arguments), each held at
    its first call of `target` until all are there; their outputs, once every one exited 0."""
    gate = [sys.executable, "-c", RACE + main, str(tmp_path / "gate"), str(len(commands))]
    out = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    full = {**os.environ, "LABELSHIFT_LOCK_WAIT": "120", **env}
    procs = [
        subprocess.Popen([*gate, str(i), target, *args], cwd=tmp_path, env=full, **out)
        for i, args in enumerate(commands)
    ]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), outputs
    assert len(list(tmp_path.glob("gate.*.ready"))) == len(commands)  # all got there
    return outputs


def test_two_runs_ingest_a_missing_benchmark_at_once(tiny: Path, tmp_path: Path) -> None:
    """Two commands that both find a benchmark missing ingest it from its local copy at the
    same moment: one reads it, the other waits for the store and finds it stored. Both
    finish, and the store holds it once."""
    data = tmp_path / "data"
    (data / "crossner" / "ai").mkdir(parents=True)
    bench = ROOT / "tests" / "data" / "crossner" / "ai-test.txt"
    (data / "crossner" / "ai" / "test.txt").write_bytes(bench.read_bytes())
    args = ["leakage", "--source", "tiny", "--benchmarks", "crossner-ai", "--db", str(tiny)]
    target = "builders.shift.benchmarks:ingest_local"
    outputs = race(
        tmp_path, target, [args, args], LABELSHIFT_DATA=str(data), LABELSHIFT_SCANS="off"
    )
    read = [o.count("crossner-ai: ingested from its local copy") for o in outputs]
    found = [o.count("crossner-ai: ingested by another run meanwhile") for o in outputs]
    assert sorted(read) == [0, 1] and sorted(found) == [0, 1] and read != found, outputs
    with Store(tiny, read_only=True) as store:
        [split] = store.stored_splits("crossner-ai").values()
        rows = store.con.execute(
            "SELECT count(*) FROM sentences WHERE source = 'crossner-ai'"
        ).fetchone()
    assert (split.sentences, split.mentions, rows) == (3, 8, (3,))


def test_two_appends_at_once_keep_both(tiny: Path, tmp_path: Path) -> None:
    """Two appends into one split of a shared store, both deciding on the store as it was:
    the second decides again under the write lock, so it appends after the first (no
    sentence numbered twice, every count kept)."""
    files = [bio_corpus(tmp_path / f"more{i}.bio", LABELS_A[i::2], 10 + i) for i in range(2)]
    target = "builders.store.db:Store.transaction"
    race(tmp_path, target, [[str(tiny), str(f)] for f in files], main=APPEND)
    with Store(tiny, read_only=True) as store:
        split = store.stored_splits("tiny")["train"]
        idx = store.con.execute(
            "SELECT count(*), count(DISTINCT idx), max(idx) FROM sentences WHERE source = 'tiny'"
        ).fetchone()
    assert (split.sentences, split.mentions, len(split.inputs)) == (81, 81, 3)
    assert idx == (81, 81, 80)
