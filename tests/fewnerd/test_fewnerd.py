"""Few-NERD: the reader, INTRA/INTER splits, the Hub folder and the episode sampler."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import json_result

from builders.cli.main import cli
from builders.errors import BuildersError, SourceFormatError
from builders.fewnerd import episodes as E
from builders.fewnerd import splits as F
from builders.fewnerd.folder import features, read_part, write_split
from builders.shift.specs import EmbeddingSpec, MetricSpec
from builders.sources import fewnerd as reader
from builders.sources.base import Example, ReadReport
from builders.store import Store
from builders.store.ingest import ingest

OFFICIAL_INTER = {"train": 11_710 + 13_012, "dev": 18_817, "test": 14_007}


@pytest.fixture
def fn_dir(data_dir: Path) -> Path:
    return data_dir / "fewnerd"


@pytest.fixture
def tiny(db: Path, fn_dir: Path) -> Store:
    store = Store(db)
    ingest(store, "fewnerd", fn_dir)
    yield store
    store.close()


# ---------------------------------------------------------------------- reader
def test_reader_io_and_bio(fn_dir: Path) -> None:
    report = ReadReport()
    dev = list(reader.read(fn_dir / "dev.txt", report))
    assert len(dev) == 5
    assert dev[0].tokens[3:5] == ["Rowan", "Gillespie"]
    assert dev[0].spans == [(3, 5, "person-other")]
    train = list(reader.read(fn_dir / "train-sample-a.txt", report))
    assert train[1].spans == [(10, 11, "location_GPE")]
    # `B-organization_other` then `I-organization_company`: two entities in IO terms.
    labels = [s[2] for s in train[3].spans]
    assert labels == ["organization_other", "organization_company"]
    assert report.counts["repaired_tags"] == 1


@pytest.mark.parametrize(
    ("raw", "label", "coarse"),
    [
        ("location_GPE", "location-gpe", "location"),
        ("location-GPE", "location-gpe", "location"),
        ("person-artist/author", "person-artist/author", "person"),
        ("person_artist/author", "person-artist/author", "person"),
        (
            "event_attack/battle/war/militaryconflict",
            "event-attack/battle/war/militaryconflict",
            "event",
        ),
    ],
)
def test_map_label(raw: str, label: str, coarse: str) -> None:
    assert reader.map_label(raw) == (label, coarse)


def test_unknown_type_is_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "dev.txt"
    bad.write_text("Paris\tlocation-GPE\nis\tO\nnice\tplace-other\n", encoding="utf-8")
    with pytest.raises(SourceFormatError) as err:
        list(reader.read(bad, ReadReport()))
    assert str(err.value) == (
        f"{bad}:3: unknown Few-NERD type (expected coarse-fine or coarse_fine, coarse one of "
        "art, building, event, location, organization, other, person, product): 'place-other'"
    )
    with pytest.raises(ValueError, match="not a Few-NERD type"):
        reader.map_label("PER")


# ---------------------------------------------------------------------- type tables
def test_type_table_matches_dfki_order() -> None:
    fine = F.fine_types()
    assert len(fine) == 66 == len(set(fine))
    assert list(fine) == sorted(fine)  # code-point order, as DFKI-SLT/few-nerd declares them
    assert {F.coarse_of(f) for f in fine} == set(F.coarse_types())
    assert all(F.verbalise(f) for f in fine)
    assert F.verbalise("person-artist/author") == "artist / author"
    assert F.official_name("location-gpe") == "location-GPE"


def test_official_inter_assignment() -> None:
    parts = F.assign_parts("inter", "official")
    assert Counter(parts.values()) == {"train": 36, "dev": 13, "test": 17}
    assert parts["person-scholar"] == "dev" and parts["person-actor"] == "test"
    # Every coarse type has types in every part (INTER's point).
    for p in F.PARTS:
        assert {F.coarse_of(t) for t, q in parts.items() if q == p} == set(F.coarse_types())


def test_intra_assignment_is_by_coarse_type() -> None:
    parts = F.assign_parts("intra")
    by_part = {p: {F.coarse_of(t) for t, q in parts.items() if q == p} for p in F.PARTS}
    assert by_part == {
        "train": {"person", "other", "art", "product"},
        "dev": {"event", "building"},
        "test": {"organization", "location"},
    }
    with pytest.raises(BuildersError, match="INTRA has only the official"):
        F.assign_parts("intra", "random")


def test_random_inter_assignment() -> None:
    a = F.assign_parts("inter", "random", seed=1)
    assert a == F.assign_parts("inter", "random", seed=1)
    assert a != F.assign_parts("inter", "random", seed=2)
    assert set(a) == set(F.fine_types())
    for coarse in F.coarse_types():
        got = Counter(p for t, p in a.items() if F.coarse_of(t) == coarse)
        n = sum(got.values())
        assert got["dev"] == got["test"] == max(1, int(0.2 * n + 0.5))
    assert Counter(a.values()) == {"train": 40, "dev": 13, "test": 13}
    with pytest.raises(BuildersError, match="use --assignment random"):
        F.assign_parts("inter", "official", types=["person-astronaut"])


# ---------------------------------------------------------------------- splits
def test_inter_split_of_excerpts_returns_every_sentence(tiny: Store) -> None:
    build = F.build_split(tiny, "fewnerd", "inter")
    summary = build.summary()
    assert {p: summary["parts"][p]["origin_splits"] for p in summary["parts"]} == {
        "train": {"train": 4},
        "validation": {"dev": 5},
        "test": {"test": 4},
    }
    assert summary["dropped_no_entity"] == 0 and summary["relabelled_o"] == 0
    assert build.parts["train"].spans[1] == [{"start": 10, "end": 11, "label": "location-GPE"}]


def test_intra_from_inter_files_says_its_parts_miss_mentions(tiny: Store, tmp_path: Path) -> None:
    """INTER's files hold disjoint types per split (each sentence annotated with its part's
    types only): INTRA rebuilt from them misses mentions, and the build, summary.json, the
    card and the command line say so; INTER rebuilt from them loses nothing and says nothing."""
    assert F.build_split(tiny, "fewnerd", "inter").warning is None
    build = F.build_split(tiny, "fewnerd", "intra")
    assert build.warning is not None
    assert "fewnerd's stored splits hold disjoint entity types" in build.warning
    assert "the INTRA parts rebuilt from it miss those mentions" in build.warning
    assert build.summary()["warning"] == build.warning
    assert "warning" not in F.build_split(tiny, "fewnerd", "inter").summary()
    folder = write_split(build, tmp_path / "out")
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert f"**Limitation:** {build.warning}." in card


def test_one_split_or_shared_types_give_no_warning(tmp_path: Path, db: Path) -> None:
    lines = ["Ann\tperson-other", "met\tO", "Bob\tperson-actor"]
    for split in ("train", "dev"):
        (tmp_path / f"{split}.txt").write_text("\n".join(lines) + "\n")
    with Store(db) as store:
        ingest(store, "fewnerd", tmp_path / "train.txt", split="train")
        assert F.build_split(store, "fewnerd", "intra").warning is None  # one split
        ingest(store, "fewnerd", tmp_path / "dev.txt", split="dev")
        assert F.build_split(store, "fewnerd", "intra").warning is None  # types shared


def test_a_split_without_mentions_gives_no_warning(tmp_path: Path, db: Path) -> None:
    """A split whose sentences hold no mention has no types to be disjoint from the others'."""
    (tmp_path / "train.txt").write_text("Ann\tperson-other\nmet\tO\nBob\tperson-actor\n")
    (tmp_path / "dev.txt").write_text("Nothing\tO\nhere\tO\n")
    with Store(db) as store:
        ingest(store, "fewnerd", tmp_path / "train.txt", split="train")
        ingest(store, "fewnerd", tmp_path / "dev.txt", split="dev")
        assert F.build_split(store, "fewnerd", "intra").warning is None


