"""Benchmark label embedding: each backend x precision on a device against raw `encode`.

    HF_HUB_OFFLINE=1 python scripts/bench_embed.py --backend onnx --precision fp32 \\
        --model all-mpnet-base-v2 --labels 2000
    HF_HUB_OFFLINE=1 python scripts/bench_embed.py --backend torch,openvino --precision fp32,bf16

For every backend x precision asked (combinations a backend or this machine cannot run are
skipped, with a line saying why), it times the toolkit's `Embedder.encode` (one tokenizer call,
length buckets, the runtime) against the raw sentence-transformers `encode` (torch fp32, padded
batches) on the same N labels and device, interleaved and best of --repeat. Raw `encode` runs
at each of several batch sizes (its own default, 32, and larger ones: --raw-batch-size), all
warmed up first, and the fastest is the baseline; that makes raw timing the longest part of a
run (four sizes x --repeat). It then measures the Familiarity of a
corpus (default: the bundled Pile-NER sample) against the seven zero-shot benchmarks with the
backend's vectors and with raw `encode`'s: max_abs_delta_familiarity is the largest difference
over the benchmarks and the union macro (per-label F(z) differences are printed too).

Labels come from the shared data (NuNER top tags, Pile-NER labels, Few-NERD types) when present,
suffixed deterministically (" 2", " 3", ...) until there are N distinct strings. The last lines
are one per combination:
    backend=B precision=P device=D ratio_vs_raw=R max_abs_delta_familiarity=X
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from builders.defaults import BACKENDS, PRECISIONS
from builders.labels import union_labels
from builders.shift.benchmarks import evaluation_sets
from builders.shift.embedder import Embedder, cosine_clipped
from builders.shift.report import FamiliarityReport, LabelTable, familiarity_report
from builders.shift.runtime import unavailable
from builders.shift.specs import SUPPORTED

SHARED = Path(
    os.environ.get("LABELSHIFT_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared/data")
)
#: Raw `encode` batch sizes tried (the fastest is the baseline): sentence-transformers' own
#: default (32) and larger ones, so that no ratio rests on a slow baseline.
RAW_BATCHES = {"cpu": "32,64,128,256", "accelerator": "32,256,1024,4096"}
FALLBACK = ["person", "location", "organization", "date", "event", "product", "disease"]
Combo = tuple[str, str]  # (backend, precision)


def base_labels(shared: Path = SHARED) -> list[str]:
    """Distinct real label texts, in a fixed order."""
    found: list[str] = []
    nuner = shared / "nuner" / "top_tag_names.json"
    if nuner.is_file():
        found += json.loads(nuner.read_text(encoding="utf-8"))
    pilener = shared / "pilener" / "pilener-391-labels.txt"
    if pilener.is_file():
        found += pilener.read_text(encoding="utf-8").splitlines()
    fewnerd = shared / "fewnerd" / "labels.txt"
    if fewnerd.is_file():
        found += [t.replace("-", " ") for t in fewnerd.read_text(encoding="utf-8").split()]
    labels = list(dict.fromkeys(s.strip() for s in found if s.strip()))
    return labels or FALLBACK


def make_labels(n: int, base: list[str]) -> list[str]:
    """N distinct strings: the base labels, then the base labels suffixed with 2, 3, ..."""
    out: list[str] = []
    round_ = 1
    while len(out) < n:
        out += [b if round_ == 1 else f"{b} {round_}" for b in base[: n - len(out)]]
        round_ += 1
    return out


def load_table(args: argparse.Namespace) -> LabelTable:
    """The corpus's labels and counts: from --table (JSON), else from a store (ingested)."""
    if args.table:
        doc = json.loads(Path(args.table).read_text(encoding="utf-8"))
        return LabelTable.from_counts(dict(zip(doc["labels"], doc["mentions"], strict=True)))
    from builders.store import Store
    from builders.store.ingest import ingest

    db = args.db or Path(tempfile.mkdtemp(prefix="bench-embed-")) / "bench.duckdb"
    with Store(db) as store:
        if not store.has_source(args.corpus) or args.path:
            ingest(store, args.corpus, args.path)
        return LabelTable.load(store, args.corpus)


def familiarity_of(vecs: np.ndarray, table: LabelTable, sets: dict, model: str) -> Any:
    n = len(table.labels)
    sims = cosine_clipped(vecs[n:], vecs[:n], dtype=np.float32)
    return familiarity_report(sims, table.mentions, table.labels, sets, model=model)


def deviation(a: FamiliarityReport, b: FamiliarityReport) -> tuple[float, float]:
    """(max |delta| over the benchmarks and the union macro, max |delta| over F(z))."""
    per_bench = [
        abs(a.per_benchmark[k].familiarity - b.per_benchmark[k].familiarity)
        for k in a.per_benchmark
    ]
    per_label = [abs(a.per_label[z] - b.per_label[z]) for z in a.per_label]
    return max([abs(a.union_macro - b.union_macro), *per_bench]), max(per_label)


def best_of(fn: Any, times: list[float]) -> Any:
    t0 = time.perf_counter()
    out = fn()
    times.append(time.perf_counter() - t0)
    return out


def parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backend", default="torch", help=f"comma list of {', '.join(BACKENDS)}")
    ap.add_argument("--precision", default="fp32", help=f"comma list of {', '.join(PRECISIONS)}")
    ap.add_argument("--model", default="minilm", help="minilm, mpnet or a model folder")
    ap.add_argument(
        "--labels",
        type=int,
        default=2_000,
        help="number of distinct labels (the GPU target: --labels 200000)",
    )
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    ap.add_argument(
        "--batch-size", type=int, help="toolkit rows per batch (default: 32 CPU, 2048 GPU)"
    )
    ap.add_argument(
        "--raw-batch-size",
        help="comma list of raw encode's batch sizes; the fastest is the baseline "
        f"(default: {RAW_BATCHES['cpu']} on a CPU, {RAW_BATCHES['accelerator']} on a GPU)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="runs of each; the best is reported")
    ap.add_argument(
        "--corpus", default="pilener-sample", help="source whose Familiarity is compared"
    )
    ap.add_argument("--path", help="files of --corpus to ingest (default: its default origin)")
    ap.add_argument("--db", type=Path, help="store holding --corpus (default: a temporary one)")
    ap.add_argument("--table", help="JSON {labels, mentions} instead of a store (no duckdb needed)")
    ap.add_argument("--save-table", type=Path, help="write --corpus's table as JSON and stop")
    ap.add_argument("--json", type=Path, help="also write every figure here")
    return ap


@dataclass
class Timings:
    """Seconds of every run and the vectors of the last one: raw `encode` per batch size, and
    the toolkit's `encode` per backend x precision."""

    raw: dict[int, list[float]]
    raw_vecs: dict[int, np.ndarray]
    runs: dict[Combo, list[float]]
    vecs: dict[Combo, np.ndarray]

    def fastest_raw_batch(self) -> int:
        """The raw batch size with the best time: the baseline."""
        return min(self.raw, key=lambda b: min(self.raw[b]))


def runnable(backends: str, precisions: str) -> list[Combo]:
    """Every backend x precision asked that the backend supports and this machine can run;
    the others that a backend supports are skipped with a line saying why. Exits if none."""
    combos = [
        (b, p)
        for b in backends.split(",")
        for p in precisions.split(",")
        if p in SUPPORTED.get(b, PRECISIONS)
    ]
    for c in list(combos):
        if why := unavailable(*c):
            print(f"skipping {c[0]} {c[1]}: {why}")
            combos.remove(c)
    if not combos:
        sys.exit(f"no backend x precision to run in {backends} x {precisions}")
    return combos


def raw_batch_sizes(option: str | None, device: str) -> list[int]:
    """--raw-batch-size, or the default sizes of the device's kind."""
    return [
        int(b)
        for b in (option or RAW_BATCHES["cpu" if device == "cpu" else "accelerator"]).split(",")
    ]


def raw_encode(st: Any, texts: list[str], batch: int) -> np.ndarray:
    """sentence-transformers' own `encode` (the reference), normalised."""
    return st.encode(texts, batch_size=batch, normalize_embeddings=True)


def warm_up(
    st: Any, runners: dict[Combo, Embedder], labels: list[str], raw_batches: list[int]
) -> float:
    """Load every runtime (exporting once) and warm every raw batch size before any timing;
    returns the best time of tokenising all labels in one call (over the runtimes)."""
    for emb in runners.values():
        emb.encode(labels[:64])
    for b in raw_batches:
        st.encode(labels[: max(64, b)], batch_size=b)
    plan_t: list[float] = []
    for emb in runners.values():
        best_of(lambda e=emb: e.runner.plan(labels), plan_t)
    return min(plan_t)


def print_setup(
    raw_model: Embedder,
    device: str,
    labels: list[str],
    raw_batches: list[int],
    repeat: int,
    tokenise_s: float,
) -> None:
    """The header: model, device, threads, label count, raw batch sizes and tokenising time."""
    import torch

    print(f"model      {raw_model.model_name}  ({raw_model.resolved.path_or_name})")
    print(f"device     {device}   torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(
        f"labels     {len(labels):,} distinct   raw batches {','.join(map(str, raw_batches))}"
        f"   best of {repeat}"
    )
    print(f"tokenise   {tokenise_s:.3f}s, all labels in one call (inside each encode below)")


def time_encodes(
    st: Any, runners: dict[Combo, Embedder], labels: list[str], raw_batches: list[int], repeat: int
) -> Timings:
    """`repeat` rounds of raw `encode` at every batch size and of every runtime, interleaved:
    these machines drift run to run."""
    timed = Timings(
        raw={b: [] for b in raw_batches}, raw_vecs={}, runs={c: [] for c in runners}, vecs={}
    )
    for _ in range(repeat):
        for b in raw_batches:
            timed.raw_vecs[b] = best_of(lambda b=b: raw_encode(st, labels, b), timed.raw[b])
        for c, emb in runners.items():
            timed.vecs[c] = best_of(lambda e=emb: e.encode(labels), timed.runs[c])
    return timed


def compare(
    raw_model: Embedder,
    st: Any,
    runners: dict[Combo, Embedder],
    timed: Timings,
    table: LabelTable,
    n_labels: int,
    device: str,
) -> tuple[list[dict[str, Any]], FamiliarityReport, int]:
    """One row for the raw baseline, then one per runtime: speed against the baseline, the
    smallest cosine to its vectors, and the Familiarity deviation from raw `encode`'s.
    Also returns raw `encode`'s Familiarity and the number of evaluation labels."""
    raw_batch = timed.fastest_raw_batch()
    raw_s = min(timed.raw[raw_batch])
    sets = evaluation_sets(None)
    fam_labels = table.labels + list(union_labels(sets))
    name = raw_model.model_name
    ref_fam = familiarity_of(raw_encode(st, fam_labels, raw_batch), table, sets, name)
    rows: list[dict[str, Any]] = [
        {
            "backend": "raw encode",
            "precision": "fp32",
            "device": device,
            "batch_size": raw_batch,
            "labels_per_s": n_labels / raw_s,
            "seconds": raw_s,
        }
    ]
    for c, emb in runners.items():
        secs = min(timed.runs[c])
        d_fam, d_label = deviation(
            familiarity_of(emb.encode(fam_labels), table, sets, name), ref_fam
        )
        cos = (timed.vecs[c] * timed.raw_vecs[raw_batch]).sum(axis=1)
        rows.append(
            {
                "backend": c[0],
                "precision": c[1],
                "device": device,
                "seconds": secs,
                "labels_per_s": n_labels / secs,
                "ratio_vs_raw": raw_s / secs,
                "min_cosine": float(cos.min()),
                "max_abs_delta_familiarity": d_fam,
                "max_abs_delta_f_label": d_label,
            }
        )
    return rows, ref_fam, len(union_labels(sets))


def print_rows(rows: list[dict[str, Any]]) -> None:
    """The table of every row (the raw baseline without the comparison columns)."""
    print(
        f"{'backend':<11} {'precision':<9} {'device':<6} {'labels/s':>10} {'seconds':>8} "
        f"{'x raw':>6} {'min cos':>10} {'|dF| bench':>10} {'|dF(z)|':>9}"
    )
    for r in rows:
        extra = (
            f"{r['ratio_vs_raw']:6.2f} {r['min_cosine']:10.7f} "
            f"{r['max_abs_delta_familiarity']:10.2e} {r['max_abs_delta_f_label']:9.2e}"
            if "ratio_vs_raw" in r
            else ""
        )
        print(
            f"{r['backend']:<11} {r['precision']:<9} {r['device']:<6} "
            f"{r['labels_per_s']:10,.0f} {r['seconds']:8.2f} {extra}"
        )


def print_contract(rows: list[dict[str, Any]]) -> None:
    """The last lines: one per runtime, `backend=B precision=P device=D ratio_vs_raw=R
    max_abs_delta_familiarity=X`."""
    for r in rows[1:]:
        print(
            f"backend={r['backend']} precision={r['precision']} device={r['device']} "
            f"ratio_vs_raw={r['ratio_vs_raw']:.2f} "
            f"max_abs_delta_familiarity={r['max_abs_delta_familiarity']:.2e}"
        )


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    table = load_table(args)
    if args.save_table:
        doc = {"labels": table.labels, "mentions": table.mentions.tolist()}
        args.save_table.write_text(json.dumps(doc), encoding="utf-8")
        print(f"wrote {args.save_table}: {len(table.labels):,} labels of {args.corpus}")
        return
    combos = runnable(args.backend, args.precision)
    labels = make_labels(args.labels, base_labels())
    raw_model = Embedder(args.model, device=args.device)
    st = raw_model.st  # torch fp32: the reference
    device = raw_model.device or "cpu"
    runners = {c: Embedder(args.model, args.device, args.batch_size, *c) for c in combos}
    raw_batches = raw_batch_sizes(args.raw_batch_size, device)
    tokenise_s = warm_up(st, runners, labels, raw_batches)
    print_setup(raw_model, device, labels, raw_batches, args.repeat, tokenise_s)
    timed = time_encodes(st, runners, labels, raw_batches, args.repeat)
    print(
        "raw encode "
        + ", ".join(f"batch {b}: {len(labels) / min(timed.raw[b]):,.0f}/s" for b in raw_batches)
        + f"; the baseline is batch {timed.fastest_raw_batch()}"
    )
    rows, ref_fam, n_eval = compare(raw_model, st, runners, timed, table, len(labels), device)
    print(
        f"Familiarity on {args.corpus}: {len(table.labels):,} training labels vs "
        f"{n_eval} evaluation labels (7 benchmarks); raw union macro "
        f"{ref_fam.union_macro:.6f}"
    )
    print_rows(rows)
    if args.json:
        raw_rates = {str(b): len(labels) / min(timed.raw[b]) for b in raw_batches}
        doc = {"labels": len(labels), "raw_labels_per_s_by_batch": raw_rates, "rows": rows}
        args.json.write_text(json.dumps(doc, indent=2))
    print_contract(rows)


if __name__ == "__main__":
    main()
