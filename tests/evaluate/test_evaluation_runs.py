"""Several runs at once (METHOD.md section 9): Table 3, Table 5 with its verdict, and the
measured difficulty written into the levels' build.json and cards, kept by publish and marked
stale by a rebuild; the README path on the bundled sample's levels."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import SAMPLE_MEDIUM, json_result

from builders.cli.main import cli
from builders.errors import InputError, ScenarioError
from builders.evaluate import EvaluateRequest
from builders.evaluate.runs import ci95, evaluate_runs, read_runs, record_difficulty
from builders.hub.manifest import check_levels
from builders.hub.readme import folder_card
from builders.shift.embedder import Embedder
from builders.shift.specs import EmbeddingSpec
from builders.splits.strategies.quantile import QuantileOptions
from builders.store import Store

MINILM = EmbeddingSpec("all-MiniLM-L6-v2")
LEVEL = "pilener-sample-{}-shift"
#: Share of gold mentions each level's "model" finds: low finds most.
FOUND = {"low": 0.9, "medium": 0.6, "high": 0.3}


@pytest.fixture
def levels(tmp_path: Path, sample_results: dict) -> dict[str, Path]:
    """A copy of the sample build (entropy and max configs, MiniLM) and its store."""
    shutil.copytree(sample_results["out"], tmp_path / "out")
    shutil.copy(sample_results["db"], tmp_path / "s.duckdb")
    return {"out": tmp_path / "out", "db": tmp_path / "s.duckdb", "root": tmp_path}


def predictions(db: Path, where: Path, share: float, seed: int) -> Path:
    """A folder of predictions on the stored benchmark excerpts: each gold mention found with
    probability `share`, plus one false positive a sentence."""
    rng = random.Random(seed)
    where.mkdir(parents=True)
    with Store(db, read_only=True) as store:
        for bench in ("crossner-ai", "mit-movie", "mit-restaurant"):
            rows = store.sentences_with_spans(bench, "test")
            recs = [{"tokenized_text": tokens,
                     "ner": [[a, b - 1, lab] for a, b, lab in spans if rng.random() < share] + [[0, 0, "person"]]}
                    for _, _, tokens, spans in rows]  # fmt: skip
            (where / f"{bench}.json").write_text(json.dumps(recs), encoding="utf-8")
    return where


def runs_file(levels: dict[str, Path], config: str = "entropy") -> Path:
    lines = []
    for lv, share in FOUND.items():
        preds = [
            predictions(levels["db"], levels["root"] / f"p-{lv}-{s}", share, s) for s in (1, 2, 3)
        ]
        lines += ["[[run]]", f'name = "{lv}"', f'training = "{levels["out"] / LEVEL.format(lv)}"',
                  f"predictions = {json.dumps([str(p) for p in preds])}", "seeds = [1, 2, 3]",
                  'model = "synthetic: gold found at a rate"', "steps = 100", f'config = "{config}"', ""]  # fmt: skip
    path = levels["root"] / "runs.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def test_table3_table5_and_the_record(levels: dict[str, Path]) -> None:
    runs = read_runs(runs_file(levels))
    with Store(levels["db"]) as store:
        done = evaluate_runs(
            store, runs, embedder=Embedder.of(MINILM), request=EvaluateRequest((), embedding=MINILM)
        )
    t3 = {r["name"]: r for r in done.table3}
    assert t3["low"]["f1"] > t3["medium"]["f1"] > t3["high"]["f1"] > 0
    assert t3["low"]["ci"] == ci95(t3["low"]["f1_by_seed"]) and len(t3["low"]["f1_by_seed"]) == 3
    [t5] = done.table5
    assert [lv["level"] for lv in t5["levels"]] == ["low", "medium", "high"] and t5["falls"] is True
    build = json.loads((levels["out"] / LEVEL.format("low") / "entropy" / "build.json").read_text())
    assert t5["build"] == build["build"]["id"] and t5["config"] == "entropy"
    first = done.runs[0].seeds[0]  # the level's Familiarity as its build measured it
    for name in ("crossner-ai", "mit-movie", "mit-restaurant"):
        want = build["subset"]["familiarity"]["per_benchmark"][name]["familiarity"]
        assert first.familiarity(name) == pytest.approx(want, abs=1e-6)

    written = record_difficulty(done)
    folders = [levels["out"] / LEVEL.format(lv) for lv in FOUND]
    assert written == [f / "entropy" for f in folders]  # each level's config
    check_levels(folders)  # the manifest follows the rewritten build.json files
    low = json.loads((folders[0] / "entropy" / "build.json").read_text())["measured_difficulty"]
    assert low["f1"] == t3["low"]["f1"] and low["seeds"] == [1, 2, 3] and low["stale"] is False
    card = (folders[0] / "README.md").read_text(encoding="utf-8")
    assert "## Measured difficulty" in card and f"macro F1 of **{100 * low['f1']:.1f}**" in card
    assert "F1 falls from the low to the high label-shift level: **yes**" in card
    assert folder_card(folders[0], "org/x").count("## Measured difficulty") == 1  # publish keeps it


def test_a_rebuild_marks_the_measure_stale(levels: dict[str, Path]) -> None:
    from builders.splits import SplitConfig, build

    runs = read_runs(runs_file(levels))
    with Store(levels["db"]) as store:
        done = evaluate_runs(store, runs, embedder=Embedder.of(MINILM),
                             request=EvaluateRequest((), embedding=MINILM))  # fmt: skip
        record_difficulty(done)
        cfg = SplitConfig(
            "pilener-sample",
            "entropy",
            embedding=MINILM,
            options=QuantileOptions(medium_band=(0.4, 0.6)),
        )
        build(store, cfg, levels["out"])
    rec = json.loads((levels["out"] / LEVEL.format("low") / "entropy" / "build.json").read_text())
    assert (
        rec["measured_difficulty"]["stale"] is True
        and rec["measured_difficulty"]["build"] != rec["build"]["id"]
    )
    assert (
        "> **Stale:** measured on build"
        in (levels["out"] / LEVEL.format("low") / "README.md").read_text()
    )
    with Store(levels["db"]) as store:  # the same build again: the record is its own, not stale
        cfg = SplitConfig(
            "pilener-sample",
            "entropy",
            embedding=MINILM,
            options=QuantileOptions(medium_band=SAMPLE_MEDIUM),
        )
        build(store, cfg, levels["out"])
    rec = json.loads((levels["out"] / LEVEL.format("low") / "entropy" / "build.json").read_text())
    assert rec["measured_difficulty"]["stale"] is False


def test_record_refuses_a_level_rebuilt_since_and_writes_nothing(levels: dict[str, Path]) -> None:
    runs = read_runs(runs_file(levels))
    with Store(levels["db"]) as store:
        done = evaluate_runs(store, runs, embedder=Embedder.of(MINILM),
                             request=EvaluateRequest((), embedding=MINILM))  # fmt: skip
    path = levels["out"] / LEVEL.format("high") / "entropy" / "build.json"
    rec = json.loads(path.read_text())
    rec["build"]["id"] = "0123456789abcdef"
    path.write_text(json.dumps(rec), encoding="utf-8")
    before = {p: p.read_bytes() for p in levels["out"].rglob("*") if p.is_file()}
    with pytest.raises(InputError, match=r"now of build 0123456789abcdef, not \w+ as evaluated"):
        record_difficulty(done)
    assert {p: p.read_bytes() for p in levels["out"].rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("run = 3", "holds \\[\\[run\\]\\] tables and nothing else"),
        ('[[run]]\nname = "a"\ntraining = "x"\npredictions = ["p", "q"]\nseeds = [1]', "2 predictions for seeds \\[1\\]"),
        ('[[run]]\nname = "a"\ntraining = "x"\npredictions = "p"\nlr = 1', "run 1 \\(a\\): unknown key 'lr'. A run takes name"),
        ("run = [1, 2]", "holds \\[\\[run\\]\\] tables and nothing else"),
        ('[[run]]\nname = "a"\ntraining = "x"\npredictions = "p"\nseeds = ["x"]', "whole number"),
        ('[[run]]\nname = "a"\ntraining = "x"\npredictions = []', "predictions are no paths"),
        ('[[run]]\nname = "a"\ntraining = "x"\npredictions = "p"\nseeds = 3', "seeds = 3 is not of its type"),
        ('[[run]]\nname = "a"\ntraining = "x"\npredictions = "p"\nsteps = "many"', "steps = 'many' is not of its type"),
        ('[[run]]\nname = "a"\ntraining = "x"\npredictions = "p"\nmodel = 5', "model = 5 is not of its type"),
        ('[[run]]\nname = "a"\npredictions = "p"', "run 1 \\(a\\): no training"),
        ('[[run]]\nname = "a"\ntraining = "x"\npredictions = "p"\n[[run]]\nname = "a"\ntraining = "y"\npredictions = "q"', "two runs share a name"),
        ("[[run]\n", "not a readable TOML runs file"),
    ],
)  # fmt: skip
def test_bad_runs_files(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "runs.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError, match=message):
        read_runs(tmp_path / "runs.toml")


def test_readme_path_on_the_sample_levels(levels: dict[str, Path]) -> None:
    """`builders evaluate PREDICTIONS --source LEVEL`: the tables, the Markdown and the plot;
    `--runs ... --record`: the levels' cards. `--json` names the runtime that ran."""
    preds = predictions(levels["db"], levels["root"] / "preds", 0.7, 0)
    md, png = levels["root"] / "f1.md", levels["root"] / "f1.png"
    args = ["evaluate", str(preds), "--source", str(levels["out"] / LEVEL.format("low")), "--config",
            "entropy", "--model", "all-MiniLM-L6-v2", "--db", str(levels["db"])]  # fmt: skip
    res = CliRunner().invoke(cli, [*args, "--markdown", str(md), "--plot", str(png)])
    assert res.exit_code == 0, res.output
    for text in (
        "F1 (%) per benchmark",
        "F1 (%) per label in context",
        "seen labels:",
        "Pearson r of Familiarity and F1",
    ):
        assert text in res.output and text in md.read_text(encoding="utf-8")
    assert png.read_bytes()[:4] == b"\x89PNG"
    again = levels["root"] / "again.png"
    assert CliRunner().invoke(cli, [*args, "--plot", str(again), "-q"]).exit_code == 0
    assert again.read_bytes() == png.read_bytes()  # the same bytes
    found = json_result(CliRunner().invoke(cli, [*args, "--json"]).output, "evaluate")
    assert found["backend"] == "torch" and found["requested_backend"] == "auto"
    assert {b["name"] for b in found["benchmarks"]} == {
        "crossner-ai",
        "mit-movie",
        "mit-restaurant",
    }
    res = CliRunner().invoke(cli, ["evaluate", "--runs", str(runs_file(levels)), "--record", "--model",
                                   "all-MiniLM-L6-v2", "--db", str(levels["db"])])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "verdict: F1 falls from level to level" in res.output and ": yes (low" in res.output
    assert (
        "## Measured difficulty" in (levels["out"] / LEVEL.format("high") / "README.md").read_text()
    )