def test_split_relabels_and_drops(tmp_path: Path, db: Path) -> None:
    # person-other is a dev type, person-actor a test type; the last sentence has no entity.
    lines = ["Ann\tperson-other", "met", "Bob\tperson-actor", "", "Nothing\tO", "here\tO"]
    (tmp_path / "dev.txt").write_text(
        "\n".join(x if "\t" in x or not x else x + "\tO" for x in lines)
    )
    with Store(db) as store:
        ingest(store, "fewnerd", tmp_path / "dev.txt", split="dev")
        seen = set()
        for seed in range(8):
            build = F.build_split(store, "fewnerd", "inter", seed=seed)
            assert build.dropped_no_entity == 1 and build.relabelled_o == 1
            (part,) = [p for p in F.PARTS if build.parts[p].sentences]
            assert [s["label"] for s in build.parts[part].spans[0]] == [
                {"dev": "person-other", "test": "person-actor"}[part]
            ]
            assert build.summary() == F.build_split(store, "fewnerd", "inter", seed=seed).summary()
            seen.add(part)
        assert seen == {"dev", "test"}  # the pick is random, over the candidate parts only


def test_split_counts_the_negatives_its_layout_cannot_hold(
    tiny: Store, tmp_path: Path, db: Path
) -> None:
    """The Few-NERD layout (DFKI-SLT/few-nerd's columns) has no negatives: a source that has
    them gets them counted in summary.json and on stderr, not dropped silently."""
    assert "left_out" not in F.build_split(tiny, "fewnerd", "inter").summary()
    f = tmp_path / "train.json"
    f.write_text(
        '[{"tokenized_text": ["Rome", "is", "old"], "ner": [[0, 0, "location-GPE"]], '
        '"negative_ner": [[2, 2, "location-GPE"]]},\n'
        '{"tokenized_text": ["Ann", "sang"], "ner": [[0, 0, "person-other"]], '
        '"ner_negatives": ["person-actor"]},\n'
        '{"tokenized_text": ["Bob", "acted"], "ner": [[0, 0, "person-actor"]], '
        '"negative_ner": [[1, 1, "person-actor"]]}]',
        encoding="utf-8",
    )
    other = tmp_path / "other.duckdb"
    with Store(other) as store:
        ingest(store, "gliner", f, name="fn")
        build = F.build_split(store, "fn", "inter")
    assert build.summary()["left_out"] == {"negatives": 1, "negative_spans": 2}
    args = ["--source", "fn", "--db", str(other), "--out", str(tmp_path / "out")]
    res = CliRunner().invoke(cli, ["fewnerd-splits", "--mode", "inter", *args, "--no-familiarity"])
    assert res.exit_code == 0, res.output
    assert "left out: 1 negatives and 2 negative spans of fn" in res.output
    summary = json.loads((tmp_path / "out/fewnerd-inter/summary.json").read_text())
    assert summary["left_out"] == {"negatives": 1, "negative_spans": 2}


