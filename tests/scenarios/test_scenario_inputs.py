"""A scenario's inputs as regenerate reads them: a replace that would shrink a source is
refused, a benchmark's `$LABELSHIFT_DATA` copy is followed, a Hub dataset's revision is
recorded, and a stored source no scenario names is never touched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import LABELS_A, LABELS_B, bio_corpus, snapshot

from builders.cli.main import cli
from builders.errors import BuildersError
from builders.scenarios.book import load_scenarios
from builders.scenarios.regenerate import regenerate
from builders.store import Store

SHARDS = """
[defaults]
out = "out"
model = "all-MiniLM-L6-v2"
benchmarks = "crossner-ai"
min_labels = 1
min_mentions = 1
leakage = false

[[scenario]]
name = "shards-entropy"
source = "columns"
store_as = "shards"
path = "shards"
strategy = "entropy"
levels = ["low", "high"]
"""


def _tree(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def test_a_replace_that_shrinks_the_source_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    """A split gone whole, or a source that loses more than half of its sentences, is refused
    (before reading when the counts are known, else inside the transaction, undone), naming
    regenerate's `--allow-shrink`; one shard of several removed is a change like any other;
    `allow_shrink` accepts the shrink and the changelog records it."""
    shards = tmp_path / "shards"
    shards.mkdir()
    for n in (1, 2, 3, 4):
        bio_corpus(shards / f"train-{n}.txt", LABELS_A, 40)
    bio_corpus(shards / "test.txt", LABELS_B, 10)
    (tmp_path / "scenarios.toml").write_text(SHARDS, encoding="utf-8")
    book = load_scenarios(tmp_path / "scenarios.toml")
    with Store(tmp_path / "s.duckdb") as store:
        assert regenerate(store, book.scenarios, book.out)[0].status == "built"
        (shards / "train-4.txt").unlink()  # one shard of four: 170 -> 130 sentences
        [fewer] = regenerate(store, book.scenarios, book.out)
        assert fewer.status == "rebuilt"
        assert fewer.inputs["shards"]["train"]["files_removed"] == ["train-4.txt"]
        before, files = snapshot(store), _tree(book.out)

        def refused(*text: str) -> str:
            with pytest.raises(BuildersError) as err:
                regenerate(store, book.scenarios, book.out)
            msg = str(err.value)
            assert all(t in msg for t in text), msg
            assert "--allow-shrink shards" in msg and "nothing was written" in msg
            assert snapshot(store) == before and _tree(book.out) == files
            return msg

        held = shards.with_name("held")
        held.mkdir()
        shutil.move(shards / "test.txt", held / "test.txt")  # a split gone whole
        refused("shards/test: no longer in the input", "10 sentences from test.txt (10)")
        shutil.move(held / "test.txt", shards / "test.txt")
        for n in (2, 3):  # two shards of three gone: known before reading
            shutil.move(shards / f"train-{n}.txt", held / f"train-{n}.txt")
        refused("shards: its input holds 50 sentences, the store 130 (train 120 -> 40, test 10")
        for n in (2, 3):
            shutil.move(held / f"train-{n}.txt", shards / f"train-{n}.txt")
        for n in (1, 2, 3):  # the same files, cut short: known once read, then undone
            bio_corpus(shards / f"train-{n}.txt", LABELS_A, 5)
        refused("shards: its input holds 25 sentences, the store 130")
        with pytest.raises(BuildersError, match=r"--allow-shrink shard: this run reads no"):
            regenerate(store, book.scenarios, book.out, allow_shrink=["shard"])
        [shrunk] = regenerate(store, book.scenarios, book.out, allow_shrink=["shards"])
        assert shrunk.status == "rebuilt"
        assert shrunk.inputs["shards"]["train"]["sentences"] == [120, 15]
        assert store.stored_splits("shards")["train"].sentences == 15
    log = json.loads((book.out / "shards-low-shift" / "changelog.json").read_text("utf-8"))
    changed = log[0]["input"]["shards"]["train"]["files_changed"]
    assert changed == ["train-1.txt", "train-2.txt", "train-3.txt"]


def test_the_shrink_refusal_shows_in_a_dry_run(tmp_path: Path) -> None:
    """`regenerate --publish ORG --dry-run` stops on the same refusal, before any write; the
    option it names is regenerate's own, and with it the run goes through."""
    shards = tmp_path / "shards"
    shards.mkdir()
    bio_corpus(shards / "train.txt", LABELS_A, 40)
    bio_corpus(shards / "test.txt", LABELS_B, 20)
    book = tmp_path / "scenarios.toml"
    book.write_text(SHARDS, encoding="utf-8")
    db = tmp_path / "s.duckdb"
    args = ["regenerate", "--scenarios", str(book), "--db", str(db), "-q"]
    assert CliRunner().invoke(cli, args).exit_code == 0
    (shards / "test.txt").unlink()
    with Store(db) as store:
        before = snapshot(store)
    dry = CliRunner().invoke(cli, [*args, "--publish", "org", "--dry-run"])
    assert dry.exit_code == 1
    assert "shards/test: no longer in the input" in dry.output
    assert "`--allow-shrink shards`" in dry.output and "would push" not in dry.output
    with Store(db) as store:
        assert snapshot(store) == before
    ok = CliRunner().invoke(cli, [*args, "--allow-shrink", "shards"])
    assert ok.exit_code == 0, ok.output
    with Store(db) as store:
        assert sorted(store.stored_splits("shards")) == ["train"]


