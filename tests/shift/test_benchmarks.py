"""The one `--benchmarks` resolver: packaged names, stored sources, label files, Few-NERD parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import DATA

from builders.errors import BuildersError, SourceFormatError
from builders.labels import ZERO_SHOT, benchmarks, verbalise
from builders.shift.benchmarks import evaluation_sets, read_label_file, read_label_map, resolve
from builders.store import Store
from builders.store.ingest import ingest

AI_TAGS = benchmarks()["crossner-ai"].tags
AI = tuple(verbalise(t) for t in AI_TAGS if t != "misc")


@pytest.fixture
def store(db: Path) -> Store:
    with Store(db) as s:
        ingest(s, "crossner-ai", DATA / "crossner" / "ai-test.txt")
        yield s


def test_packaged_and_all() -> None:
    assert list(evaluation_sets(None)) == list(ZERO_SHOT)
    assert list(evaluation_sets("all")) == list(ZERO_SHOT)
    sets = resolve("crossner-ai,all")  # a name given twice counts once
    assert [s.name for s in sets] == list(ZERO_SHOT)
    assert sets[0].labels == AI and sets[0].kind == "packaged"
    assert sets[0].sentences == ("crossner-ai", "test")
    assert (
        "else" not in AI and "else" in evaluation_sets("crossner-ai", keep_misc=True)["crossner-ai"]
    )


def test_stored_source_default_test_split_and_named_split(store: Store, db: Path) -> None:
    sets = resolve("crossner-ai:test", store=store)
    [s] = sets
    assert (s.name, s.kind, s.origin, s.sentences) == (
        "crossner-ai:test",
        "store",
        "crossner-ai:test",
        ("crossner-ai", "test"),
    )
    # the excerpt's three sentences hold algorithm and conference mentions only
    assert s.labels == ("algorithm", "conference")
    with pytest.raises(BuildersError, match=r"has no dev split \(it has: test\); name one"):
        resolve("crossner-ai:dev", store=store)


def test_a_user_source_by_name(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "mine.bio"
    path.write_text("Paris\tB-city\nis\tO\n\nBob\tB-PER\n", encoding="utf-8")
    ingest(store, "columns", path, name="mine")  # a corpus in one file: split train
    [s] = resolve("mine", store=store)
    # its only split; tags verbalised like a packaged benchmark's (PER -> person)
    assert (s.name, s.origin, s.labels) == ("mine", "mine:train", ("city", "person"))
    [named] = resolve("cities=mine:train", store=store)
    assert named.name == "cities" and named.labels == s.labels


def test_label_files(tmp_path: Path) -> None:
    txt = tmp_path / "med.txt"
    txt.write_text("disease\n\n  Chemical_Compound \nprogramlang\nmisc\n", encoding="utf-8")
    [s] = resolve(f"file:{txt}")
    assert (s.name, s.kind, s.sentences) == ("med", "file", None)
    assert s.labels == ("disease", "chemical compound", "program language")
    folder = tmp_path / "MyBench"
    folder.mkdir()
    (folder / "labels.json").write_text(json.dumps({"person": 3, "city": 1}), encoding="utf-8")
    [j] = resolve(str(folder / "labels.json"))  # an existing path works without file:
    assert (j.name, j.labels, dict(j.counts or {})) == (
        "MyBench",
        ("person", "city"),
        {"person": 3, "city": 1},
    )


def test_gliner_labels_json_equals_the_packaged_set(shared: Path) -> None:
    path = shared / "gliner-format" / "CrossNER_AI" / "labels.json"
    [g] = resolve(f"file:{path}", keep_misc=True)
    assert g.name == "CrossNER_AI"
    assert sorted(g.labels) == sorted(verbalise(t) for t in AI_TAGS)


@pytest.mark.parametrize(
    "text, message",
    [
        ('["a", 3]', "item 1: expected a label: 3"),
        ('[["a", 1], "b"]', "item 1: expected a label or a [label, count] pair: 'b'"),
        ('{"a": 0}', "count of 'a' is not a positive integer"),
        ('{"a": true}', "count of 'a' is not a positive integer"),
        ('[["a", 2], ["b", -1]]', "count of 'b' is not a positive integer"),
        ('"a"', "expected a list or an object"),
        ("[\n  1,\n", "labels.json:3: not JSON"),
    ],
)
def test_bad_label_json(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "labels.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SourceFormatError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_label_file(path)


def test_label_file_shapes(tmp_path: Path) -> None:
    path = tmp_path / "l.json"
    path.write_text('[["a", 2], ["b", 1], ["a", 1]]', encoding="utf-8")
    assert read_label_file(path) == (["a", "b"], {"a": 3, "b": 1})
    bad = tmp_path / "l.txt"
    bad.write_bytes(b"ok\n\xff\n")
    with pytest.raises(SourceFormatError, match=r"l.txt:2: not UTF-8"):
        read_label_file(bad)


def test_label_map(tmp_path: Path) -> None:
    toml = tmp_path / "map.toml"
    toml.write_text('[verbalise]\nprogramlang = "programming language"\n', encoding="utf-8")
    sets = evaluation_sets("crossner-ai", mapping=toml)
    assert (
        "programming language" in sets["crossner-ai"]
        and "program language" not in sets["crossner-ai"]
    )
    js = tmp_path / "map.json"
    js.write_text('{"Algorithm": "Method"}', encoding="utf-8")
    assert read_label_map(js) == {"Algorithm": "Method"}
    assert evaluation_sets("crossner-ai", mapping=js)["crossner-ai"][0] == "method"
    js.write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(SourceFormatError, match="label of 'a' is not a non-empty string"):
        read_label_map(js)


def test_fewnerd_parts() -> None:
    inter = evaluation_sets("fewnerd-inter")["fewnerd-inter"]
    assert len(inter) == 17 and "actor" in inter and "person-actor" not in inter
    [dev] = resolve("fewnerd-intra:validation")
    assert dev.name == "fewnerd-intra:dev" and dev.origin == "fewnerd-intra:dev"
    assert "airport" in dev.labels and "actor" not in dev.labels  # event and building types
    with pytest.raises(BuildersError, match="has no part 'extra'"):
        resolve("fewnerd-inter:extra")


def test_stored_fewnerd_gets_fewnerd_verbalisation(db: Path) -> None:
    with Store(db) as store:
        ingest(store, "fewnerd", DATA / "fewnerd" / "test.txt")
        [s] = resolve("fewnerd", store=store)
        labels = s.labels
    assert s.kind == "fewnerd" and s.origin == "fewnerd:test"
    assert labels and all("-" not in z for z in labels), labels
    assert s.label_of("ignored", "person-actor") == "actor"


def test_unknown_entry_says_what_was_tried(store: Store) -> None:
    with pytest.raises(BuildersError) as err:
        resolve("mine", store=store)
    text = str(err.value)
    for part in ("unknown benchmark 'mine'", "a packaged name (crossner-ai", "crossner-ai;",
                 "`builders ingest mine`", "no such .txt or .json file", "Valid forms: all"):  # fmt: skip
        assert part in text
    with pytest.raises(BuildersError, match="no store given"):
        resolve("mine")
    with pytest.raises(BuildersError, match="no such label file"):
        resolve("file:nothing.txt")
    with pytest.raises(BuildersError, match="names nothing"):
        resolve("x=")


def test_ambiguous_and_clashing_names(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ingest(store, "columns", DATA / "crossner" / "ai-test.txt", name="b.txt")
    Path("b.txt").write_text("person\n", encoding="utf-8")
    with pytest.raises(BuildersError, match="both a source in the store and a label file"):
        resolve("b.txt", store=store)
    Path("crossner-ai.txt").write_text("person\n", encoding="utf-8")
    Path("sub").mkdir()
    Path("sub/crossner-ai.txt").write_text("city\n", encoding="utf-8")
    with pytest.raises(BuildersError, match="two benchmarks are named 'crossner-ai'"):
        resolve("file:crossner-ai.txt,file:sub/crossner-ai.txt")
    assert list(evaluation_sets("file:crossner-ai.txt,other=file:sub/crossner-ai.txt")) == [
        "crossner-ai",
        "other",
    ]


def test_empty_set_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "m.txt"
    path.write_text("misc\n", encoding="utf-8")
    with pytest.raises(BuildersError, match=r"has no labels \(misc is left out; --keep-misc"):
        resolve(f"file:{path}")


def test_registered_benchmark_is_ingested_from_its_local_copy(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--benchmarks fewnerd` with $LABELSHIFT_DATA set: read like `familiarity` reads its source."""
    local = tmp_path / "data" / "fewnerd" / "inter"
    local.mkdir(parents=True)
    for name in ("dev.txt", "test.txt"):
        (local / name).write_bytes((DATA / "fewnerd" / name).read_bytes())
    with Store(db) as store:
        with pytest.raises(BuildersError, match="unknown benchmark 'fewnerd'"):
            resolve("fewnerd", store=store)
        monkeypatch.setenv("LABELSHIFT_DATA", str(tmp_path / "data"))
        [s] = resolve("fewnerd", store=store)
        assert store.splits_of("fewnerd") == ["dev", "test"]
    assert (s.kind, s.origin, s.labels) == (
        "fewnerd",
        "fewnerd:test",
        ("music", "athlete", "car", "weapon"),
    )
