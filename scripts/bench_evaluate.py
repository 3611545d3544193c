#!/usr/bin/env python
"""Time `builders evaluate`'s scoring beside GLiNER's own `compute_prf` on the same predictions.

    python scripts/bench_evaluate.py PREDICTIONS --db STORE [--source TRAINING] [--repeat 5]
        [--gliner-python /path/to/venv-with-gliner/bin/python]

PREDICTIONS is what `builders evaluate` takes (a folder of `crossner-ai.json`, ...); the store
holds the benchmarks' test sets. Phases, each the median of `--repeat` runs in this process:

- `read + match + score`: the files read, matched to the stored sentences and scored
  (`score_files`), as the command does;
- `in context`: the whole `evaluate()` with `--source` (its label vectors cached by a first
  run), the per-label Familiarity and the views included;
- `GLiNER compute_prf`: GLiNER's `BaseEvaluator.compute_prf` on the matched gold and
  predictions, in GLiNER's per-sentence `[label, (start, end)]` lists, one call per benchmark
  (the call alone: GLiNER's reading and matching are not counted). With `--gliner-python` it
  runs in that interpreter (a venv with `gliner` installed); otherwise the transcription in
  `tests/gliner_reference.py`. Its F1 must equal the toolkit's, which is checked.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GLINER_SIDE = """
import json, sys, time
try:
    from gliner.evaluation.evaluator import BaseEvaluator
    compute_prf, which = BaseEvaluator.compute_prf, "gliner"
except ImportError:
    sys.path.insert(0, sys.argv[2])
    from gliner_reference import compute_prf
    which = "transcription"
data = json.load(open(sys.argv[1]))
times, f1 = [], {}
for _ in range(int(sys.argv[3])):
    start = time.perf_counter()
    for name, (y_true, y_pred) in data.items():
        y_true = [[[lab, tuple(span)] for lab, span in s] for s in y_true]
        y_pred = [[[lab, tuple(span)] for lab, span in s] for s in y_pred]
        f1[name] = float(compute_prf(y_true, y_pred)["f_score"])
    times.append(time.perf_counter() - start)
print(json.dumps({"which": which, "times": times, "f1": f1}))
"""


def median_time(fn, repeat: int):  # type: ignore[no-untyped-def]
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def gliner_lists(score) -> tuple[list, list]:  # type: ignore[no-untyped-def]
    """A score's sets as GLiNER's per-sentence lists (end inclusive), sentences in gold order."""
    gold, pred = score.sets
    rows = sorted({g[0] for g in gold} | {p[0] for p in pred})
    at = {r: i for i, r in enumerate(rows)}
    y_true: list[list] = [[] for _ in rows]
    y_pred: list[list] = [[] for _ in rows]
    for sets, out in ((gold, y_true), (pred, y_pred)):
        for row, a, b, lab in sorted(sets):
            out[at[row]].append([lab, [a, b - 1]])
    return y_true, y_pred


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("predictions")
    ap.add_argument("--db", required=True)
    ap.add_argument("--source", help="training data, for the `in context` phase")
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--gliner-python", help="an interpreter with gliner installed")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from builders.evaluate import EvaluateRequest, evaluate
    from builders.evaluate.scoring import prediction_files, score_files
    from builders.shift.specs import EmbeddingSpec
    from builders.store import Store

    with Store(args.db, shared=True) as store:  # new label vectors held, not written
        files = prediction_files([args.predictions])
        t_score, scores = median_time(lambda: score_files(store, files), args.repeat)
        t_context = None
        if args.source:
            req = EvaluateRequest(
                (args.predictions,), args.source, embedding=EmbeddingSpec(args.model)
            )
            evaluate(store, req)  # the label vectors cached
            t_context, _ = median_time(lambda: evaluate(store, req), args.repeat)
    sentences = sum(s.scored or 0 for s in scores)
    data = {s.name: gliner_lists(s) for s in scores}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(data, fh)
    python = args.gliner_python or sys.executable
    side = [python, "-c", GLINER_SIDE, fh.name, str(ROOT / "tests"), str(args.repeat)]
    found = json.loads(subprocess.run(side, check=True, capture_output=True, text=True).stdout)
    Path(fh.name).unlink()
    for s in scores:
        assert found["f1"][s.name] == s.f1, (s.name, found["f1"][s.name], s.f1)
    t_gliner = statistics.median(found["times"])
    print(
        f"{len(scores)} benchmarks, {sentences:,} sentences scored; F1 equal to GLiNER's on every benchmark"
    )
    print(f"read + match + score (toolkit):   {t_score:8.3f} s")
    if t_context is not None:
        print(f"in context, vectors cached:       {t_context:8.3f} s")
    print(
        f"GLiNER compute_prf ({found['which']}): {t_gliner:8.3f} s   (toolkit / GLiNER: {t_score / t_gliner:.2f}x)"
    )


if __name__ == "__main__":
    main()
