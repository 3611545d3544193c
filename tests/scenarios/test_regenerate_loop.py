"""The regenerate loop a corpus owner runs: new data arrives, `regenerate` follows it.

Scenarios over a folder of GLiNER shards (the bundled Pile-NER sample in GLiNER's training
layout), a MIT Movie excerpt with a test split, and the bundled sample evaluated against that
test split. A shard is added, one removed, the benchmark changed; after each, exactly the
scenarios that read the changed input (or evaluate against it) rebuild, their rows follow the
data, their changelogs say what changed, and the others keep their bytes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import DATA, LABELS_A, bio_corpus, json_result

from builders.cli.main import cli
from builders.errors import BuildersError
from builders.scenarios.book import load_scenarios, parse_scenarios
from builders.scenarios.regenerate import regenerate
from builders.store import Store
from builders.store.ingest import ingest

BOOK = """
[defaults]
out = "out"
model = "all-MiniLM-L6-v2"
benchmarks = "crossner-ai,mit-movie"
min_labels = 1
min_mentions = 1
leakage = false

[[scenario]]
name = "med-max"
source = "gliner"
store_as = "med"
path = "med"
strategy = "max"
levels = ["low", "high"]

[[scenario]]
name = "movie-max"
source = "columns"
store_as = "movie"
path = "movie"
strategy = "max"
levels = ["low", "high"]
benchmarks = "crossner-ai"  # not mit-movie: its own labels would all score 1, tied
low_quantile = 0.5  # 6 labels: the top half, and the bottom 40%
high_quantile = 0.4

[[scenario]]
name = "sample-max"
source = "pilener-sample"
strategy = "max"
levels = ["low", "high"]
benchmarks = "crossner-ai,movie:test"

[[scenario]]
name = "sample-entropy"
source = "pilener-sample"
strategy = "entropy"
levels = ["low", "high"]
"""

SHARD = 300  # records per GLiNER shard


def gliner_shards(tmp: Path) -> list[Path]:
    """Three GLiNER training shards of the bundled sample's first 900 passages, as GLiNER's
    training json has them (`tokenized_text`, `ner` with inclusive ends, the raw types)."""
    with Store(tmp / "export.duckdb") as store:
        ingest(store, "pilener-sample")
        sentences = store.con.execute(
            "SELECT idx, tokens FROM sentences WHERE source = 'pilener-sample' ORDER BY idx "
            f"LIMIT {3 * SHARD}"
        ).fetchall()
        spans: dict[int, list[list[Any]]] = {}
        for idx, start, stop, raw in store.con.execute(
            "SELECT idx, start, stop, raw_label FROM mentions WHERE source = 'pilener-sample' "
            "ORDER BY idx, start, stop, raw_label"
        ).fetchall():
            spans.setdefault(idx, []).append([start, stop - 1, raw])
    records = [{"tokenized_text": list(t), "ner": spans.get(i, [])} for i, t in sentences]
    paths = []
    for n in range(3):
        path = tmp / f"part{n + 1}.json"
        path.write_text(json.dumps(records[n * SHARD : (n + 1) * SHARD]), encoding="utf-8")
        paths.append(path)
    return paths


def tree(out: Path, pattern: str = "**/*") -> dict[str, bytes]:
    """The repo folders' files (not `out`'s manifest, which every build updates)."""
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in out.glob(pattern)
        if p.is_file() and not p.relative_to(out).as_posix().startswith(".")
    }


def config_files(out: Path, strategy: str, source: str) -> dict[str, bytes]:
    """The files of one scenario's config folders (its part of the level folders)."""
    return tree(out, f"{source}-*-shift/{strategy}/*")


def one_shard_book(tmp_path: Path) -> tuple[Path, list[str]]:
    """A folder of one shard (`a1.txt`, 40 sentences) that a one-scenario book reads whole,
    and the `builders regenerate` arguments of that book (quiet, a store in `tmp_path`)."""
    shards = tmp_path / "shards"
    shards.mkdir()
    bio_corpus(shards / "a1.txt", LABELS_A, 40)
    book = tmp_path / "scenarios.toml"
    book.write_text(APPEND.replace('ingest = "append"\n', ""), encoding="utf-8")
    return shards, [
        "regenerate",
        "--scenarios",
        str(book),
        "--db",
        str(tmp_path / "s.duckdb"),
        "-q",
    ]