def test_usage_errors(tmp_path: Path) -> None:
    runs = tmp_path / "r.toml"
    runs.write_text("", encoding="utf-8")
    for args, message in (([], "give PREDICTIONS, or --runs FILE"),
                          (["p.json", "--record"], "--record goes with --runs"),
                          (["--runs", str(runs), "--source", "x"], "--source, --config and --plot go with PREDICTIONS"),
                          (["p.json", "--plot", "x.png"], "--plot goes with --source")):  # fmt: skip
        res = CliRunner().invoke(cli, ["evaluate", *args, "--db", str(tmp_path / "s.duckdb")])
        assert res.exit_code == 2 and message in res.output
    assert not (tmp_path / "s.duckdb").exists()


def test_shared_gliner_benchmark_files_score_against_the_column_files(
    shared: Path, tmp_path: Path
) -> None:
    """GLiNER's own benchmark files as predictions on the stored column files: every sentence
    matches (a file may end one sentence short of the column file), MIT Movie's 95 entities
    placed inside words are moved to whole words and counted, and F1 is near 1."""
    names = {
        "crossner-ai": "CrossNER_AI",
        "mit-movie": "mit-movie",
        "mit-restaurant": "mit-restaurant",
    }
    (tmp_path / "p").mkdir()
    for name, folder in names.items():
        shutil.copy(
            shared / "gliner-format" / folder / "test.json", tmp_path / "p" / f"{name}.json"
        )
    with Store(tmp_path / "s.duckdb") as store:
        for name, local in (
            ("crossner-ai", "crossner/ai"),
            ("mit-movie", "mit-movie"),
            ("mit-restaurant", "mit-restaurant"),
        ):
            from builders.store.ingest import ingest

            ingest(store, name, shared / local)
        from builders.evaluate import evaluate

        found = evaluate(store, EvaluateRequest((str(tmp_path / "p"),)))
        for s in found.scores:
            assert s.unmatched == 0 and s.sentences - s.scored in (0, 1)
            assert s.f1 > 0.99
        movie = next(s for s in found.scores if s.name == "mit-movie")
        assert movie.read["char_spans_moved_to_whole_words"] == 95
        assert found.macro_f1 == pytest.approx(sum(s.f1 for s in found.scores) / 3)


