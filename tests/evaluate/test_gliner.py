"""GLiNER in the loop (run in .venv-gliner: `make test-gliner`; skipped where GLiNER is not
installed): a tiny GLiNER trained offline from the packaged MiniLM by scripts/gliner/train.py,
`builders predict` over ten test sentences of each of the seven benchmarks, and the toolkit's
F1 on those predictions equal to GLiNER's own `evaluate` on the same sentences."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import DATA, ROOT

from builders.cli.main import cli
from builders.evaluate.scoring import prediction_files, score_files
from builders.hub.export import ExportRequest, export
from builders.labels import ZERO_SHOT
from builders.shift.models import resolve_model
from builders.store import Store
from builders.store.ingest import ingest

gliner = pytest.importorskip("gliner")
EXCERPTS = {
    "crossner-ai": "crossner-ai-test.txt",
    **{
        f"crossner-{d}": f"crossner-{d}-test.txt"
        for d in ("literature", "music", "politics", "science")
    },
    "mit-movie": "mit-movie-engtest.bio",
    "mit-restaurant": "mit-restaurant-restauranttest.bio",
}
#: Low enough that a model trained for a few steps predicts spans, right and wrong.
THRESHOLD = 0.05


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gliner")
    db = root / "s.duckdb"
    with Store(db) as store:
        for name, file in EXCERPTS.items():
            ingest(store, name, DATA / "evaluate" / file)
        ingest(store, "pilener-sample")
    export(
        ExportRequest(root / "train.json", source="pilener-sample"),
        lambda: Store(db, read_only=True),
    )
    backbone = resolve_model("all-MiniLM-L6-v2").path_or_name
    train = [sys.executable, str(ROOT / "scripts" / "gliner" / "train.py"), "--train", str(root / "train.json"),
             "--backbone", str(backbone), "--out", str(root / "model"), "--steps", "4", "--batch-size", "2",
             "--max-len", "64", "--seed", "1", "--threads", "1"]  # fmt: skip
    subprocess.run(train, check=True, capture_output=True)
    return {"db": db, "model": root / "model", "root": root}


def test_toolkit_f1_equals_gliners_evaluate(trained: dict[str, Path]) -> None:
    preds = trained["root"] / "preds"
    res = CliRunner().invoke(cli, ["predict", str(trained["model"]), "--out", str(preds), "--threshold",
                                   str(THRESHOLD), "--limit", "10", "--db", str(trained["db"]), "-q"])  # fmt: skip
    assert res.exit_code == 0, res.output
    manifest = json.loads((preds / "manifest.json").read_text(encoding="utf-8"))
    assert set(manifest["benchmarks"]) == set(ZERO_SHOT) and manifest["threshold"] == THRESHOLD
    assert sum(b["predicted"] for b in manifest["benchmarks"].values()) > 0
    model = gliner.GLiNER.from_pretrained(str(trained["model"]), local_files_only=True)
    with Store(trained["db"], read_only=True) as store:
        scores = {s.name: s for s in score_files(store, prediction_files([str(preds)]))}
        for name in ZERO_SHOT:
            rows = store.sentences_with_spans(name, "test")[:10]
            assert scores[name].scored == 10
            test = [
                {"tokenized_text": t, "ner": [[a, b - 1, lab] for a, b, lab in spans]}
                for _, _, t, spans in rows
            ]
            labels = manifest["benchmarks"][name]["labels"]
            _, f1 = model.evaluate(
                test, flat_ner=True, threshold=THRESHOLD, batch_size=8, entity_types=labels
            )
            assert scores[name].f1 == pytest.approx(float(f1), abs=1e-12), name
    assert any(s.f1 for s in scores.values())  # right and wrong spans, not an empty match