TWO = (
    SHARDS.replace('name = "shards-entropy"', 'name = "first-entropy"')
    .replace('store_as = "shards"', 'store_as = "first"')
    .replace('path = "shards"', 'path = "first"')
    + SHARDS.split("\n\n", 1)[1]
)


def test_one_source_shrinking_writes_no_sources_input(tmp_path: Path) -> None:
    """Every source's replace is decided and checked before any is written, and they are
    written in one transaction: when the second source's input shrinks past the guard,
    the first source's change is not written either (refused before reading: a split
    gone; once read: files cut short, the first's write undone), and the refusal names
    the source and `--allow-shrink`; with it, both are written."""
    for name in ("first", "shards"):
        (tmp_path / name).mkdir()
        bio_corpus(tmp_path / name / "train-1.txt", LABELS_A, 40)
        bio_corpus(tmp_path / name / "train-2.txt", LABELS_A, 40)
        bio_corpus(tmp_path / name / "test.txt", LABELS_B, 10)
    (tmp_path / "scenarios.toml").write_text(TWO, encoding="utf-8")
    book = load_scenarios(tmp_path / "scenarios.toml")
    assert [s.stored for s in book.scenarios] == ["first", "shards"]
    with Store(tmp_path / "s.duckdb") as store:
        assert {r.status for r in regenerate(store, book.scenarios, book.out)} == {"built"}
        bio_corpus(tmp_path / "first" / "train-3.txt", LABELS_A, 40)  # the first: a change
        before, files = snapshot(store), _tree(book.out)

        def refused(*text: str) -> None:
            with pytest.raises(BuildersError) as err:
                regenerate(store, book.scenarios, book.out)
            msg = str(err.value)
            assert all(t in msg for t in text) and "`--allow-shrink shards`" in msg, msg
            assert "first" not in msg.replace("first-", ""), msg
            assert snapshot(store) == before and _tree(book.out) == files

        gone = tmp_path / "test.txt"
        shutil.move(tmp_path / "shards" / "test.txt", gone)  # known before reading
        refused("shards/test: no longer in the input")
        shutil.move(gone, tmp_path / "shards" / "test.txt")
        for n in (1, 2):  # known once read: the first source's write is undone
            bio_corpus(tmp_path / "shards" / f"train-{n}.txt", LABELS_A, 5)
        refused("shards: its input holds 20 sentences, the store 90")
        reps = regenerate(store, book.scenarios, book.out, allow_shrink=["shards"])
        assert [r.status for r in reps] == ["rebuilt", "rebuilt"]
        assert store.stored_splits("first")["train"].sentences == 120
        assert store.stored_splits("shards")["train"].sentences == 10


BENCHMARKS = """
[defaults]
out = "out"
model = "all-MiniLM-L6-v2"
min_labels = 1
min_mentions = 1

[[scenario]]
name = "leak"
source = "columns"
path = "a.txt"
store_as = "corpus-a"
strategy = "entropy"
levels = ["low", "high"]
benchmarks = "crossner-ai"  # leakage measured: its test sentences are read

[[scenario]]
name = "no-leak"
source = "columns"
path = "b.txt"
store_as = "corpus-b"
strategy = "entropy"
levels = ["low", "high"]
benchmarks = "crossner-ai"
leakage = false  # its label list only: the sentences are not read

[[scenario]]
name = "movie"
source = "columns"
path = "b.txt"
store_as = "corpus-b"
strategy = "max"
levels = ["low", "high"]
benchmarks = "mit-movie:test"  # the stored source: its labels
leakage = false
"""


