"""Familiarity deviation of each embedding runtime from torch, on every shared training corpus.

    HF_HUB_OFFLINE=1 python scripts/familiarity_backends.py --model all-mpnet-base-v2

Ingests the corpora into a temporary store (the bundled Pile-NER sample, the Pile-NER BIO
excerpt, Few-NERD INTER's three parts as one corpus, the six CrossNER corpora), embeds the union
of their labels and the seven benchmarks' labels once per runtime, and reports for each corpus
the largest |delta Familiarity| against raw sentence-transformers `encode` (torch fp32) over the
benchmarks and the union macro. A backend may become the default only if that is <= 1e-3 on
every corpus (the last lines say so per runtime).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_embed import deviation, familiarity_of  # noqa: E402

from builders.labels import union_labels  # noqa: E402
from builders.shift.benchmarks import evaluation_sets  # noqa: E402
from builders.shift.embedder import Embedder  # noqa: E402
from builders.shift.report import LabelTable  # noqa: E402
from builders.shift.runtime import unavailable  # noqa: E402
from builders.store import Store  # noqa: E402
from builders.store.ingest import ingest  # noqa: E402

SHARED = Path(os.environ.get("LABELSHIFT_SHARED_DATA", ROOT.parent / "shared" / "data"))
CORPORA = [
    ("pilener-sample", "pilener-sample", None),
    ("pilener BIO excerpt", "pilener", "pilener/pilener-391xALL-dev.bio"),
    ("fewnerd INTER union", "fewnerd", "fewnerd/inter"),
    *(
        (f"crossner-{d}", f"crossner-{d}", f"crossner/{d}")
        for d in ("ai", "literature", "music", "politics", "science", "conll2003")
    ),
]
RUNTIMES = [("torch", "fp32"), ("onnx", "fp32"), ("openvino", "fp32"), ("openvino", "bf16")]
LIMIT = 1e-3


Runtime = tuple[str, str]  # (backend, precision); ("raw", "fp32") is sentence-transformers'


def load_tables() -> dict[str, LabelTable]:
    """The label table of every corpus whose files exist, ingested into a temporary store
    (a line says which are skipped)."""
    tables: dict[str, LabelTable] = {}
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "s.duckdb") as store:
        for name, source, rel in CORPORA:
            path = None if rel is None else SHARED / rel
            if path is not None and not path.exists():
                print(f"skipping {name}: {path} missing")
                continue
            ingest(store, source, None if path is None else str(path))
            tables[name] = LabelTable.load(store, source)
    return tables


def encode_all(
    model: str, ref_model: Embedder, every: list[str]
) -> tuple[list[Runtime], dict[Runtime, np.ndarray], dict[Runtime, float]]:
    """Vectors and seconds of raw `encode` and of every runtime this machine can run (each
    loaded and warmed up outside the timing; a line says which are skipped). `ref_model` is
    `model` with sentence-transformers' torch fp32, the reference."""
    ref_model.st.encode(every[:8])
    t0 = time.perf_counter()  # sentence-transformers' own default batch size (32)
    vecs = {("raw", "fp32"): ref_model.st.encode(every, normalize_embeddings=True)}
    secs = {("raw", "fp32"): time.perf_counter() - t0}
    why = {r: unavailable(*r) for r in RUNTIMES}
    runtimes = [r for r in RUNTIMES if not why[r]]
    for r in RUNTIMES:
        if why[r]:
            print(f"skipping {r[0]} {r[1]}: {why[r]}")
    for backend, precision in runtimes:
        emb = Embedder(model, device="cpu", backend=backend, precision=precision)
        emb.encode(every[:8])  # load (and export once) outside the timing
        t0 = time.perf_counter()
        vecs[(backend, precision)] = emb.encode(every)
        secs[(backend, precision)] = time.perf_counter() - t0
    return runtimes, vecs, secs


def print_verdicts(
    n_labels: int, runtimes: list[Runtime], secs: dict[Runtime, float], worst: dict[Runtime, float]
) -> None:
    """The encode times, and per runtime whether it may be the default (worst deviation over
    the corpora within LIMIT)."""
    raw_s = secs[("raw", "fp32")]
    print(f"\nencode of all {n_labels:,} labels, CPU ({os.cpu_count()} cores): raw {raw_s:.1f}s")
    for key in runtimes:
        ok = "may be default" if worst[key] <= LIMIT else "may NOT be default"
        print(
            f"{key[0]} {key[1]}: {secs[key]:.1f}s ({raw_s / secs[key]:.2f}x raw), "
            f"max |dF| over corpora {worst[key]:.2e}: {ok} (limit {LIMIT:g})"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="all-mpnet-base-v2")
    args = ap.parse_args()
    tables = load_tables()
    sets = evaluation_sets(None)
    evals = list(union_labels(sets))
    every = list(dict.fromkeys([lab for t in tables.values() for lab in t.labels] + evals))
    index = {lab: i for i, lab in enumerate(every)}
    print(f"{len(tables)} corpora, {len(every):,} distinct labels (with {len(evals)} evaluation)")

    ref_model = Embedder(args.model, device="cpu")
    runtimes, vecs, secs = encode_all(args.model, ref_model, every)

    def fam(key: Runtime, table: LabelTable):  # type: ignore[no-untyped-def]
        rows = [index[lab] for lab in table.labels + evals]
        return familiarity_of(np.asarray(vecs[key])[rows], table, sets, ref_model.model_name)

    worst = dict.fromkeys(runtimes, 0.0)
    head = f"{'corpus':<22} {'labels':>7} {'F raw':>8} " + " ".join(
        f"{b + ' ' + p:>14}" for b, p in runtimes
    )
    print(f"\nmax |delta Familiarity| vs raw encode (benchmarks and union macro), {args.model}")
    print(head)
    for name, table in tables.items():
        ref = fam(("raw", "fp32"), table)
        cells = []
        for key in runtimes:
            d, _ = deviation(fam(key, table), ref)
            worst[key] = max(worst[key], d)
            cells.append(f"{d:14.2e}")
        print(f"{name:<22} {len(table.labels):>7,} {ref.union_macro:8.4f} " + " ".join(cells))
    print_verdicts(len(every), runtimes, secs, worst)


if __name__ == "__main__":
    main()