def test_write_split_is_deterministic_and_typed(tiny: Store, tmp_path: Path) -> None:
    import datasets

    def build_and_hash(out: Path) -> dict[str, str]:
        folder = write_split(F.build_split(tiny, "fewnerd", "intra", seed=3), out)
        return {
            str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        }

    first = build_and_hash(tmp_path / "a")
    assert first == build_and_hash(tmp_path / "a") == build_and_hash(tmp_path / "b")
    assert sorted(first) == [
        "METHOD.md",
        "README.md",
        "data/test-00000-of-00001.parquet",
        "data/train-00000-of-00001.parquet",
        "data/validation-00000-of-00001.parquet",
        "summary.json",
    ]
    folder = tmp_path / "a" / "fewnerd-intra"
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["fewnerd-intra"]  # no temp left
    card = (folder / "README.md").read_text()
    meta = yaml.safe_load(card.split("---\n")[1])
    assert datasets.Features._from_yaml_list(meta["dataset_info"]["features"]) == features(
        F.fine_types()
    )
    ds = datasets.load_dataset(str(folder))
    assert set(ds) == {"train", "validation", "test"}
    fine = ds["train"].features["fine_ner_tags"].feature
    assert isinstance(fine, datasets.ClassLabel) and fine.names[21] == "location-GPE"
    assert ds["train"].features["ner_tags"].feature.names == ["O", *F.coarse_types()]
    row = next(r for r in ds["train"] if r["spans"])
    for span in row["spans"]:
        for i in range(span["start"], span["end"]):
            assert fine.int2str(row["fine_ner_tags"][i]) == span["label"]
    summary = json.loads((folder / "summary.json").read_text())
    assert sum(p["sentences"] for p in summary["parts"].values()) == 13
    assert len(read_part(folder, "validation")) == summary["parts"]["validation"]["sentences"]


