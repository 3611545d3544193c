"""The command line: exit codes, exact error text, JSON summaries, help with examples."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers import json_result

from builders.cli.main import all_commands as loaded_commands
from builders.cli.main import cli
from builders.splits.strategies.quantile import QuantileOptions


@pytest.fixture
def run(db: Path):
    runner = CliRunner()

    def _run(*args: str) -> click.testing.Result:
        return runner.invoke(cli, [*args], catch_exceptions=False, env={"LABELSHIFT_DB": str(db)})

    return _run


def all_commands() -> list[tuple[str, click.Command]]:
    return sorted(loaded_commands().items())


@pytest.mark.parametrize(("name", "command"), all_commands())
def test_every_command_has_help_and_an_example(name: str, command: click.Command) -> None:
    assert command.help, name
    assert "Example:" in command.help, name
    res = CliRunner().invoke(cli, [name, "--help"])
    assert res.exit_code == 0
    assert "Example:" in res.output


@pytest.mark.parametrize(("name", "command"), all_commands())
def test_every_command_takes_json_and_db_only_if_it_opens_the_store(
    name: str, command: click.Command
) -> None:
    opts = {o for p in command.params for o in getattr(p, "opts", [])}
    assert {"--json", "--quiet"} <= opts, name
    assert ("--db" in opts) == (name not in {"sources", "publish", "cache"}), name


@pytest.mark.parametrize("name", ["familiarity", "build-splits", "fewnerd-splits", "leakage"])
def test_every_command_that_embeds_takes_backend_and_precision(name: str) -> None:
    opts = {o for p in loaded_commands()[name].params for o in getattr(p, "opts", [])}
    assert {"--backend", "--precision", "--model"} <= opts, name


def test_backend_precision_pair_is_checked_before_any_work(run) -> None:
    res = run("familiarity", "--source", "nothing-here", "--backend", "onnx", "--precision", "bf16")
    assert res.exit_code == 1
    assert "--backend onnx runs --precision fp32, not bf16" in res.output


def test_sources_json(run) -> None:
    res = run("sources", "--json")
    assert res.exit_code == 0
    rows = json_result(res.output)
    names = {r["source"] for r in rows}
    assert {
        "pilener",
        "nuner",
        "gliner",
        "columns",
        "hf",
        "crossner-ai",
        "mit-movie",
        "fewnerd",
    } <= names
    assert next(r for r in rows if r["source"] == "nuner")["origin"] == "numind/NuNER"


def test_ingest_then_labels_and_stats(run, data_dir: Path) -> None:
    path = str(data_dir / "mit-movie/engtest.bio")
    res = run("ingest", "mit-movie", "--path", path, "--json", "-q")
    assert res.exit_code == 0, res.output
    summary = json_result(res.output)
    assert (summary["status"], summary["sentences"], summary["mentions"], summary["types"]) == (
        "ingested",
        3,
        5,
        5,
    )
    again = json_result(run("ingest", "mit-movie", "--path", path, "--json", "-q").output)
    assert again["status"] == "unchanged"
    labels = json_result(run("labels", "mit-movie", "--json").output)
    # one mention each: ties are ordered by label text
    assert [row["label"] for row in labels] == ["actor", "average ratings", "genre", "plot", "year"]
    raws = {"actor": "ACTOR", "average ratings": "RATINGS_AVERAGE", "genre": "GENRE"}
    raws |= {"plot": "PLOT", "year": "YEAR"}
    assert labels == [
        {"label": lab, "raw": [raws[lab]], "mentions": 1, "sentences": 1} for lab in raws
    ]
    shown = run("labels", "mit-movie").output
    assert "RATINGS_AVERAGE -> average ratings" in shown and "YEAR" not in shown
    stats = json_result(run("stats", "--json").output)
    assert [(s["source"], s["sentences"], s["mentions"], s["types"]) for s in stats["sources"]] == [
        ("mit-movie", 3, 5, 5)
    ]
    top = run("labels", "mit-movie", "--top", "2")
    assert top.exit_code == 0
    assert "average ratings" in top.output and "genre" not in top.output


def test_bad_input_exits_1_with_file_and_line(run, tmp_path: Path) -> None:
    bad = tmp_path / "test.txt"
    bad.write_text("EU\tB-ORG\nrejects\tQ-X\n\n", encoding="utf-8")
    res = run("ingest", "crossner-ai", "--path", str(bad), "-q")
    assert res.exit_code == 1
    assert res.output == f"Error: {bad}:2: tag is not O, B-<type> or I-<type>: 'Q-X'\n"


def test_out_of_memory_names_the_variable_and_keeps_the_store(
    run, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB's out-of-memory error is a clean error naming LABELSHIFT_MEMORY_LIMIT; the
    ingest it stopped leaves nothing behind (the same ingest then runs as a first one)."""
    path = str(data_dir / "crossner" / "ai-test.txt")
    # DuckDB opens a store within 1 MB and runs out during the ingest (a version that failed
    # at connect would give the store's own "cannot open the store within" error instead)
    monkeypatch.setenv("LABELSHIFT_MEMORY_LIMIT", "1MB")
    res = run("ingest", "columns", "--path", path, "--name", "t", "-q")
    assert res.exit_code == 1
    assert res.output.startswith(
        "Error: DuckDB ran out of its memory limit (1MB): set LABELSHIFT_MEMORY_LIMIT higher"
    )
    monkeypatch.delenv("LABELSHIFT_MEMORY_LIMIT")
    res = run("ingest", "columns", "--path", path, "--name", "t", "--json", "-q")
    assert json_result(res.output)["status"] == "ingested"