def _cut_last_sentence(path: Path) -> int:
    blocks = path.read_text(encoding="utf-8").strip("\n").split("\n\n")
    path.write_text("\n\n".join(blocks[:-1]) + "\n", encoding="utf-8")
    return len(blocks) - 1


def test_a_benchmarks_local_copy_is_read_again_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A benchmark no scenario owns is read from $LABELSHIFT_DATA by regenerate, and read
    again when its files change: exactly the scenarios that read it rebuild, their changelog
    says what changed; a stored source no scenario names nor evaluates against is untouched;
    a benchmark's file gone whole is refused like a scenario's input."""
    from helpers import DATA

    from builders.store.ingest import ingest

    data = tmp_path / "data"
    (data / "crossner" / "ai").mkdir(parents=True)
    shutil.copy(DATA / "crossner" / "ai-test.txt", data / "crossner" / "ai" / "test.txt")
    shutil.copytree(DATA / "mit-movie", data / "mit-movie")
    monkeypatch.setenv("LABELSHIFT_DATA", str(data))
    bio_corpus(tmp_path / "a.txt", LABELS_A, 60)
    bio_corpus(tmp_path / "b.txt", LABELS_B, 60)
    (tmp_path / "scenarios.toml").write_text(BENCHMARKS, encoding="utf-8")
    book = load_scenarios(tmp_path / "scenarios.toml")

    def statuses() -> dict[str, object]:
        reps = regenerate(store, book.scenarios, book.out)
        return {r.name: r for r in reps}

    with Store(tmp_path / "s.duckdb") as store:
        ingest(store, "columns", tmp_path / "a.txt", name="nobodys")  # no scenario names it
        ingest(store, "mit-restaurant", DATA / "mit-restaurant" / "restauranttest.bio")
        untouched = {n: store.stored_splits(n) for n in ("nobodys", "mit-restaurant")}
        first = statuses()
        assert {r.status for r in first.values()} == {"built"}
        assert sorted(store.source_names()) == [
            "corpus-a", "corpus-b", "crossner-ai", "mit-movie", "mit-restaurant", "nobodys"
        ]  # fmt: skip
        assert {r.status for r in statuses().values()} == {"reused"}

        n = _cut_last_sentence(data / "crossner" / "ai" / "test.txt")
        cut = statuses()
        assert {k: r.status for k, r in cut.items()} == {
            "leak": "rebuilt", "no-leak": "reused", "movie": "reused"
        }  # fmt: skip
        assert cut["leak"].reason == "benchmark sentences changed"
        change = cut["leak"].inputs["crossner-ai"]["test"]
        assert change["files_changed"] == ["test.txt"] and change["sentences"] == [n + 1, n]

        n = _cut_last_sentence(data / "mit-movie" / "engtest.bio")
        movie = statuses()
        assert {k: r.status for k, r in movie.items()} == {
            "leak": "reused", "no-leak": "reused", "movie": "rebuilt"
        }  # fmt: skip
        assert "benchmark changed (mit-movie:test)" in movie["movie"].reason
        assert movie["movie"].inputs["mit-movie"]["test"]["sentences"] == [n + 1, n]
        assert {n: store.stored_splits(n) for n in untouched} == untouched

        (data / "crossner" / "ai" / "test.txt").rename(data / "crossner" / "ai" / "dev.txt")
        with pytest.raises(BuildersError) as err:
            statuses()
        assert "crossner-ai/test: no longer in the input" in str(err.value)
        assert "--allow-shrink crossner-ai" in str(err.value)
    log = json.loads((book.out / "corpus-a-low-shift" / "changelog.json").read_text("utf-8"))
    assert log[0]["input"]["crossner-ai"]["test"]["files_changed"] == ["test.txt"]


def test_a_benchmark_stored_from_other_files_is_kept_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's copy of a benchmark read from other files than its local copy is not
    replaced by it (the user chose those files); a note says which copy is used."""
    from helpers import DATA

    from builders.scenarios.inputs import take_benchmark
    from builders.store.ingest import ingest

    data = tmp_path / "data"
    shutil.copytree(DATA / "mit-movie", data / "mit-movie")
    _cut_last_sentence(data / "mit-movie" / "engtest.bio")
    monkeypatch.setenv("LABELSHIFT_DATA", str(data))
    with Store(tmp_path / "s.duckdb") as store:
        ingest(store, "mit-movie", DATA / "mit-movie")
        before = snapshot(store)
        taken = take_benchmark(store, "mit-movie", allow_shrink=False, stage=lambda s: None)
        assert taken is not None and taken.status == "stored"
        assert "read from other files than its local copy" in taken.notes[0]
        assert snapshot(store) == before
        monkeypatch.delenv("LABELSHIFT_DATA")
        assert take_benchmark(store, "mit-movie", allow_shrink=False, stage=print) is None


