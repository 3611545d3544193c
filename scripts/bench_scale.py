"""Scale: ingest and warm build-splits on 1x, 3x and 10x NuNER-sized corpora.

    python scripts/bench_scale.py --scales 1,3,10 --backend openvino

For each scale S the corpus is made by `scripts/make_nuner_scale.py --scale S` when missing,
then, each in a child process timed around it (wall time, and its peak RSS from `os.wait4`):
1. `builders ingest nuner --name nuner-xS` into one store shared by the scales (so the
   embedding cache fills once: the scales share their type names);
2. `build-splits --source nuner-xS` once to fill the embedding cache (not reported), then again:
   the warm build-splits, reported;
3. `builders leakage` on the source against the seven benchmarks' local copies
   (`$LABELSHIFT_DATA`, by default `../shared/data`), when the toolkit has that command;
   a first scan, not reported, ingests the benchmarks and fills the cache.

Prints one table: time per sentence at each scale and its ratio to 1x's (the target: within
1.3x at 10x). Targets at 10x on 2 cores: ingest < 8 min, warm build-splits < 2 min, peak < 8 GB.
`--clean` deletes each corpus and the store when done (10x is about 3 GB of CSV).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench_splits import run_child as _run_child

ROOT = Path(__file__).resolve().parent.parent


def run_child(args: list[str]) -> tuple[float, float, str]:
    """`bench_splits.run_child` from the repository root (wall s, peak RSS GB, stdout)."""
    return _run_child(args, cwd=ROOT)


def has_command(name: str) -> bool:
    res = subprocess.run(
        [sys.executable, "-m", "builders", name, "--help"], capture_output=True, cwd=ROOT
    )
    return res.returncode == 0


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scales", default="1,3,10")
    ap.add_argument("--dir", type=Path, default=ROOT / "build" / "scale")
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--backend", default="torch", help="runtime that fills the cache")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--clean", action="store_true", help="delete corpora and store when done")
    args = ap.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    exe = [sys.executable, "-m", "builders"]
    db = args.dir / "scale.duckdb"
    leakage = has_command("leakage")
    data = Path(os.environ.setdefault("LABELSHIFT_DATA", str(ROOT.parent / "shared" / "data")))
    if leakage and not data.is_dir():
        sys.exit(
            f"the leakage scan needs the benchmarks' local copies: no {data} (LABELSHIFT_DATA)"
        )
    rows = []
    for scale in [float(s) for s in args.scales.split(",")]:
        tag = f"x{scale:g}"
        csv = args.dir / f"nuner-{tag}" / f"nuner-{tag}.csv"
        if not csv.exists():
            gen = [sys.executable, "scripts/make_nuner_scale.py", "--scale", str(scale)]
            run_child([*gen, "--out", str(csv)])
        source = f"nuner-{tag}"
        ingest = [*exe, "ingest", "nuner", "--path", str(csv), "--name", source]
        ingest += ["--db", str(db), "-q", "--json", "--replace"]
        ingest_s, ingest_gb, out = run_child(ingest)
        info = json.loads(out)["result"]
        print(f"{tag}: ingest {ingest_s:.1f}s, peak {ingest_gb:.2f} GB", flush=True)
        build = [*exe, "build-splits", "--source", source, "--model", args.model]
        build += ["--backend", args.backend, "--precision", args.precision]
        build += ["--db", str(db), "--out", str(args.dir / f"out-{tag}"), "-q", "--json"]
        cold_s, _, _ = run_child(build)
        print(f"{tag}: first build-splits (fills the cache) {cold_s:.1f}s", flush=True)
        warm_s, warm_gb, _ = run_child(build)
        row = {
            "scale": tag,
            "sentences": info.get("sentences"),
            "mentions": info.get("mentions"),
            "types": info.get("types"),
            "ingest_s": ingest_s,
            "ingest_peak_gb": ingest_gb,
            "cold_build_s": cold_s,
            "warm_build_s": warm_s,
            "warm_build_peak_gb": warm_gb,
        }
        if leakage:
            scan = [*exe, "leakage", "--source", source, "--model", args.model, "--db", str(db)]
            scan += ["--backend", args.backend, "--precision", args.precision]
            scan += ["--pairs", str(args.dir / f"leakage-{tag}.parquet"), "-q", "--json"]
            if not rows:  # the benchmarks are ingested on the first scan: not timed
                run_child(scan)
            row["leakage_s"], row["leakage_peak_gb"], out = run_child(scan)
            skipped = json.loads(out)["result"]["not_scanned"]
            if skipped:
                sys.exit(f"benchmarks not scanned: {skipped}")
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.clean:
            shutil.rmtree(csv.parent, ignore_errors=True)
            shutil.rmtree(args.dir / f"out-{tag}", ignore_errors=True)
    base = rows[0]
    print(
        f"\n{os.cpu_count()} CPUs; model {args.model} ({args.backend} {args.precision}); "
        f"leakage: {'measured' if leakage else 'no `builders leakage` command: not measured'}"
    )
    head = f"{'scale':<6} {'sentences':>11} {'mentions':>11} {'types':>8} {'ingest':>9} "
    head += f"{'peak':>7} {'us/sent':>8} {'x 1x':>5} {'warm build':>11} {'peak':>7} {'x 1x':>5}"
    head += f" {'leakage':>9} {'peak':>7}" if leakage else ""
    print(head)
    for r in rows:
        per = r["ingest_s"] / r["sentences"] * 1e6
        per_b = r["warm_build_s"] / r["sentences"] * 1e6
        base_per = base["ingest_s"] / base["sentences"] * 1e6
        base_b = base["warm_build_s"] / base["sentences"] * 1e6
        print(
            f"{r['scale']:<6} {r['sentences']:>11,} {r['mentions']:>11,} {r['types']:>8,} "
            f"{r['ingest_s']:8.1f}s {r['ingest_peak_gb']:6.2f}G {per:8.1f} {per / base_per:5.2f} "
            f"{r['warm_build_s']:10.1f}s {r['warm_build_peak_gb']:6.2f}G {per_b / base_b:5.2f}"
            + (f" {r['leakage_s']:8.1f}s {r['leakage_peak_gb']:6.2f}G" if leakage else "")
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    if args.clean:
        db.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