def test_stats_marks_and_drops_stale_embedding_keys(run, data_dir: Path, db: Path) -> None:
    """Vectors cached under an older version's key (no device, no rows) are never read again:
    `stats` marks them, `--drop-embeddings KEY` forgets them; an unknown key is refused."""
    import numpy as np
    import pyarrow as pa

    from builders.store import Store

    run("ingest", "mit-movie", "--path", str(data_dir / "mit-movie/engtest.bio"), "-q")
    old, new = "m|torch|fp32|abc123", "m|torch|fp32|cpu|32|abc123"
    with Store(db) as store:
        for key in (old, new):
            store.add_vectors(key, pa.array(["a", "b"]), np.eye(2, dtype=np.float32))
    lines = [ln for ln in run("stats").output.splitlines() if ln.startswith("embedding cache")]
    assert lines == [  # by key
        f"embedding cache: {old}: 2 labels (stale: an older version's key; "
        "--drop-embeddings KEY frees it)",
        f"embedding cache: {new}: 2 labels",
    ]
    res = run("stats", "--drop-embeddings", old, "--json", "-q")
    assert res.exit_code == 0, res.output
    assert json_result(res.output)["embeddings"] == {new: 2}
    bad = run("stats", "--drop-embeddings", old)
    assert bad.exit_code == 2 and f"no cached vectors under {old!r}" in bad.output


def test_unknown_source_message(run) -> None:
    res = run("ingest", "nunr", "-q")
    assert res.exit_code == 1
    assert res.output.startswith("Error: unknown source 'nunr'. Valid: ")
    assert "nuner" in res.output


def test_repair_flag_counts(run, data_dir: Path) -> None:
    path = data_dir / "pilener-bio/pilener-391xALL-dev.excerpt.bio"
    strict = run("ingest", "columns", "--path", str(path), "-o", "sep=\t", "-q")
    assert strict.exit_code == 1 and "use repair to read it as B-" in strict.output
    fixed = run(
        "ingest", "columns", "--path", str(path), "-o", "sep=\t", "--repair", "--json", "-q"
    )
    assert fixed.exit_code == 0, fixed.output
    # the file's name says `dev`: that is its split
    assert json_result(fixed.output)["splits"]["dev"]["report"]["counts"] == {"repaired_tags": 1}