def test_record_keeps_how_the_card_names_the_dataset(levels: dict[str, Path]) -> None:
    folders = [levels["out"] / LEVEL.format(lv) for lv in FOUND]
    for f in folders:  # as `build-splits --org myorg` renders them
        (f / "README.md").write_text(folder_card(f, f"myorg/{f.name}"), encoding="utf-8")
    runs = read_runs(runs_file(levels))
    with Store(levels["db"]) as store:
        done = evaluate_runs(
            store, runs, embedder=Embedder.of(MINILM), request=EvaluateRequest((), embedding=MINILM)
        )
    record_difficulty(done)
    card = (folders[0] / "README.md").read_text(encoding="utf-8")
    assert f'load_dataset("myorg/{folders[0].name}"' in card and "## Measured difficulty" in card
    assert card == folder_card(folders[0], f"myorg/{folders[0].name}")


def test_runs_read_paths_from_their_folder_and_table5_needs_alike_levels(
    levels: dict[str, Path], monkeypatch
) -> None:
    path = runs_file(levels)
    text = path.read_text(encoding="utf-8").replace(str(levels["root"]) + "/", "")
    (levels["root"] / "sub").mkdir()
    monkeypatch.chdir(levels["root"] / "sub")  # somewhere else: the paths are the file's
    path.write_text(text, encoding="utf-8")
    runs = read_runs(path)
    assert runs[0].training == str(levels["out"] / LEVEL.format("low"))
    for p in (
        levels["root"] / "p-high-1",
        levels["root"] / "p-high-2",
        levels["root"] / "p-high-3",
    ):
        (p / "mit-movie.json").unlink()  # high scored on fewer benchmarks than low and medium
    with Store(levels["db"]) as store:
        done = evaluate_runs(
            store, runs, embedder=Embedder.of(MINILM), request=EvaluateRequest((), embedding=MINILM)
        )
    assert done.table5 == [] and done.table5 == []  # computed once: one note
    notes = done.to_dict()["notes"]
    assert sum("scored on different benchmarks or sentences; no Table 5" in n for n in notes) == 1