# ---------------------------------------------------------------------- episodes
def _synthetic(n_types: int = 6, per_type: int = 8) -> list[Example]:
    out = []
    for t in range(n_types):
        for j in range(per_type):
            spans = [(0, 1, f"t{t}")] + ([(2, 3, f"t{t}")] if j % 3 == 0 else [])
            if j % 4 == 1:
                spans.append((4, 5, f"t{(t + 1) % n_types}"))
            out.append(Example(tokens=["w"] * 6, spans=spans))
    out.append(Example(tokens=["w"] * 3))  # no entity: never drawn
    return out


@pytest.mark.parametrize(("n", "k"), [(2, 1), (3, 2), (5, 1)])
def test_sampler_guarantees_and_determinism(n: int, k: int) -> None:
    ex = _synthetic()
    eps = E.sample_episodes(ex, None, n, k, 200, seed=7)
    assert len(eps) == 200
    for ep in eps:
        assert E.check_episode(ep, ex, n, k) == []
    assert eps == E.sample_episodes(ex, None, n, k, 200, seed=7)
    assert eps != E.sample_episodes(ex, None, n, k, 200, seed=8)


def test_entity_counts_merge_like_io() -> None:
    assert E.entity_counts([(0, 1, "a"), (1, 2, "a"), (3, 4, "a"), (4, 5, "b")]) == {"a": 2, "b": 1}
    assert E.io_counts(["a", "a", "O", "a", "b"]) == {"a": 2, "b": 1}


def test_sampler_guards() -> None:
    ex = _synthetic(n_types=3)
    with pytest.raises(BuildersError, match="5-way episodes need 5 types; the part has 3"):
        E.sample_episodes(ex, None, 5, 1, 1)
    with pytest.raises(
        BuildersError, match=r"episode 1: no 2-way 10~20-shot episode .* in 50 type draws"
    ):
        E.sample_episodes(ex, None, 2, 10, 1, max_attempts=50)


def test_check_finds_broken_episodes() -> None:
    ex = _synthetic()
    ep = E.sample_episodes(ex, None, 2, 1, 1, seed=0)[0]
    bad = E.Episode(ep.types, ep.support, ep.support)
    assert any("share sentences" in p for p in E.check_episode(bad, ex, 2, 1))
    rec = E.episode_record(ep, ex)
    rec["support"]["label"][0][0] = "t99"
    assert any("outside the episode" in p for p in E.check_record(rec, 2, 1))


def test_official_episode_excerpt_passes_checks(fn_dir: Path) -> None:
    for line in (fn_dir / "dev_5_1-head.jsonl").read_text().splitlines():
        rec = json.loads(line)
        assert E.check_record(rec, 5, 1) == []


# ---------------------------------------------------------------------- CLI
def test_cli_help_has_examples() -> None:
    runner = CliRunner()
    for name in ("fewnerd-splits", "fewnerd-episodes"):
        result = runner.invoke(cli, [name, "--help"])
        assert result.exit_code == 0 and "Example: builders " + name in result.output