def test_labels_on_missing_source(run, data_dir: Path) -> None:
    run("ingest", "mit-movie", "--path", str(data_dir / "mit-movie/engtest.bio"), "-q")
    res = run("labels", "pilener")
    assert res.exit_code == 1
    assert "source 'pilener' is not in" in res.output and "(it holds: mit-movie)" in res.output
    assert "ingest it first, `builders ingest pilener --db " in res.output


def test_stats_without_store(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["stats", "--db", str(tmp_path / "none.duckdb")])
    assert res.exit_code == 1
    assert "no store here" in res.output


def test_recorded_command_names_every_parameter_not_at_its_default() -> None:
    """What a card's Rebuild section shows: options by their own names, nothing local."""
    from builders.splits import SplitConfig

    method = (
        "--model all-mpnet-base-v2 --k 1000 --temperature 0.01 --weighting zipf --seed 0 "
        "--protocol ours"
    )
    assert SplitConfig("nuner").command_line() == (
        f"build-splits --source nuner --strategy entropy {method}"
    )
    cfg = SplitConfig(
        "my corpus",
        "max",
        levels=("low", "high"),
        benchmarks=("crossner-ai", "file:my labels.txt"),
        options=QuantileOptions(medium_band=(0.4, 0.6), low_quantile=0.9, match="labels"),
        leakage=False,
        keep_misc=True,
    )
    assert cfg.command_line() == (
        "build-splits --source 'my corpus' --strategy max --levels low,high "
        "--benchmarks 'crossner-ai,file:my labels.txt' --model all-mpnet-base-v2 --k 1000 "
        "--temperature 0.01 --weighting zipf --low-quantile 0.9 --medium-band 0.4 0.6 "
        "--keep-misc --seed 0 --match labels --protocol ours --no-leakage"
    )
    # the command line parses back to the same config
    import shlex

    from builders.cli.splits import build_splits

    ctx = build_splits.make_context("build-splits", shlex.split(cfg.command_line())[1:])
    local = {"path", "out", "org", "db", "as_json", "quiet"}
    assert SplitConfig.from_dict({k: v for k, v in ctx.params.items() if k not in local}) == cfg


def _tree(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}


_STRATEGY_ARGS = {
    "familiarity": ["--strategy", "familiarity"],
    "entropy": ["--strategy", "entropy", "--medium-band", "0.45", "0.55"],
    "max": ["--strategy", "max", "--low-quantile", "0.95", "--medium-band", "0.4", "0.6",
            "--high-quantile", "0.1", "--match", "mentions", "--min-labels", "1"],
}  # fmt: skip


@pytest.mark.parametrize("args", list(_STRATEGY_ARGS.values()), ids=list(_STRATEGY_ARGS))
def test_the_cards_rebuild_command_gives_the_same_bytes(
    sample_results: dict, tmp_path: Path, args: list[str]
) -> None:
    """The command a card's Rebuild section (and build.json) records, run in a fresh folder,
    writes every file byte for byte: an option it spells at its default (familiarity's
    `--max-label-share 0.3`) records what the build that left it there recorded."""
    import shlex
    import shutil

    from builders.cli.main import build_splits

    db = tmp_path / "s.duckdb"  # the sample and its labels' vectors stored
    shutil.copy(sample_results["db"], db)

    def run(argv: list[str], out: Path) -> dict[str, bytes]:
        res = CliRunner().invoke(build_splits, [*argv, "--db", str(db), "--out", str(out), "-q"])
        assert res.exit_code == 0, res.output
        return _tree(out)

    first = run(["--source", "pilener-sample", "--model", "all-MiniLM-L6-v2", *args],
                tmp_path / "first" / "out")  # fmt: skip
    folder = tmp_path / "first" / "out" / "pilener-sample-low-shift"
    [command] = [ln for ln in (folder / "README.md").read_text().splitlines()
                 if ln.startswith("build-splits ")]  # fmt: skip
    config = next(p for p in folder.iterdir() if p.is_dir())
    assert json.loads((config / "build.json").read_text())["command"] == command
    again = run(shlex.split(command)[1:], tmp_path / "again" / "out")
    assert sorted(again) == sorted(first)
    assert [name for name in first if first[name] != again[name]] == []


