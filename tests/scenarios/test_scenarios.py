"""`regenerate`: rebuild only what changed, report the change, reuse the rest without work."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import LABELS_A, LABELS_B, bio_corpus, json_result
from hubserver import HubServer

from builders.cli.main import cli
from builders.errors import BuildersError, InputError, ScenarioError
from builders.scenarios.book import load_scenarios, parse_scenarios
from builders.scenarios.regenerate import regenerate
from builders.store import Store

ROOT = Path(__file__).resolve().parents[2]

SCENARIOS = """
[defaults]
out = "out"
model = "all-MiniLM-L6-v2"
benchmarks = "crossner-ai,mit-movie"
min_labels = 1  # 20-label corpora: one-label levels are enough here
min_mentions = 1

[[scenario]]
name = "a-entropy"
source = "columns"
path = "a.txt"
store_as = "corpus-a"
strategy = "entropy"
levels = ["low", "high"]

[[scenario]]
name = "a-max"
source = "columns"
path = "a.txt"
store_as = "corpus-a"
strategy = "max"
levels = ["low", "high"]

[[scenario]]
name = "b-entropy"
source = "columns"
path = "b.txt"
store_as = "corpus-b"
strategy = "entropy"
levels = ["low", "high"]

[[scenario]]
name = "absent"
source = "pilener"
"""


@pytest.fixture
def book(tmp_path: Path) -> Path:
    bio_corpus(tmp_path / "a.txt", LABELS_A, 60)
    bio_corpus(tmp_path / "b.txt", LABELS_B, 60)
    path = tmp_path / "scenarios.toml"
    path.write_text(SCENARIOS, encoding="utf-8")
    return path


def _no_embedding(monkeypatch: pytest.MonkeyPatch) -> None:
    from builders.shift.embedder import Embedder

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("the embedding model was used")

    monkeypatch.setattr(Embedder, "embed_cached", boom)
    monkeypatch.setattr(Embedder, "__init__", boom)


def test_regenerate_reuses_then_rebuilds_only_what_changed(
    book: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenarios = load_scenarios(book)
    out = scenarios.out
    assert out == tmp_path / "out"
    with Store(tmp_path / "store.duckdb") as store:
        first = {r.name: r for r in regenerate(store, scenarios.scenarios, out)}
    assert {n: r.status for n, r in first.items()} == {
        "a-entropy": "built",
        "a-max": "built",
        "b-entropy": "built",
        "absent": "skipped",
    }
    assert "source 'pilener' of scenario 'absent' is not available" in first["absent"].reason
    low_a = out / "corpus-a-low-shift"
    assert (low_a / "entropy" / "build.json").exists() and (low_a / "max" / "build.json").exists()
    readme = (low_a / "README.md").read_text(encoding="utf-8")
    assert (low_a / "changelog.json").exists()
    assert "config_name: entropy" in readme and "config_name: max" in readme
    files_before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}

    # Second run: nothing to do, not even loading the model.
    with monkeypatch.context() as mp:
        _no_embedding(mp)
        with Store(tmp_path / "store.duckdb") as store:
            second = {r.name: r for r in regenerate(store, scenarios.scenarios, out)}
    assert {n: r.status for n, r in second.items()} == {
        "a-entropy": "reused",
        "a-max": "reused",
        "b-entropy": "reused",
        "absent": "skipped",
    }
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == files_before

    # Change corpus A (drop its last 20 sentences): only A's scenarios rebuild.
    bio_corpus(tmp_path / "a.txt", LABELS_A, 40)
    b_files = {p: p.stat().st_mtime_ns for p in out.glob("corpus-b-*/**/*") if p.is_file()}
    with Store(tmp_path / "store.duckdb") as store:
        third = {r.name: r for r in regenerate(store, scenarios.scenarios, out)}
    assert {n: r.status for n, r in third.items()} == {
        "a-entropy": "rebuilt",
        "a-max": "rebuilt",
        "b-entropy": "reused",
        "absent": "skipped",
    }
    assert {p: p.stat().st_mtime_ns for p in out.glob("corpus-b-*/**/*") if p.is_file()} == b_files
    rep = third["a-entropy"]
    assert rep.reason == "source changed (train)"
    old_rows = json.loads(json.dumps(first["a-entropy"].changes))["corpus-a-low-shift"]["rows"][1]
    rows = rep.changes["corpus-a-low-shift"]["rows"]
    assert (
        rows[0] == old_rows
        and rows[1]
        == json.loads((low_a / "entropy" / "build.json").read_text())["subset"]["sentences"]
    )
    assert rows[0] != rows[1]
    assert "familiarity crossner-ai" in rep.changes["corpus-a-low-shift"]
    text = "\n".join(rep.lines())
    assert "source changed (train)" in text and f"rows {rows[0]:,} -> {rows[1]:,}" in text
    log = json.loads((low_a / "changelog.json").read_text())
    assert len(log) == 2  # the first build, then this run (both configs in one entry)
    assert set(log[0]["changes"]) == {"entropy", "max"}
    assert log[0]["changes"]["entropy"]["rows"] == rows
    readme = (low_a / "README.md").read_text(encoding="utf-8")
    assert "Changelog" in readme and "source changed (train)" in readme


def test_only_and_unavailable_sources(book: Path, tmp_path: Path) -> None:
    scenarios = load_scenarios(book)
    with Store(tmp_path / "store.duckdb") as store:
        with pytest.raises(BuildersError, match=r"unknown scenario 'nope'\. Valid: a-entropy"):
            regenerate(store, scenarios.scenarios, scenarios.out, only=["nope"])
        with pytest.raises(BuildersError, match="source 'pilener' of scenario 'absent' is not"):
            regenerate(store, scenarios.scenarios, scenarios.out, only=["absent"])


def test_a_backend_that_cannot_run_its_precision_is_refused_naming_the_scenario(
    book: Path, tmp_path: Path
) -> None:
    """Checked when the scenario's key is made, before anything is built: the refusal names
    the scenario and its keys, not build-splits' options."""
    text = book.read_text(encoding="utf-8").replace(
        'strategy = "max"\n', 'strategy = "max"\nbackend = "onnx"\nprecision = "fp16"\n'
    )
    book.write_text(text, encoding="utf-8")
    scenarios = load_scenarios(book)
    with Store(tmp_path / "store.duckdb") as store, pytest.raises(BuildersError) as err:
        regenerate(store, scenarios.scenarios, scenarios.out, only=["a-max"])
    assert str(err.value) == (
        "scenario 'a-max': `backend` onnx runs `precision` fp32, not fp16; use `backend` "
        "torch for fp16"
    )


