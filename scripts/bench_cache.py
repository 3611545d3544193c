"""The per-user embedding cache and `--backend auto`: a second answer in a new process.

    HF_HUB_OFFLINE=1 python scripts/bench_cache.py --model all-mpnet-base-v2 --labels 1614

For each backend asked (default: torch, auto), in a user cache of its own, `familiarity_of`
runs twice, each time in a new Python process: N training labels (as `bench_embed.py` makes
them from the shared data) against the seven zero-shot benchmarks. The first run embeds every
label; the second must embed none and not load the model. Each line gives the wall time of
both runs (process start to exit), their ratio, what each embedded, and the union macro; a
last line gives the largest Familiarity difference of each backend from torch's.
`--backend auto` first decides its runtime (a check run once per model, remembered under
the model cache): run it once before measuring (`--warm-auto`, default on) so that the check
and the export are not counted in the cold run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_embed import base_labels, make_labels

_CHILD = """
import json, sys
from builders import familiarity_of
from builders.labels import benchmarks, verbalise
labels = json.load(open(sys.argv[1]))
evals = {n: [verbalise(t) for t in b.tags] for n, b in benchmarks().items() if b.zero_shot}
r = familiarity_of(labels, evals, model=sys.argv[2], backend=sys.argv[3])
print(json.dumps({"new": r.embedded.new, "shared": r.embedded.shared,
                  "union_macro": r.union_macro, "per_label": r.per_label,
                  "model_loaded": "sentence_transformers" in sys.modules}))
"""


def run_child(labels_file: Path, model: str, backend: str, cache: Path) -> tuple[float, dict]:
    env = {**os.environ, "LABELSHIFT_EMBEDDINGS": str(cache), "HF_HUB_OFFLINE": "1"}
    env.pop("LABELSHIFT_BACKEND", None)
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(labels_file), model, backend],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return time.perf_counter() - start, json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="all-mpnet-base-v2")
    ap.add_argument("--labels", type=int, default=1614)
    ap.add_argument("--backend", default="torch,auto", help="comma list")
    ap.add_argument("--no-warm-auto", dest="warm_auto", action="store_false")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    labels_file = work / "labels.json"
    labels_file.write_text(json.dumps(make_labels(args.labels, base_labels())), encoding="utf-8")
    backends = args.backend.split(",")
    if args.warm_auto and "auto" in backends:
        run_child(labels_file, args.model, "auto", work / "warm-auto")
    results = {}
    for backend in backends:
        (cold_s, cold), (warm_s, warm) = (
            run_child(labels_file, args.model, backend, work / f"cache-{backend}") for _ in range(2)
        )
        results[backend] = warm
        print(
            f"backend={backend} labels={args.labels} cold_s={cold_s:.1f} warm_s={warm_s:.1f} "
            f"ratio={cold_s / warm_s:.1f} cold_new={cold['new']} warm_new={warm['new']} "
            f"warm_from_user_cache={warm['shared']} warm_loaded_model={warm['model_loaded']} "
            f"union_macro={warm['union_macro']:.9f}"
        )
    if "torch" in results:
        ref = results["torch"]["per_label"]
        for backend, res in results.items():
            delta = max(abs(res["per_label"][z] - ref[z]) for z in ref)
            macro = abs(res["union_macro"] - results["torch"]["union_macro"])
            print(
                f"backend={backend} max_abs_delta_vs_torch per_label={delta:.2e} macro={macro:.2e}"
            )


if __name__ == "__main__":
    main()