def test_build_splits_and_familiarity_commands(db: Path, tmp_path: Path) -> None:
    from builders.cli.main import build_splits

    runner = CliRunner()
    out = tmp_path / "out"
    args = ["--source", "pilener-sample", "--model", "all-MiniLM-L6-v2", "--db", str(db)]
    res = runner.invoke(build_splits, [*args, "--strategy", "max", "--out", str(out), "-q"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert (
        "pilener-sample: label-shift subsets (max, pilener profile, all-MiniLM-L6-v2, K=1000)"
        in lines[0]
    )
    rows = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    assert rows == ["full", "low", "medium", "high"]
    assert sorted(p.name for p in out.iterdir()) == [
        ".labelshift-manifest.json",  # what the build wrote, checked on read (hub.manifest)
        "pilener-sample-high-shift",
        "pilener-sample-low-shift",
        "pilener-sample-medium-shift",
    ]
    # the same through the group, as JSON, a second time: embeddings come from the cache
    res = runner.invoke(
        cli, ["build-splits", *args, "--strategy", "max", "--out", str(out), "--json", "-q"]
    )
    assert res.exit_code == 0, res.output
    [summary] = json_result(res.output)
    assert summary["embedded_new"] == 0
    assert [s["level"] for s in summary["subsets"]] == ["low", "medium", "high"]
    fam = runner.invoke(
        cli, ["familiarity", *args, "--benchmarks", "crossner-ai,mit-movie", "--json"]
    )
    assert fam.exit_code == 0, fam.output
    report = json_result(fam.stdout)  # notes (a scan read from its cache) go to stderr
    assert list(report["per_benchmark"]) == ["crossner-ai", "mit-movie"]
    # the runtime that embedded, not `auto` (the tests' LABELSHIFT_BACKEND=torch picks torch)
    assert (report["backend"], report["requested_backend"]) == ("torch", "auto")
    full = summary["full"]["familiarity"]["per_benchmark"]
    # F(z) does not depend on which other benchmarks are chosen (up to float32 matmul rounding,
    # which varies with the shape of the product)
    for b in ("crossner-ai", "mit-movie"):
        got, want = report["per_benchmark"][b], full[b]
        assert got["familiarity"] == pytest.approx(want["familiarity"], abs=1e-6)
    bad = runner.invoke(build_splits, [*args, "--levels", "easy"])
    assert bad.exit_code == 1
    assert bad.output == "Error: unknown level 'easy'. Valid: low, medium, high\n"


@pytest.mark.parametrize("command", ["familiarity", "build-splits"])
def test_empty_benchmarks_is_a_clean_error(db: Path, command: str) -> None:
    res = CliRunner().invoke(
        cli, [command, "--source", "pilener-sample", "--benchmarks", "", "--db", str(db), "-q"]
    )
    assert res.exit_code == 2
    assert "Invalid value for '--benchmarks': name at least one benchmark, or `all`" in res.output
    assert "Traceback" not in res.output


def test_an_unexpected_error_is_a_traceback_and_a_request_to_report_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the library's own errors become one clean line: a bug is never dressed up as a
    user's mistake."""
    from builders.store import Store

    def broken(self: Store) -> None:
        raise ValueError("an internal invariant failed")

    monkeypatch.setattr(Store, "stats", broken)
    with Store(tmp_path / "s.duckdb"):
        pass
    res = CliRunner().invoke(cli, ["stats", "--db", str(tmp_path / "s.duckdb"), "--no-check"])
    assert res.exit_code == 1
    assert "Traceback" in res.stderr and "ValueError: an internal invariant failed" in res.stderr
    assert "unexpected ValueError (a bug in builders" in res.stderr
    assert "please report it" in res.stderr