def test_outputs_are_written_together_or_not_at_all(levels: dict[str, Path]) -> None:
    preds = predictions(levels["db"], levels["root"] / "preds", 0.7, 0)
    (levels["root"] / "x.md").write_text("a file", encoding="utf-8")
    md, png = levels["root"] / "z.md", levels["root"] / "x.md" / "p.png"
    res = CliRunner().invoke(cli, ["evaluate", str(preds), "--source", str(levels["out"] / LEVEL.format("low")),
                                   "--config", "entropy", "--model", "all-MiniLM-L6-v2", "--db", str(levels["db"]),
                                   "--markdown", str(md), "--plot", str(png), "-q"])  # fmt: skip
    assert (
        res.exit_code == 1
        and f"{png}: cannot write it" in res.output
        and "Traceback" not in res.output
    )
    assert not md.exists()


def test_record_waits_for_no_one_and_names_no_out(levels: dict[str, Path]) -> None:
    import multiprocessing

    from builders.errors import OutputFolderError

    runs = read_runs(runs_file(levels))
    with Store(levels["db"]) as store:
        done = evaluate_runs(
            store, runs, embedder=Embedder.of(MINILM), request=EvaluateRequest((), embedding=MINILM)
        )
    held, release = multiprocessing.Event(), multiprocessing.Event()
    holder = multiprocessing.get_context("fork").Process(
        target=_hold, args=(levels["out"], held, release)
    )
    holder.start()
    try:
        held.wait(30)
        with pytest.raises(
            OutputFolderError, match=r"is being written by process \d+ \(builders build-splits"
        ) as err:
            record_difficulty(done)
        assert "--out" not in str(err.value) and "wait for it to finish" in str(err.value)
    finally:
        release.set()
        holder.join(30)


def _hold(out: Path, held, release) -> None:  # type: ignore[no-untyped-def]
    from builders.hub.outdir import OutLock

    with OutLock(out, "builders build-splits"):
        held.set()
        release.wait(30)