def test_cli_splits_and_episodes(tmp_path: Path, fn_dir: Path) -> None:
    # Every dev sentence twice: one for the support set, its copy for the query set.
    data = tmp_path / "data"
    data.mkdir()
    dev = (fn_dir / "dev.txt").read_text().split("\n\n")
    (data / "dev.txt").write_text("\n\n".join(dev + dev))
    for name in ("test.txt", "train-sample-a.txt"):
        (data / name).write_text((fn_dir / name).read_text())
    db = str(tmp_path / "s.duckdb")
    runner = CliRunner()
    args = [
        "fewnerd-splits",
        "--mode",
        "inter",
        "--path",
        str(data),
        "--out",
        str(tmp_path / "out"),
    ]
    result = runner.invoke(cli, [*args, "--no-familiarity", "--db", db, "--json", "-q"])
    assert result.exit_code == 0, result.output
    summary = json_result(result.output)
    assert {p: summary["parts"][p]["sentences"] for p in summary["parts"]} == {
        "train": 4,
        "validation": 10,
        "test": 4,
    }
    split_dir = tmp_path / "out" / "fewnerd-inter"
    args = [
        "fewnerd-episodes",
        "--split-dir",
        str(split_dir),
        "--part",
        "validation",
        "--n-way",
        "2",
    ]
    result = runner.invoke(
        cli, [*args, "--episodes", "20", "--lowercase", "--json", "-q", "--db", db]
    )
    assert result.exit_code == 0, result.output
    info = json_result(result.output)
    assert info["episodes"] == 20 and info["checked"]
    recs = [
        json.loads(x)
        for x in (split_dir / "episode-data" / "dev_2_1.jsonl").read_text().splitlines()
    ]
    assert len(recs) == 20 and all(E.check_record(r, 2, 1) == [] for r in recs)
    assert all(w == w.lower() for r in recs for s in r["support"]["word"] for w in s)
    # From the store directly, and the guard against too many ways.
    result = runner.invoke(
        cli, ["fewnerd-episodes", "--part", "dev", "--n-way", "6", "--db", db, "-q"]
    )
    assert result.exit_code == 1
    assert result.output.strip().endswith(
        "6-way episodes need 6 types; the part has 5 (event-other, "
        "organization-religion, other-currency, person-other, product-game)"
    )
    result = runner.invoke(
        cli, ["fewnerd-episodes", "--part", "dev", "--source", "nope", "--db", db]
    )
    assert result.exit_code == 1 and "source 'nope' is not in" in result.output


def test_hub_copy_is_read_with_its_fine_tags(tmp_path: Path, monkeypatch) -> None:
    """Without local files, fewnerd-splits reads DFKI-SLT/few-nerd through the `hf` reader,
    with the registry's options for that copy: the fine types, IO."""
    from builders.sources import get_source, hf

    with monkeypatch.context() as m:
        m.setattr(hf, "available_splits", lambda d, c, s=None, r=None: ["train", "validation"])
        plan = get_source("fewnerd").plan()
    assert (plan.module, plan.origin) == ("hf", "DFKI-SLT/few-nerd[supervised]")
    assert dict(plan.options) == {
        "tokens_column": "tokens",
        "tags_column": "fine_ner_tags",
        "scheme": "io",
        "repair": False,
        "config": "supervised",
    }
    assert {s: [str(u) for u in us] for s, us in plan.units.items()} == {
        "train": ["DFKI-SLT/few-nerd[supervised]/train"],
        "dev": ["DFKI-SLT/few-nerd[supervised]/validation"],
    }
    args = ["fewnerd-splits", "--mode", "inter", "--db", str(tmp_path / "s.duckdb"), "-q"]
    result = CliRunner().invoke(cli, args)  # offline: the Hub cannot be reached
    assert result.exit_code == 1
    assert result.output.startswith(
        "Error: source 'fewnerd': no local copy (no $LABELSHIFT_DATA/fewnerd/inter), and reading "
        "its Hub origin DFKI-SLT/few-nerd[supervised] cannot be reached offline"
    )
    assert "give the files with --path" in result.output


@pytest.mark.slow
def test_familiarity_summary_with_minilm(tiny: Store) -> None:
    build = F.build_split(tiny, "fewnerd", "inter")
    fam = F.familiarity_summary(tiny, build, EmbeddingSpec("all-MiniLM-L6-v2"), MetricSpec(k=10))
    for part, name in (("dev", "validation"), ("test", "test")):
        rep = fam.per_benchmark[name]
        assert 0.0 <= rep.familiarity <= 1.0
        assert set(rep.labels) == {F.verbalise(t) for t in build.parts[part].type_counts}
    assert fam == F.familiarity_summary(
        tiny, build, EmbeddingSpec("all-MiniLM-L6-v2"), MetricSpec(k=10)
    )