def statuses(reports: list[Any]) -> dict[str, str]:
    return {r["name"]: r["status"] for r in reports}


def run(book: Path, db: Path, *extra: str) -> list[dict[str, Any]]:
    res = CliRunner().invoke(
        cli, ["regenerate", "--scenarios", str(book), "--db", str(db), "--json", "-q", *extra]
    )
    assert res.exit_code == 0, res.output
    return json_result(res.stdout, "regenerate")


def build_json(out: Path, folder: str, strategy: str) -> dict[str, Any]:
    return json.loads((out / folder / strategy / "build.json").read_text(encoding="utf-8"))


def changelog(out: Path, folder: str) -> list[dict[str, Any]]:
    return json.loads((out / folder / "changelog.json").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_regenerate_follows_new_data(
    tmp_path: Path, hub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers import TOKEN

    part1, part2, part3 = gliner_shards(tmp_path)
    med = tmp_path / "med"
    med.mkdir()
    for p in (part1, part2):
        shutil.copy(p, med / p.name)
    movie = tmp_path / "movie"
    movie.mkdir()
    for name in ("engtrain.excerpt.bio", "engtest.bio"):
        shutil.copy(DATA / "mit-movie" / name, movie / name)
    book = tmp_path / "scenarios.toml"
    book.write_text(BOOK, encoding="utf-8")
    db, out = tmp_path / "store.duckdb", tmp_path / "out"

    first = run(book, db)
    assert set(statuses(first).values()) == {"built"}
    assert build_json(out, "med-low-shift", "max")["full"]["sentences"] == 2 * SHARD
    before = tree(out)
    again = run(book, db)
    assert set(statuses(again).values()) == {"reused"}
    assert tree(out) == before  # reused: same bytes

    # 1. a shard added: only the scenario reading `med` rebuilds, over 900 sentences
    shutil.copy(part3, med / part3.name)
    others = {k: v for k, v in tree(out).items() if not k.startswith("med-")}
    added = run(book, db)
    assert statuses(added) == {
        "med-max": "rebuilt",
        "movie-max": "reused",
        "sample-max": "reused",
        "sample-entropy": "reused",
    }
    assert {k: v for k, v in tree(out).items() if not k.startswith("med-")} == others
    full = build_json(out, "med-low-shift", "max")["full"]
    assert full["sentences"] == 3 * SHARD
    rep = {r["name"]: r for r in added}["med-max"]
    with Store(db) as store:
        [(_, n_sent, n_ment)] = [
            (s, v.sentences, v.mentions) for s, v in store.stored_splits("med").items()
        ]
    train = rep["inputs"]["med"]["train"]
    assert train["files_added"] == ["part3.json"] and not train["files_removed"]
    assert train["sentences"] == [2 * SHARD, 3 * SHARD] and train["mentions"][1] == n_ment
    assert n_sent == 3 * SHARD and train["mentions"][0] < n_ment
    log = changelog(out, "med-low-shift")
    assert log[0]["input"] == rep["inputs"]
    rows = log[0]["changes"]["max"]["rows"]
    assert rows == rep["changes"]["med-low-shift"]["rows"] and rows[0] < rows[1]
    assert rows[1] == build_json(out, "med-low-shift", "max")["subset"]["sentences"]
    fam = log[0]["changes"]["max"]["familiarity"]
    assert fam[1] == round(build_json(out, "med-low-shift", "max")["subset"]["familiarity"][
        "union_macro"], 4)  # fmt: skip
    card = (out / "med-low-shift" / "README.md").read_text(encoding="utf-8")
    assert "med/train: +part3.json" in card and f"{2 * SHARD} -> {3 * SHARD} sentences" in card

    # 2. a shard removed (ingest = "replace", the default): its sentences leave the store
    (med / "part1.json").unlink()
    removed = run(book, db)
    assert statuses(removed)["med-max"] == "rebuilt"
    assert {n for n, s in statuses(removed).items() if s != "reused"} == {"med-max"}
    train = {r["name"]: r for r in removed}["med-max"]["inputs"]["med"]["train"]
    assert train["files_removed"] == ["part1.json"] and train["sentences"] == [900, 600]
    assert build_json(out, "med-low-shift", "max")["full"]["sentences"] == 2 * SHARD
    assert changelog(out, "med-low-shift")[0]["input"]["med"]["train"]["files_removed"] == [
        "part1.json"
    ]
    assert len(changelog(out, "med-low-shift")) == 3

    # everything published (to the fake Hub): 6 repos (the sample's two hold two configs)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    published = run(book, db, "--publish", "testorg", "--tag", "v1")
    assert len({p["repo_id"] for r in published for p in r["published"]}) == 6
    heads = {rid: repo.head for rid, repo in hub.repos.items()}

    # 3. the benchmark changed (its last test sentence dropped): the scenarios reading it or
    # evaluating against it rebuild, and only their repos are published (dry run, then real)
    test = movie / "engtest.bio"
    blocks = test.read_text(encoding="utf-8").strip("\n").split("\n\n")
    test.write_text("\n\n".join(blocks[:-1]) + "\n", encoding="utf-8")
    med_files = tree(out, "med-*/**/*")
    entropy = config_files(out, "entropy", "pilener-sample")
    changed = run(book, db, "--publish", "testorg", "--dry-run")
    assert statuses(changed) == {
        "med-max": "reused",
        "movie-max": "rebuilt",
        "sample-max": "rebuilt",
        "sample-entropy": "reused",
    }
    assert tree(out, "med-*/**/*") == med_files
    assert config_files(out, "entropy", "pilener-sample") == entropy
    reps = {r["name"]: r for r in changed}
    assert "benchmark changed" in reps["sample-max"]["reason"]
    bench = reps["sample-max"]["inputs"]["movie"]["test"]
    assert bench["files_changed"] == ["engtest.bio"]
    assert bench["sentences"][1] == bench["sentences"][0] - 1 == len(blocks) - 1
    assert changelog(out, "pilener-sample-low-shift")[0]["input"] == reps["sample-max"]["inputs"]
    pushed = {p["repo_id"] for r in changed for p in r["published"]}
    assert sorted(pushed) == [
        "testorg/movie-high-shift",
        "testorg/movie-low-shift",
        "testorg/pilener-sample-high-shift",
        "testorg/pilener-sample-low-shift",
    ]
    low = next(p for p in reps["sample-max"]["published"] if p["repo_id"].endswith("low-shift"))
    assert low["dry_run"] and "max/build.json" in low["paths"]
    assert "movie/test: ~engtest.bio" in low["message"]
    assert {rid: repo.head for rid, repo in hub.repos.items()} == heads  # a dry run
    pushed_now = run(book, db, "--publish", "testorg", "--tag", "v2")
    assert set(statuses(pushed_now).values()) == {"reused"}
    assert {p["repo_id"] for r in pushed_now for p in r["published"]} == pushed
    moved = {rid for rid, repo in hub.repos.items() if repo.head != heads[rid]}
    assert moved == pushed and all(hub.repos[r].tags.get("v2") for r in moved)


def test_shared_sources_must_agree() -> None:
    doc = {
        "scenario": [
            {"name": "a", "source": "gliner", "store_as": "med", "path": "/x/med"},
            {"name": "b", "source": "gliner", "store_as": "med", "path": "/x/med",
             "ingest": "append"},
        ]
    }  # fmt: skip
    with pytest.raises(BuildersError) as err:
        parse_scenarios(doc)
    assert "scenarios 'a' and 'b' both store their input as 'med'" in str(err.value)
    assert "disagree on `ingest`" in str(err.value) and "`store_as`" in str(err.value)
    with pytest.raises(BuildersError, match=r"unknown ingest 'merge'\. Valid: replace, append"):
        parse_scenarios({"scenario": [{"name": "a", "source": "columns", "ingest": "merge"}]})


APPEND = """
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
ingest = "append"
strategy = "entropy"
levels = ["low", "high"]
"""


def test_append_keeps_what_it_read_and_refuses_a_changed_file(tmp_path: Path) -> None:
    """`ingest = "append"`: a new file is added, a file gone is kept (and said so), a changed
    one is refused naming the scenario key that reads it again."""
    shards = tmp_path / "shards"
    shards.mkdir()
    bio_corpus(shards / "a1.txt", LABELS_A, 40)
    (tmp_path / "scenarios.toml").write_text(APPEND, encoding="utf-8")
    book = load_scenarios(tmp_path / "scenarios.toml")
    with Store(tmp_path / "s.duckdb") as store:
        [first] = regenerate(store, book.scenarios, book.out)
        assert first.status == "built"
        bio_corpus(shards / "a2.txt", LABELS_A[::-1], 40)
        [grown] = regenerate(store, book.scenarios, book.out)
        assert (grown.status, grown.ingest) == ("rebuilt", "appended")
        assert grown.inputs["shards"]["train"]["files_added"] == ["a2.txt"]
        assert grown.inputs["shards"]["train"]["sentences"] == [40, 80]
        (shards / "a1.txt").unlink()
        [kept] = regenerate(store, book.scenarios, book.out)
        assert kept.status == "reused" and store.stored_splits("shards")["train"].sentences == 80
        assert any("a1.txt" in n and 'ingest = "replace"' in n for n in kept.notes)
        bio_corpus(shards / "a2.txt", LABELS_A, 30)
        with pytest.raises(BuildersError) as err:
            regenerate(store, book.scenarios, book.out)
    text = str(err.value)
    assert "changed since it was stored" in text
    assert "`ingest = \"replace\"` in scenario 'shards-entropy'" in text and "--" not in text


def test_the_table_puts_each_line_of_a_change_on_its_own_row(tmp_path: Path) -> None:
    shards, args = one_shard_book(tmp_path)
    assert CliRunner().invoke(cli, args).exit_code == 0
    bio_corpus(shards / "a2.txt", LABELS_A[::-1], 40)
    res = CliRunner().invoke(cli, args, env={"COLUMNS": "400"})  # no line wrapped
    assert res.exit_code == 0, res.output
    assert "\\n" not in res.stdout
    lines = res.stdout.splitlines()
    assert any("shards-entropy" in ln and "rebuilt" in ln for ln in lines)
    assert any("input shards/train: +a2.txt; 40 -> 80 sentences" in ln for ln in lines)
    assert any("shards-low-shift: rows" in ln for ln in lines)


def test_the_models_weights_and_runtime_are_reasons_to_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key holds each model's weights' hash and the runtime that embeds (`auto`
    resolved); a change of either is named. The build records the runtime that ran."""
    import builders.shift.auto as auto
    import builders.shift.models as models
    from builders.scenarios.regenerate import _why, scenario_key

    shards = tmp_path / "shards"
    shards.mkdir()
    bio_corpus(shards / "a1.txt", LABELS_A, 40)
    (tmp_path / "scenarios.toml").write_text(APPEND, encoding="utf-8")
    book = load_scenarios(tmp_path / "scenarios.toml")
    [sc] = book.scenarios
    assert sc.params["backend"] == "auto"
    with Store(tmp_path / "s.duckdb") as store:
        [built] = regenerate(store, book.scenarios, book.out)
        [model] = built.models
        assert model["name"] == "sentence-transformers/all-MiniLM-L6-v2"
        assert model["runtime"] == "torch"  # LABELSHIFT_BACKEND=torch in the tests
        record = build_json(book.out, "shards-low-shift", "entropy")
        assert record["scenario"]["parts"]["models"] == [model]
        assert record["provenance"]["model"]["backend"] == "torch"
        assert record["provenance"]["model"]["cache_key"].endswith("|" + model["weights"])
        with monkeypatch.context() as mp:  # a store whose model is not on this machine

            def gone(name: str) -> None:
                raise BuildersError(f"{name}: no such model here")

            mp.setattr(models, "resolve_model", gone)
            [again] = regenerate(store, book.scenarios, book.out)
        assert again.status == "reused" and again.models == [model]
        assert any("not found here; its weights taken as built" in n for n in again.notes)
        _, before = scenario_key(store, sc)
        monkeypatch.setattr(auto, "expected_backend", lambda *a: "openvino")
        _, faster = scenario_key(store, sc)
        assert _why(before, faster, False) == (
            "model sentence-transformers/all-MiniLM-L6-v2 runtime torch -> openvino"
        )
        monkeypatch.setattr(models, "weights_fingerprint", lambda folder: "0123456789ab")
        _, other = scenario_key(store, sc)
        assert _why(faster, other, False) == (
            f"model sentence-transformers/all-MiniLM-L6-v2 weights {model['weights']} "
            "-> 0123456789ab"
        )


def test_labels_moved_between_levels_are_named(tmp_path: Path) -> None:
    """A rebuild's labels that left one level for another: `moved_in` (from where) in the
    level that holds them now, `moved_out` (to where) in the level that held them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from builders.hub.cards import _changelog_view
    from builders.scenarios.rebuild import _moved

    before = {"low": ["person", "city"], "high": ["protein", "enzyme"]}
    after = {"low": ["person", "protein"], "high": ["enzyme", "river"]}
    for level, labels in before.items():
        (tmp_path / f"c-{level}-shift" / "max").mkdir(parents=True)
        table = pa.table({"label": [*labels, "x"], "selected": [True] * len(labels) + [False]})
        pq.write_table(table, tmp_path / f"c-{level}-shift" / "max" / "scores.parquet")

    class Sub:
        def __init__(self, level: str) -> None:
            self.level, self.name = level, f"c-{level}-shift"

    class Res:
        def __init__(self) -> None:
            self.subsets = [Sub("low"), Sub("high")]

        def selected(self, level: str) -> list[str]:
            return after[level]

    moved = _moved(tmp_path, "max", Res())
    assert moved == {
        "c-low-shift": {"moved_in": {"protein": "high"}, "moved_out": {}},
        "c-high-shift": {"moved_in": {}, "moved_out": {"protein": "low"}},
    }
    [view] = _changelog_view(
        [{"version": "v2", "changes": {}, "details": {"max": moved["c-low-shift"]}}]
    )
    assert view["labels"] == ['`max`: 1 label moved between levels: "protein" (from high)']


def test_a_moved_label_named_like_a_level_is_quoted() -> None:
    """A label named `medium` (or holding a comma) that moved, came or went reads as a label,
    not as a level or two labels: quoted in the report's table line and in the card's
    changelog."""
    from builders.hub.cards import _changelog_view
    from builders.scenarios.report import ScenarioReport

    moved = {"moved_in": {"medium": "medium", "low, high": "high"}, "moved_out": {}}
    rep = ScenarioReport("s", "rebuilt", folders=["c-low-shift"], reason="forced")
    rep.changes["c-low-shift"] = {"rows": [10, 10]}
    rep.moved["c-low-shift"] = moved
    assert rep.lines()[1] == 'c-low-shift: moved: "low, high" from high, "medium" from medium'
    [view] = _changelog_view([{"version": "v2", "details": {"max": moved}}])
    assert view["labels"] == [
        '`max`: 2 labels moved between levels: "low, high" (from high), "medium" (from medium)'
    ]
    rep.moved.clear()
    rep.labels_added["c-low-shift"], rep.labels_removed["c-low-shift"] = ["a, b", "c"], ["d"]
    assert rep.lines()[1] == 'c-low-shift: +"a, b", +"c"; -"d"'
    [view] = _changelog_view([{"version": "v2", "details": {"max": {"labels_added": ["a, b"]}}}])
    assert view["labels"] == ['`max`: 1 label added: "a, b"']


def test_a_dry_run_then_the_push_of_what_was_rebuilt(
    tmp_path: Path, hub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--publish ORG --dry-run` pushes nothing; the next `--publish ORG` pushes what was
    rebuilt since its last push (not only in its own run), one commit per repo whose message
    is the changelog entry; then nothing is left to push."""
    from helpers import TOKEN

    shards, args = one_shard_book(tmp_path)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert CliRunner().invoke(cli, args).exit_code == 0
    bio_corpus(shards / "a2.txt", LABELS_A[::-1], 40)
    dry = CliRunner().invoke(cli, [*args, "--json", "--publish", "org", "--tag", "v2", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    [rep] = json_result(dry.stdout)
    assert rep["status"] == "rebuilt" and hub.calls == []
    assert [p["repo_id"] for p in rep["published"]] == [
        "org/shards-low-shift",
        "org/shards-high-shift",
    ]
    real = CliRunner().invoke(cli, [*args, "--json", "--publish", "org", "--tag", "v2"])
    assert real.exit_code == 0, real.output
    [rep] = json_result(real.stdout)
    assert rep["status"] == "reused"  # rebuilt by the dry run's regenerate, not pushed then
    assert [p["repo_id"] for p in rep["published"]] == [
        "org/shards-low-shift",
        "org/shards-high-shift",
    ]
    low = hub.repos["org/shards-low-shift"]
    assert low.tags == {"v2": low.head}
    commit = low.commits[-1]
    assert commit.summary == "Publish shards-low-shift v2"
    assert "input shards/train: +a2.txt; 40 -> 80 sentences" in commit.description
    again = CliRunner().invoke(cli, [*args, "--publish", "org"])
    assert again.exit_code == 0, again.output
    assert "nothing to publish: org has every build as it is here" in again.stdout
    assert len(hub.repos["org/shards-low-shift"].commits) == len(low.commits)


def test_a_push_tagged_after_an_untagged_build_names_its_entry_by_the_tag(
    tmp_path: Path, hub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain `regenerate`, then `--publish ORG --tag v1.1`, which reuses that build: the
    commit message, the pushed card's changelog heading and changelog.json name v1.1 (the
    entry was built `untagged`), and so does the folder afterwards, so that the next push
    (v1.2, after a rebuild) keeps v1.1 below its own entry."""
    from helpers import TOKEN

    shards, args = one_shard_book(tmp_path)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert CliRunner().invoke(cli, args).exit_code == 0
    folder = tmp_path / "out" / "shards-low-shift"
    built = (folder / "changelog.json").read_bytes(), (folder / "README.md").read_bytes()
    assert json.loads(built[0])[0]["version"].startswith("untagged (toolkit ")

    dry = CliRunner().invoke(cli, [*args, "--publish", "org", "--tag", "v1.1", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "  | Publish shards-low-shift v1.1\n" in dry.stdout and "untagged" not in dry.stdout
    assert ((folder / "changelog.json").read_bytes(), (folder / "README.md").read_bytes()) == built

    real = CliRunner().invoke(cli, [*args, "--publish", "org", "--tag", "v1.1"])
    assert real.exit_code == 0, real.output
    low = hub.repos["org/shards-low-shift"]
    assert low.commits[-1].summary == "Publish shards-low-shift v1.1"
    card = low.files["README.md"].decode()
    assert "### v1.1" in card and "untagged" not in card
    [entry] = json.loads(low.files["changelog.json"])
    assert entry["version"] == "v1.1"
    assert json.loads((folder / "changelog.json").read_bytes()) == [entry]  # kept here too
    assert "### v1.1" in (folder / "README.md").read_text(encoding="utf-8")

    bio_corpus(shards / "a2.txt", LABELS_A[::-1], 40)
    again = CliRunner().invoke(cli, [*args, "--publish", "org", "--tag", "v1.2"])
    assert again.exit_code == 0, again.output
    pushed = json.loads(hub.repos["org/shards-low-shift"].files["changelog.json"])
    assert [e["version"] for e in pushed] == ["v1.2", "v1.1"]


@pytest.mark.library_surface  # the library's `tag=`; the commands set their own
@pytest.mark.parametrize("tag", ["bad tag", "v1..0~^:", "-v1", "v1.lock", "v1/", "a@{b"])
def test_regenerate_refuses_a_tag_git_refuses_before_reading_anything(
    tag: str, tmp_path: Path, hub: Any
) -> None:
    """`regenerate --publish ORG --tag T` checks T before any input is read or built: one
    line naming `--tag` (`tag=` from Python) and the value."""
    from builders.errors import InvalidValue

    book = tmp_path / "scenarios.toml"
    book.write_text(APPEND, encoding="utf-8")
    args = ["regenerate", "--scenarios", str(book), "--db", str(tmp_path / "s.duckdb")]
    res = CliRunner().invoke(cli, [*args, "--publish", "org", "--tag", tag, "--dry-run"])
    assert res.exit_code == 2, res.output
    assert "Invalid value for '--tag': must be a name git takes for a tag" in res.output
    assert repr(tag) in res.output and not (tmp_path / "out").exists()
    scenarios = load_scenarios(book)
    refused = pytest.raises(InvalidValue, match=r"^tag= must be a name git takes")
    with Store(tmp_path / "s.duckdb") as store, refused as err:
        regenerate(store, scenarios.scenarios, scenarios.out, publish_org="org", tag=tag)
    assert repr(tag) in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "out").exists() and hub.calls == []