def test_cli_regenerate_json(book: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "cli.duckdb"
    args = ["regenerate", "--scenarios", str(book), "--db", str(db), "--json", "-q"]
    first = CliRunner().invoke(cli, [*args, "--only", "b-entropy"])
    assert first.exit_code == 0, first.output
    [rep] = json_result(first.stdout)
    assert rep["name"] == "b-entropy" and rep["status"] == "built"
    _no_embedding(monkeypatch)
    second = CliRunner().invoke(cli, [*args, "--only", "b-entropy"])
    assert second.exit_code == 0, second.output
    assert json_result(second.stdout)[0]["status"] == "reused"
    bad = CliRunner().invoke(cli, [*args, "--only", "absent"])
    assert bad.exit_code == 1
    assert "Error: source 'pilener' of scenario 'absent' is not available" in bad.output


def test_parse_errors_name_the_problem() -> None:
    with pytest.raises(BuildersError, match="unknown key 'strategie'"):
        parse_scenarios({"scenario": [{"name": "x", "source": "columns", "strategie": "max"}]})
    with pytest.raises(BuildersError, match="used twice"):
        parse_scenarios({"scenario": [{"name": "x", "source": "a"}, {"name": "x", "source": "b"}]})
    with pytest.raises(BuildersError, match='needs mode = "intra" or "inter"'):
        parse_scenarios({"scenario": [{"name": "f", "kind": "fewnerd"}]})


def test_repo_scenarios_file_is_valid() -> None:
    book = load_scenarios(Path(__file__).parents[2] / "scenarios.toml")
    names = [s.name for s in book.scenarios]
    assert "pilener-sample-entropy" in names and "fewnerd-inter" in names
    assert {s.name: s for s in book.scenarios}["pilener-sample-familiarity"].params[
        "strategy"
    ] == "familiarity"
    fewnerd = {s.name: s for s in book.scenarios}["fewnerd-intra"]
    assert fewnerd.folders() == ["fewnerd-intra"]


def test_regenerate_outputs_are_deterministic(book: Path, tmp_path: Path) -> None:
    scenarios = load_scenarios(book)
    picked = [s for s in scenarios.scenarios if s.name in ("a-entropy", "a-max")]
    trees = []
    for run in ("one", "two"):
        out = tmp_path / run
        with Store(tmp_path / f"{run}.duckdb") as store:
            regenerate(store, picked, out)
        trees.append(
            {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
        )
    assert trees[0].keys() == trees[1].keys()
    for name in trees[0]:
        assert trees[0][name] == trees[1][name], name


def test_a_rebuild_that_changes_nothing_adds_no_changelog_entry(book: Path, tmp_path: Path) -> None:
    scenarios = load_scenarios(book)
    picked = [s for s in scenarios.scenarios if s.name == "b-entropy"]
    out = scenarios.out
    with Store(tmp_path / "store.duckdb") as store:
        regenerate(store, picked, out)
        folder = out / "corpus-b-low-shift"
        log, card = (folder / "changelog.json").read_bytes(), (folder / "README.md").read_bytes()
        assert len(json.loads(log)) == 1  # the first build
        [rep] = regenerate(store, picked, out, force=True)
    assert rep.status == "rebuilt" and rep.reason == "forced"
    assert all(a == b for a, b in rep.changes["corpus-b-low-shift"].values())
    assert (folder / "changelog.json").read_bytes() == log
    assert (folder / "README.md").read_bytes() == card


def test_regenerate_takes_publishs_options(book: Path, tmp_path: Path, hub: HubServer) -> None:
    help_text = CliRunner().invoke(cli, ["regenerate", "--help"]).output
    for option in ("--publish ORG", "--private / --public", "--tag TEXT", "--dry-run"):
        assert option in help_text, option
    args = ["regenerate", "--scenarios", str(book), "--db", str(tmp_path / "s.duckdb")]
    lone = CliRunner().invoke(cli, [*args, "--tag", "v1"])
    assert lone.exit_code == 2 and "go with --publish ORG" in lone.output
    bad = CliRunner().invoke(cli, [*args, "--publish", "a/b"])
    assert bad.exit_code == 2 and "Invalid value for '--publish'" in bad.output
    dry = CliRunner().invoke(
        cli, [*args, "--only", "b-entropy", "--publish", "testorg", "--dry-run", "--json", "-q"]
    )
    assert dry.exit_code == 0, dry.output
    [rep] = json_result(dry.stdout)
    assert [p["repo_id"] for p in rep["published"]] == [
        "testorg/corpus-b-low-shift",
        "testorg/corpus-b-high-shift",
    ]
    assert all(p["dry_run"] for p in rep["published"])
    assert hub.calls == []


def test_benchmark_files_and_label_maps_are_relative_to_the_scenarios_file(tmp_path: Path) -> None:
    doc = {
        "defaults": {"benchmarks": "crossner-ai,med=file:med.txt", "label_map": "map.json"},
        "scenario": [
            {"name": "a", "source": "columns"},
            {"name": "b", "source": "columns", "benchmarks": ["file:/abs/x.json", "mine:dev"]},
        ],
    }
    a, b = parse_scenarios(doc, tmp_path).scenarios
    assert a.params["benchmarks"] == ["crossner-ai", f"med=file:{tmp_path / 'med.txt'}"]
    assert a.params["label_map"] == str(tmp_path / "map.json")
    assert b.params["benchmarks"] == ["file:/abs/x.json", "mine:dev"]


def test_scenario_key_follows_the_benchmark_sentences(tmp_path: Path) -> None:
    from helpers import DATA

    from builders.scenarios.regenerate import _why, scenario_key
    from builders.store.ingest import ingest

    [sc] = parse_scenarios(
        {"scenario": [{"name": "a", "source": "columns", "benchmarks": "crossner-ai"}]}, tmp_path
    ).scenarios
    bench = tmp_path / "ai-test.txt"
    bench.write_bytes((DATA / "crossner" / "ai-test.txt").read_bytes())
    with Store(tmp_path / "s.duckdb") as store:
        key0, parts0 = scenario_key(store, sc)
        assert parts0["benchmark_fingerprints"] == {"crossner-ai": None}  # no copy anywhere
        ingest(store, "crossner-ai", bench)
        key1, parts1 = scenario_key(store, sc)
        bench.write_text(bench.read_text(encoding="utf-8").replace("Typical", "Usual"), "utf-8")
        ingest(store, "crossner-ai", bench)
        key2, parts2 = scenario_key(store, sc)
    assert len({key0, key1, key2}) == 3
    assert _why(parts1, parts2, False) == "benchmark sentences changed"
    off = dataclasses.replace(sc, params={**sc.params, "leakage": False})
    with Store(tmp_path / "s.duckdb") as store:
        assert "benchmark_fingerprints" not in scenario_key(store, off)[1]


def test_paths_and_hub_ids_in_a_scenario(tmp_path: Path) -> None:
    """`path` and `ingest_label_map` are relative to the scenarios file; a Hub dataset id is
    kept as written unless a folder of that name is beside the file."""
    doc = {
        "scenario": [
            {"name": "a", "source": "columns", "path": "a.txt", "ingest_label_map": "m.toml"},
            {"name": "b", "source": "hf", "path": "org/dataset", "store_as": "b"},
            {"name": "c", "source": "hf", "path": "local/folder", "store_as": "c"},
            {
                "name": "d",
                "source": "columns",
                "path": "data/a.bio",
                "ingest_label_map": "m/x",
                "store_as": "d",
            },
        ],
    }
    (tmp_path / "local" / "folder").mkdir(parents=True)
    a, b, c, d = parse_scenarios(doc, tmp_path).scenarios
    assert (a.path, a.ingest_label_map) == (str(tmp_path / "a.txt"), str(tmp_path / "m.toml"))
    assert b.path == "org/dataset" and b.ingest_label_map is None
    assert c.path == str(tmp_path / "local" / "folder")
    # a file (suffix) or a label map is never a Hub id, even when absent
    assert (d.path, d.ingest_label_map) == (str(tmp_path / "data/a.bio"), str(tmp_path / "m/x"))


def test_a_scenario_reads_its_source_with_its_ingest_label_map(tmp_path: Path) -> None:
    """`ingest_label_map` is the ingest's --label-map: the stored labels follow it, and a
    changed map rebuilds the scenario; a source used from the store must have been read with
    the same map."""

    def raw_labels(store: Store, source: str) -> dict[str, str]:
        return {raw: label for raw, label, _ in store.raw_labels(source, "train")}

    bio_corpus(tmp_path / "a.txt", LABELS_A, 60)
    mapping = tmp_path / "map.toml"
    mapping.write_text('[verbalise]\nsong = "track"\n', encoding="utf-8")
    text = SCENARIOS.split("[[scenario]]")[:2]
    text[1] = text[1].replace('path = "a.txt"', 'path = "a.txt"\ningest_label_map = "map.toml"')
    (tmp_path / "scenarios.toml").write_text("[[scenario]]".join(text), encoding="utf-8")
    book = load_scenarios(tmp_path / "scenarios.toml")
    with Store(tmp_path / "s.duckdb") as store:
        [first] = regenerate(store, book.scenarios, book.out)
        assert first.status == "built" and raw_labels(store, "corpus-a")["song"] == "track"
        mapping.write_text('[verbalise]\nsong = "tune"\n', encoding="utf-8")
        [second] = regenerate(store, book.scenarios, book.out)
        assert (second.status, second.reason) == ("rebuilt", "source changed (train)")
        assert raw_labels(store, "corpus-a")["song"] == "tune"
        low = json.loads((book.out / "corpus-a-low-shift" / "entropy" / "build.json").read_text())
        stored = dataclasses.replace(book.scenarios[0], path=None)  # its input not at hand
        assert regenerate(store, [stored], book.out)[0].status == "reused"
        other = dataclasses.replace(stored, ingest_label_map=None)
        with pytest.raises(BuildersError, match="read with another label map") as err:
            regenerate(store, [other], book.out)
    assert "corpus-a/train" in str(err.value) and "path = ..." in str(err.value)
    # the stored copy's input (not the scenarios file) is at fault: the errors branch's type
    assert isinstance(err.value, InputError) and not isinstance(err.value, ScenarioError)
    assert low["provenance"]["source"]["splits"]["train"]["reader_options"]["label_map"] == {
        "song": "tune"
    }


def test_the_repo_scenarios_file_names_every_key() -> None:
    """The scenarios file's header lists the keys of each kind of scenario, no more, no less."""
    from builders.scenarios.book import COMMON_KEYS, FEWNERD_KEYS, SPLIT_KEYS

    head = " ".join(
        line[1:].strip() for line in (ROOT / "scenarios.toml").read_text("utf-8").splitlines()
        if line.startswith("#")
    )  # fmt: skip
    plain = re.sub(r"\([^()]*\)", "", head)  # asides in brackets are not keys
    listed = {
        intro: {k.strip() for k in re.search(rf"{re.escape(intro)}([^.]*)\.", plain)[1].split(",")}
        for intro in ("Keys of every scenario:", "build-splits' options:", "`fewnerd` scenario:")
    }
    assert listed == {
        "Keys of every scenario:": COMMON_KEYS,
        "build-splits' options:": set(SPLIT_KEYS),
        "`fewnerd` scenario:": set(FEWNERD_KEYS),
    }


def test_a_piped_table_wraps_its_changes(
    book: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a terminal (CliRunner, a pipe, a CI log): the table is at most `TABLE_WIDTH`
    columns wide (`$COLUMNS` when set), its changes wrapped, every word of every change
    printed (in order); `--json` holds each change whole, as before."""
    from builders.cli import publish
    from builders.scenarios.report import ScenarioReport

    rep = ScenarioReport("a-entropy", "rebuilt", ["corpus-a-low-shift", "corpus-a-high-shift"])
    rep.reason = "source changed (train); parameters changed (benchmarks, min_labels)"
    files = [f"shard-{n:02d}-of-a-long-corpus.jsonl" for n in range(9)]
    rep.inputs = {"corpus-a": {"train": {"files_added": files, "files_removed": [],
                  "files_changed": [], "sentences": [1000, 1900], "mentions": [5000, 9100]}}}  # fmt: skip
    for folder in rep.folders:
        rep.changes[folder] = {"rows": [1000, 1900], "familiarity": [0.5, 0.61]}
        rep.labels_added[folder] = [f"label number {n}" for n in range(7)]
        rep.moved[folder] = {"moved_in": {"medium": "high", "low, high": "high"}}
    monkeypatch.setattr(publish, "regenerate", lambda *a, **k: [rep])
    args = ["regenerate", "--scenarios", str(book), "--db", str(tmp_path / "s.duckdb"), "-q"]
    shown = CliRunner().invoke(cli, args, env={"COLUMNS": None})  # pytest sets it to 80
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert max(len(line) for line in lines) <= publish.TABLE_WIDTH
    assert max(len(line) for line in rep.lines()) > 2 * publish.TABLE_WIDTH  # it did wrap
    words = [w for line in lines for w in line.split() if w.strip("│┃┏┓┗┛━─┡┩└┘╇╿")]
    at = 0
    for change in rep.lines():
        for word in change.split():
            at = words.index(word, at) + 1  # each word, after the one before
    wide = CliRunner().invoke(cli, args, env={"COLUMNS": "2000"}).stdout.splitlines()
    assert all(any(change in line for line in wide) for change in rep.lines())  # unwrapped
    whole = CliRunner().invoke(cli, [*args, "--json"])
    assert json_result(whole.stdout)[0]["inputs"]["corpus-a"]["train"]["files_added"] == files
