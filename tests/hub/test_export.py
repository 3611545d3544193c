"""Export to GLiNER's training json: inclusive ends, negatives, determinism and a round trip."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from builders.cli.main import cli
from builders.errors import BuildersError
from builders.hub.export import export_gliner
from builders.hub.folder import SUBSET_FEATURES, write_parquet

MINILM = "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def folder(sample_build: Path) -> Path:
    """The low-shift subset of the bundled sample, entropy and max configs (built once)."""
    return sample_build / "pilener-sample-low-shift"


def _rows(folder: Path, config: str) -> list[dict]:
    return pq.read_table(folder / config / "train-00000-of-00001.parquet").to_pylist()


@pytest.mark.parametrize("config", ["entropy", "max"])
def test_export_converts_ends_and_keeps_negatives(
    folder: Path, tmp_path: Path, config: str
) -> None:
    out = tmp_path / "train.json"
    n = export_gliner(folder, config, out)
    records = json.loads(out.read_text(encoding="utf-8"))
    rows = _rows(folder, config)
    assert n == len(records) == len(rows) > 0
    for rec, row in zip(records, rows, strict=True):
        assert list(rec) == ["tokenized_text", "ner", "negatives"]
        assert rec["tokenized_text"] == row["tokens"]
        assert rec["ner"] == [[s["start"], s["end"] - 1, s["label"]] for s in row["spans"]]
        assert rec["negatives"] == row["negatives"]
        assert all(0 <= a <= b < len(rec["tokenized_text"]) for a, b, _ in rec["ner"])


def test_export_is_deterministic_and_defaults_to_entropy(folder: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    export_gliner(folder, None, a)
    export_gliner(folder, "entropy", b)
    assert a.read_bytes() == b.read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_round_trip_through_the_gliner_reader(folder: Path, tmp_path: Path) -> None:
    pytest.importorskip("builders.sources.gliner")
    from builders.store import Store
    from builders.store.ingest import ingest

    out = tmp_path / "train.json"
    export_gliner(folder, "max", out)
    rows = _rows(folder, "max")
    with Store(tmp_path / "rt.duckdb") as store:
        ingest(store, "gliner", out, name="rt")
        got = store.con.execute(
            "SELECT s.tokens, list((m.start, m.stop, m.label) ORDER BY m.start, m.stop, m.label) "
            "FROM sentences s JOIN mentions m USING (source, split, idx) "
            "WHERE s.source = 'rt' GROUP BY s.idx, s.tokens ORDER BY s.idx"
        ).fetchall()
        negs = store.con.execute("SELECT count(*) FROM negatives WHERE source = 'rt'").fetchall()[
            0
        ][0]
    assert len(got) == len(rows)
    for (tokens, spans), row in zip(got, rows, strict=True):
        assert list(tokens) == row["tokens"]
        assert [tuple(s) for s in spans] == [
            (s["start"], s["end"], s["label"]) for s in row["spans"]
        ]
    assert negs == sum(len(r["negatives"]) for r in rows)


def test_export_of_a_fewnerd_layout_folder(tmp_path: Path) -> None:
    feats = datasets.Features({k: v for k, v in SUBSET_FEATURES.items() if k != "negatives"})
    (tmp_path / "fewnerd-inter" / "data").mkdir(parents=True)
    table = pa.table(
        {
            "id": ["test/0"],
            "tokens": [["in", "Paris", "today"]],
            "spans": [[{"start": 1, "end": 2, "label": "location-GPE"}]],
        }
    )
    write_parquet(table, tmp_path / "fewnerd-inter/data/test-00000-of-00001.parquet", feats)
    out = tmp_path / "test.json"
    assert export_gliner(tmp_path / "fewnerd-inter", None, out, split="test") == 1
    assert json.loads(out.read_text()) == [
        {
            "tokenized_text": ["in", "Paris", "today"],
            "ner": [[1, 1, "location-GPE"]],
            "negatives": [],
        }
    ]
    with pytest.raises(BuildersError, match=r"no train-\*\.parquet \(splits: test\)"):
        export_gliner(tmp_path / "fewnerd-inter", None, out)


def test_bad_span_is_an_error_not_a_repair(tmp_path: Path) -> None:
    (tmp_path / "x" / "entropy").mkdir(parents=True)
    table = pa.table(
        {
            "id": ["train/0"],
            "tokens": [["a", "b"]],
            "spans": [[{"start": 1, "end": 3, "label": "thing"}]],
            "negatives": [[]],
        }
    )
    write_parquet(table, tmp_path / "x/entropy/train-00000-of-00001.parquet", SUBSET_FEATURES)
    with pytest.raises(BuildersError, match=r"span \[1, 3\) 'thing' is outside its 2 tokens"):
        export_gliner(tmp_path / "x", None, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


def test_unknown_config_and_missing_folder(folder: Path, tmp_path: Path) -> None:
    with pytest.raises(BuildersError, match=r"no config 'maxx'\. Valid: entropy, max"):
        export_gliner(folder, "maxx", tmp_path / "o.json")
    with pytest.raises(BuildersError, match="no such folder"):
        export_gliner(tmp_path / "nope", None, tmp_path / "o.json")


def test_cli_export(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.json"
    res = CliRunner().invoke(
        cli, ["export-gliner", str(folder), "--config", "max", "--out", str(out), "--json"]
    )
    assert res.exit_code == 0, res.output
    summary = json.loads(res.output)
    assert summary["rows"] == len(_rows(folder, "max")) and summary["out"] == str(out)
    res = CliRunner().invoke(
        cli, ["export-gliner", str(folder), "--config", "x", "--out", str(out)]
    )
    assert res.exit_code == 1
    assert "Error: " in res.output and "no config 'x'. Valid: entropy, max" in res.output


def test_cli_help_has_an_example() -> None:
    res = CliRunner().invoke(cli, ["export-gliner", "--help"])
    assert res.exit_code == 0 and "Example: builders export-gliner" in res.output
