"""`leakage`, and any benchmark in `familiarity`: a stored source, a label file and the Python
entry point give the packaged path's numbers on the same labels."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from helpers import DATA, json_result

from builders import familiarity_of
from builders.cli.main import cli
from builders.store import Store

MINILM = "all-MiniLM-L6-v2"


def _run(db: Path, *args: str) -> dict:
    res = CliRunner().invoke(cli, [*args, "--db", str(db)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json_result(res.output) if "--json" in args else {"output": res.output}


def _familiarity(db: Path, benchmarks: str, *extra: str) -> dict:
    return _run(
        db, "familiarity", "--source", "pilener-sample", "--benchmarks", benchmarks,
        "--model", MINILM, "--no-leakage", "--json", "-q", *extra,
    )  # fmt: skip


def _numbers(rep: dict, name: str) -> tuple:
    b = rep["per_benchmark"][name]
    per_label = {p["label"]: p["familiarity"] for p in rep["per_label"]}
    s = b["summary"]
    return (b["familiarity"], b["overlap"], s["mean"], s["std"], s["vb_0.5"], per_label)


def _same(a: tuple, b: tuple) -> None:
    assert a[:5] == pytest.approx(b[:5], abs=1e-6)
    assert a[5] == pytest.approx(b[5], abs=1e-6)


def _same_as_packaged(db: Path, tmp_path: Path, stored: str) -> None:
    """`stored` (a stored source) has the packaged crossner-ai's labels; so has a label file."""
    want = _familiarity(db, "crossner-ai")
    labels = want["per_benchmark"]["crossner-ai"]["labels"]
    path = tmp_path / "labels.txt"
    path.write_text("\n".join(labels) + "\n", encoding="utf-8")
    by_file = _familiarity(db, f"file:{path}")
    by_store = _familiarity(db, stored)
    assert sorted(by_store["per_benchmark"][stored]["labels"]) == sorted(labels)
    _same(_numbers(by_file, path.parent.name), _numbers(want, "crossner-ai"))
    _same(_numbers(by_store, stored), _numbers(want, "crossner-ai"))
    with Store(db) as store:
        counts = {lab: m for lab, m, _ in store.label_counts("pilener-sample")}
    py = familiarity_of(counts, {"x": labels}, model=MINILM, cache=db).to_dict()
    _same(_numbers(py, "x"), _numbers(want, "crossner-ai"))
    assert py["per_benchmark"]["x"]["summary"] == pytest.approx(
        want["per_benchmark"]["crossner-ai"]["summary"], abs=1e-6
    )


def test_stored_source_file_and_python_equal_the_packaged_path(
    shared: Path, tmp_path: Path
) -> None:
    db = tmp_path / "s.duckdb"
    _run(db, "ingest", "pilener-sample", "-q")
    _run(db, "ingest", "crossner-ai", "--path", str(shared / "crossner" / "ai"), "-q")
    _same_as_packaged(db, tmp_path, "crossner-ai:test")


def test_a_user_benchmark_by_every_route(db: Path, tmp_path: Path) -> None:
    """Without the shared data: the excerpt stored as a user source (`mine`), its labels in a
    file, and in Python, all give the same numbers."""
    _run(db, "ingest", "pilener-sample", "-q")
    _run(
        db,
        "ingest",
        "columns",
        "--path",
        str(DATA / "crossner" / "ai-test.txt"),
        "--name",
        "mine",
        "-q",
    )
    by_store = _familiarity(db, "mine")
    labels = by_store["per_benchmark"]["mine"]["labels"]
    assert labels == ["algorithm", "conference"]
    (tmp_path / "mine.json").write_text(json.dumps(labels), encoding="utf-8")
    by_file = _familiarity(db, f"file:{tmp_path / 'mine.json'}")
    _same(_numbers(by_file, "mine"), _numbers(by_store, "mine"))
    assert by_file["benchmarks"] == [
        {
            "name": "mine",
            "kind": "file",
            "origin": str(tmp_path / "mine.json"),
            "sentences": None,
            "labels": labels,
        }
    ]
    with Store(db) as store:
        counts = {lab: m for lab, m, _ in store.label_counts("pilener-sample")}
    _same(
        _numbers(familiarity_of(counts, {"mine": labels}, model=MINILM).to_dict(), "mine"),
        _numbers(by_store, "mine"),
    )