# ---------------------------------------------------------------------- shared data (Done-when)
@pytest.fixture(scope="module")
def inter_union(tmp_path_factory: pytest.TempPathFactory) -> Store:
    from helpers import SHARED

    folder = SHARED / "fewnerd" / "inter"
    if not folder.is_dir():
        pytest.skip(f"shared data not found at {folder}")
    store = Store(tmp_path_factory.mktemp("fewnerd") / "union.duckdb")
    ingest(store, "fewnerd", folder)
    yield store
    store.close()


@pytest.mark.shared
def test_official_inter_puts_every_sentence_back(inter_union: Store) -> None:
    build = F.build_split(inter_union, "fewnerd", "inter")
    assert build.dropped_no_entity == 0 and build.relabelled_o == 0
    for part in F.PARTS:
        assert build.origin[part] == {part: OFFICIAL_INTER[part]}
        assert build.parts[part].sentences == OFFICIAL_INTER[part]
    assert {p: len(build.parts[p].type_counts) for p in F.PARTS} == {
        "train": 36,
        "dev": 13,
        "test": 17,
    }


@pytest.mark.shared
def test_intra_on_the_union_has_the_coarse_groups(inter_union: Store) -> None:
    build = F.build_split(inter_union, "fewnerd", "intra")
    groups = {p: {F.coarse_of(t) for t in build.parts[p].type_counts} for p in F.PARTS}
    assert groups == {
        "train": {"person", "other", "art", "product"},
        "dev": {"event", "building"},
        "test": {"organization", "location"},
    }
    assert sum(build.parts[p].sentences for p in F.PARTS) == sum(OFFICIAL_INTER.values())
    # INTER's files annotate each sentence with its own part's types only
    assert build.warning is not None and "(dev 13, test 17, train 36 types)" in build.warning


@pytest.mark.shared
def test_episodes_from_inter_dev_match_the_official_file(inter_union: Store, shared: Path) -> None:
    examples = F.store_examples(inter_union, "fewnerd", "dev")
    eps = E.sample_episodes(examples, None, 5, 1, 1000, seed=0)
    assert all(E.check_episode(ep, examples, 5, 1) == [] for ep in eps)
    ours = [E.episode_record(ep, examples, lowercase=True) for ep in eps]
    official_path = shared / "fewnerd" / "episode-data" / "inter" / "dev_5_1.jsonl"
    official = [json.loads(x) for x in official_path.read_text().splitlines()]
    assert len(official) == len(ours) == 1000
    assert all(E.check_record(r, 5, 1) == [] for r in official)

    def shape(recs: list[dict]) -> tuple:
        return (
            {tuple(r) for r in recs} | {tuple(r["support"]) for r in recs},
            {t for r in recs for t in r["types"]},
            sum(len(r["support"]["word"]) for r in recs) / len(recs),
            sum(len(r["query"]["word"]) for r in recs) / len(recs),
        )

    (k1, t1, s1, q1), (k2, t2, s2, q2) = shape(ours), shape(official)
    assert k1 == k2 and t1 == t2  # same keys, same 13 dev types, same (lower-cased) spelling
    assert abs(s1 - s2) < 0.1 and abs(q1 - q2) < 0.1  # about 4.95 sentences per side in both


def test_check_episode_sees_types_outside_the_n() -> None:
    from builders.fewnerd.episodes import Episode, check_episode

    examples = [
        Example(tokens=["Paris", "is", "nice"], spans=[(0, 1, "location-GPE")]),
        Example(
            tokens=["Bob", "in", "Rome"], spans=[(0, 1, "person-other"), (2, 3, "location-GPE")]
        ),
        Example(tokens=["Lyon", "rocks"], spans=[(0, 1, "location-GPE")]),
    ]
    good = Episode(types=("location-GPE",), support=(0,), query=(2,))
    assert check_episode(good, examples, n_way=1, k_shot=1) == []
    # sentence 1 renders as a clean location-GPE sentence, but it brings in person-other
    bad = Episode(types=("location-GPE",), support=(1,), query=(2,))
    assert check_episode(bad, examples, n_way=1, k_shot=1) == [
        "support: sentence 1 has types outside the episode: ['person-other']"
    ]