def test_a_record_without_its_benchmarks_inputs_lists_no_files_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record written before a benchmark's inputs were recorded (a leakage scenario built
    by an older toolkit) lacks them: that alone rebuilds nothing, and the next rebuild says
    they are now recorded (a note), not that the benchmark's files were added; a rebuild
    that changes nothing else then adds no changelog entry. The next record holds them."""
    from helpers import DATA

    data = tmp_path / "data"
    (data / "crossner" / "ai").mkdir(parents=True)
    shutil.copy(DATA / "crossner" / "ai-test.txt", data / "crossner" / "ai" / "test.txt")
    monkeypatch.setenv("LABELSHIFT_DATA", str(data))
    bio_corpus(tmp_path / "a.txt", LABELS_A, 60)
    (tmp_path / "scenarios.toml").write_text(BENCHMARKS, encoding="utf-8")
    book = load_scenarios(tmp_path / "scenarios.toml")
    records = [
        book.out / f"corpus-a-{lv}-shift" / "entropy" / "build.json" for lv in ("low", "high")
    ]
    with Store(tmp_path / "s.duckdb") as store:
        [built] = regenerate(store, book.scenarios, book.out, only=["leak"])
        assert built.status == "built"
        for path in records:  # as an older toolkit wrote it
            rec = json.loads(path.read_text("utf-8"))
            assert "crossner-ai" in rec["scenario"]["inputs"]
            del rec["scenario"]["inputs"]["crossner-ai"]
            path.write_text(json.dumps(rec), encoding="utf-8")
        files = _tree(book.out)
        [again] = regenerate(store, book.scenarios, book.out, only=["leak"])
        assert again.status == "reused" and _tree(book.out) == files
        [forced] = regenerate(store, book.scenarios, book.out, only=["leak"], force=True)
        assert forced.status == "rebuilt" and forced.inputs == {}
        assert "crossner-ai: benchmark inputs recorded (not in the earlier record)" in forced.notes
        assert not any("+test.txt" in line for line in forced.lines())
        log = book.out / "corpus-a-low-shift" / "changelog.json"
        assert log.read_bytes() == files["corpus-a-low-shift/changelog.json"]
        rec = json.loads(records[0].read_text("utf-8"))
        assert "crossner-ai" in rec["scenario"]["inputs"]


def test_a_decontaminate_scenario_that_cannot_scan_its_benchmark_is_refused(
    tmp_path: Path,
) -> None:
    """A scenario's `decontaminate` whose benchmark has no sentences here (not stored, no
    $LABELSHIFT_DATA copy) is refused in the scenario's words, nothing written, rather than
    built as 'decontaminated' with nothing dropped."""
    shards = tmp_path / "shards"
    shards.mkdir()
    bio_corpus(shards / "train.txt", LABELS_A, 40)
    book = tmp_path / "scenarios.toml"
    book.write_text(SHARDS.replace("leakage = false", "decontaminate = true"), encoding="utf-8")
    args = ["regenerate", "--scenarios", str(book), "--db", str(tmp_path / "s.duckdb"), "-q"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1, res.output
    said = " ".join(res.output.split())
    assert "scenario 'shards-entropy': `decontaminate` cannot scan 1 of the build's 1" in said
    assert "crossner-ai (not in the store, no local copy)" in said
    assert "LABELSHIFT_DATA" in said and "`benchmarks` naming benchmarks whose" in said
    assert not any((tmp_path / "out").glob("*-shift"))