def test_leakage_command(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    bench = (DATA / "crossner" / "ai-test.txt").read_text(encoding="utf-8")
    (tmp_path / "train.bio").write_text(bench.split("\n\n")[1] + "\n\nParis\tB-city\n", "utf-8")
    _run(db, "ingest", "crossner-ai", "--path", str(DATA / "crossner" / "ai-test.txt"), "-q")
    _run(db, "ingest", "columns", "--path", "train.bio", "--name", "t", "-q")
    args = (
        "leakage",
        "--source",
        "t",
        "--benchmarks",
        "crossner-ai,fewnerd-inter",
        "--model",
        MINILM,
    )
    before = sorted(p.name for p in tmp_path.iterdir())
    assert _run(db, *args, "--json", "-q")["pairs_file"] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written unasked
    rep = _run(db, *args, "--pairs", "leakage-t.parquet", "--json", "-q")
    ai = rep["per_benchmark"]["crossner-ai"]
    assert (ai["sentences"], ai["exact_sentences"], ai["ngram_sentences"]) == (3, 1, 1)
    assert (ai["mentions"], ai["seen_mentions"], ai["seen_familiar_mentions"]) == (8, 3, 3)
    assert rep["union"] == ai and rep["n"] == 13 and rep["familiar_threshold"] == 0.8
    assert list(rep["not_scanned"]) == ["fewnerd-inter"]
    assert rep["pairs_file"] == "leakage-t.parquet" and rep["pairs"] == 1
    pairs = pq.read_table(tmp_path / "leakage-t.parquet").to_pylist()
    assert pairs == [
        {
            "benchmark": "crossner-ai",
            "benchmark_sentence_id": "crossner-ai/test/1",
            "training_sentence_id": "t/train/0",
            "exact": True,
            "shared_ngrams": 9,
            "benchmark_text": pairs[0]["training_text"],
            "training_text": pairs[0]["benchmark_text"],
        }
    ]
    out = _run(db, *args, "--pairs", "p.parquet", "--ngram", "30")["output"]
    assert "crossner-ai" in out and "1 (33.3%)" in out and "0/0" in out
    assert (tmp_path / "p.parquet").exists()


def test_familiarity_prints_leakage_unless_asked_not_to(db: Path) -> None:
    _run(db, "ingest", "crossner-ai", "--path", str(DATA / "crossner" / "ai-test.txt"), "-q")
    args = (
        "familiarity",
        "--source",
        "crossner-ai",
        "--benchmarks",
        "crossner-ai",
        "--model",
        MINILM,
    )
    out = _run(db, *args, "-q")["output"]
    assert "Familiarity of crossner-ai" in out and "Leakage of crossner-ai" in out
    assert "3 (100.0%)" in out  # a benchmark leaks into itself
    assert "Leakage" not in _run(db, *args, "-q", "--no-leakage")["output"]
    rep = _run(db, *args, "--json", "-q")
    assert rep["leakage"]["union"]["exact_sentences"] == 3
    assert _run(db, *args, "--json", "-q", "--no-leakage")["leakage"] is None


def test_bad_benchmark_is_a_clean_error(db: Path) -> None:
    res = CliRunner().invoke(
        cli,
        [
            "familiarity",
            "--source",
            "pilener-sample",
            "--benchmarks",
            "nope",
            "--db",
            str(db),
            "-q",
        ],
    )
    assert res.exit_code == 1
    assert res.output.startswith("Error: unknown benchmark 'nope'. Tried: a packaged name")


def test_benchmarks_not_scanned_for_one_reason_are_one_note(capsys) -> None:
    from builders.cli.leakage import print_leakage

    why = "{} is not in the store and has no local copy: run `builders ingest {} --path ...`"
    rep = {
        "per_benchmark": {},
        "union": {},
        "not_scanned": {
            "crossner-ai": why.format("crossner-ai", "crossner-ai"),
            "mit-movie": why.format("mit-movie", "mit-movie"),
            "mine": "label-file benchmark (labels.txt): labels only, no sentences",
            "ai": why.format("crossner-ai", "crossner-ai"),  # its name inside another's
        },
    }
    print_leakage("t", rep)
    err = capsys.readouterr().err
    assert "<name>" not in err  # every benchmark named, no placeholder
    lines = err.strip().splitlines()
    assert lines == [
        "leakage: crossner-ai not scanned: crossner-ai is not in the store and has no local "
        "copy: run `builders ingest crossner-ai --path ...`; the same for mit-movie",
        "leakage: mine not scanned: label-file benchmark (labels.txt): labels only, no sentences",
        "leakage: ai not scanned: crossner-ai is not in the store and has no local copy: run "
        "`builders ingest crossner-ai --path ...`",
    ]
