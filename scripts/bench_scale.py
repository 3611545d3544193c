"""Scale: ingest and warm build-splits on 1x, 3x and 10x NuNER-sized corpora.

    python scripts/bench_scale.py --scales 1,3,10 --backend openvino
    python scripts/bench_scale.py --scales 1,3,10 --baseline /tmp/old --skip-ingest

For each scale S the corpus is made by `scripts/make_nuner_scale.py --scale S` when missing,
then, each in a child process timed around it (wall time, and its peak RSS from `os.wait4`):
1. `builders ingest nuner --name nuner-xS` into one store shared by the scales (so the
   embedding cache fills once: the scales share their type names); `--skip-ingest` keeps a
   source the store already holds (its ingest is then not timed);
2. `build-splits --source nuner-xS` once to fill the embedding cache (not reported), then again:
   the warm build-splits (leakage scan on, the default), reported;
3. `builders leakage` on the source against the seven benchmarks' local copies
   (`$LABELSHIFT_DATA`, by default `../shared/data`) with `--pairs`; a first scan, not
   reported, ingests the benchmarks and fills the cache.
`--steps build` times the build alone; `--skip-cold` leaves out the first runs where the caches
are already filled. `--model` also takes a local model folder.

`--baseline DIR` names a checkout of another commit (a `git worktree`): steps 2 and 3 then run
under both checkouts in turn (`--repeat` rounds, the order alternating), the table gives the
ratio of this checkout's median to the baseline's, and the script compares their outputs byte
for byte (every file of the build folders, and the pairs parquet).

Prints one table: time per sentence at each scale and its ratio to 1x's (the target: within
1.3x at 10x). Targets at 10x on 2 cores: ingest < 8 min, warm build-splits < 2 min, peak < 8 GB.
`--clean` deletes each corpus and the store when done (10x is about 3 GB of CSV).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

from bench_splits import run_child

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("build", "leakage")


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scales", default="1,3,10")
    ap.add_argument("--dir", type=Path, default=ROOT / "build" / "scale")
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--backend", default="torch", help="runtime that fills the cache")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--baseline", type=Path, help="a checkout timed beside this one")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of the warm steps")
    ap.add_argument("--steps", default="build,leakage", help="warm steps: build, leakage")
    ap.add_argument("--skip-ingest", action="store_true", help="keep sources already stored")
    ap.add_argument("--skip-cold", action="store_true", help="caches already filled: no first runs")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--clean", action="store_true", help="delete corpora and store when done")
    args = ap.parse_args(argv)
    args.dir = args.dir.resolve()
    args.db = args.dir / "scale.duckdb"
    args.steps = [s for s in args.steps.split(",") if s]
    if not set(args.steps) <= set(STEPS):
        ap.error(f"--steps takes {', '.join(STEPS)}")
    return args


def child(checkout: Path, args: list[str]) -> tuple[float, float, str]:
    """`python -m builders ARGS` importing `builders` from `checkout` (wall s, peak GB, stdout)."""
    os.environ["PYTHONPATH"] = str(checkout)  # run_child passes the environment on
    return run_child([sys.executable, "-m", "builders", *args], cwd=checkout)


def corpus(args: argparse.Namespace, tag: str, scale: float) -> Path:
    """The scale's CSV, made when missing."""
    csv = args.dir / f"nuner-{tag}" / f"nuner-{tag}.csv"
    if not csv.exists():
        gen = [sys.executable, str(ROOT / "scripts" / "make_nuner_scale.py")]
        run_child([*gen, "--scale", str(scale), "--out", str(csv)], cwd=ROOT)
    return csv


def stored(db: Path, source: str) -> dict[str, Any] | None:
    """The counts of a source the store holds, or None."""
    import duckdb

    if not db.exists():
        return None
    with duckdb.connect(str(db), read_only=True) as con:
        mentions, types = con.execute(
            "SELECT count(*), count(DISTINCT label) FROM mentions WHERE source = ?", [source]
        ).fetchall()[0]
        (sentences,) = con.execute(
            "SELECT count(*) FROM sentences WHERE source = ?", [source]
        ).fetchall()[0]
    return {"sentences": sentences, "mentions": mentions, "types": types} if sentences else None


def ingest(args: argparse.Namespace, source: str, csv: Path) -> dict[str, Any]:
    """Ingest the corpus (timed), or with --skip-ingest keep the stored one (not timed)."""
    if args.skip_ingest and (counts := stored(args.db, source)):
        return counts
    cmd = ["ingest", "nuner", "--path", str(csv), "--name", source, "--db", str(args.db)]
    secs, peak, out = child(ROOT, [*cmd, "-q", "--json", "--replace"])
    info = json.loads(out)["result"]
    print(f"{source}: ingest {secs:.1f}s, peak {peak:.2f} GB", flush=True)
    counts = {k: info.get(k) for k in ("sentences", "mentions", "types")}
    return {**counts, "ingest_s": secs, "ingest_peak_gb": peak}


def commands(args: argparse.Namespace, source: str, out: Path) -> dict[str, list[str]]:
    """The warm steps' command lines, writing under `out`."""
    common = ["--model", args.model, "--backend", args.backend, "--precision", args.precision]
    common += ["--db", str(args.db), "-q", "--json"]
    return {
        "build": ["build-splits", "--source", source, *common, "--out", str(out / "splits")],
        "leakage": ["leakage", "--source", source, *common, "--pairs", str(out / "pairs.parquet")],
    }


def same_bytes(a: Path, b: Path) -> list[str]:
    """The files under `a` and `b` that differ or exist on one side only (relative paths)."""
    files = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    files |= {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    return sorted(
        str(f)
        for f in files
        if not ((a / f).is_file() and (b / f).is_file() and filecmp.cmp(a / f, b / f, False))
    )


def warm(
    args: argparse.Namespace, source: str, tag: str, checkouts: dict[str, Path]
) -> dict[str, Any]:
    """The warm steps under every checkout, `--repeat` rounds in alternating order: each
    step's median wall time and largest peak, per checkout."""
    runs: dict[str, dict[str, list[tuple[float, float]]]] = {
        name: {step: [] for step in args.steps} for name in checkouts
    }
    for r in range(args.repeat):
        for name in list(checkouts)[:: 1 if r % 2 == 0 else -1]:
            cmds = commands(args, source, args.dir / f"out-{tag}-{name}")
            for step in args.steps:
                secs, peak, out = child(checkouts[name], cmds[step])
                runs[name][step].append((secs, peak))
                if step == "leakage" and json.loads(out)["result"]["not_scanned"]:
                    sys.exit(f"benchmarks not scanned: {json.loads(out)['result']['not_scanned']}")
                print(f"{tag} {name} {step}: {secs:.1f}s, peak {peak:.2f} GB", flush=True)
    return {
        f"{name}_{step}_{what}": fn([run[i] for run in runs[name][step]])
        for name in checkouts
        for step in args.steps
        for what, i, fn in (("s", 0, statistics.median), ("peak_gb", 1, max))
    }


def measure(args: argparse.Namespace, scale: float, checkouts: dict[str, Path]) -> dict[str, Any]:
    """One scale: its corpus, ingest, a cold build (not reported), the warm steps, and whether
    the checkouts' outputs have the same bytes."""
    tag = f"x{scale:g}"
    source = f"nuner-{tag}"
    row: dict[str, Any] = {"scale": tag, **ingest(args, source, corpus(args, tag, scale))}
    row["load_before"] = os.getloadavg()[0]
    cmds = commands(args, source, args.dir / f"out-{tag}-cold")
    for step in [] if args.skip_cold else args.steps:  # fills the caches: not reported
        secs, _, _ = child(ROOT, cmds[step])
        print(f"{tag}: first {step} (fills the caches) {secs:.1f}s", flush=True)
    row.update(warm(args, source, tag, checkouts))
    row["load_after"] = os.getloadavg()[0]
    if "before" in checkouts:
        row["differing_files"] = same_bytes(
            args.dir / f"out-{tag}-after", args.dir / f"out-{tag}-before"
        )
    if args.clean:
        shutil.rmtree(args.dir / f"nuner-{tag}", ignore_errors=True)
        for name in ("cold", *checkouts):
            shutil.rmtree(args.dir / f"out-{tag}-{name}", ignore_errors=True)
    print(json.dumps(row), flush=True)
    return row


def table(rows: list[dict[str, Any]], checkouts: dict[str, Path], steps: list[str]) -> None:
    """The figures as one Markdown table: per checkout and step, its time and peak, the time
    per sentence as a ratio of 1x's, and with a baseline this checkout's ratio to it."""
    base = rows[0]
    head = ["scale", "sentences", "ingest", "peak"]
    head += [f"{n} {s} {w}" for n in checkouts for s in steps for w in ("s", "peak", "/sent x 1x")]
    if "before" in checkouts:
        head += [f"{s} after/before {w}" for s in steps for w in ("time", "peak")]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        cells = [r["scale"], f"{r['sentences']:,}"]
        cells += (
            [f"{r['ingest_s']:.1f} s", f"{r['ingest_peak_gb']:.2f} GB"]
            if "ingest_s" in r
            else ["", ""]
        )
        for key in (f"{n}_{s}" for n in checkouts for s in steps):
            per = r[f"{key}_s"] / r["sentences"] / (base[f"{key}_s"] / base["sentences"])
            cells += [f"{r[f'{key}_s']:.1f} s", f"{r[f'{key}_peak_gb']:.2f} GB", f"{per:.2f}"]
        if "before" in checkouts:
            for s in steps:
                cells += [
                    f"{r[f'after_{s}_{w}'] / r[f'before_{s}_{w}']:.2f}" for w in ("s", "peak_gb")
                ]
        print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    os.environ["HF_HUB_OFFLINE"] = "1"
    data = Path(os.environ.setdefault("LABELSHIFT_DATA", str(ROOT.parent / "shared" / "data")))
    if not data.is_dir():
        sys.exit(
            f"the leakage scan needs the benchmarks' local copies: no {data} (LABELSHIFT_DATA)"
        )
    checkouts = {"after": ROOT}
    if args.baseline is not None:
        checkouts["before"] = args.baseline.resolve()
    load = os.getloadavg()
    rows = [measure(args, float(s), checkouts) for s in args.scales.split(",")]
    print(
        f"\n{os.cpu_count()} CPUs, load average {load[0]:.1f} before and "
        f"{os.getloadavg()[0]:.1f} after; model {args.model} ({args.backend} {args.precision}); "
        f"{args.repeat} round(s)" + (f"; baseline {checkouts['before']}" if args.baseline else "")
    )
    table(rows, checkouts, args.steps)
    for r in rows:
        if "differing_files" in r:
            differ = ", ".join(r["differing_files"]) or "none"
            print(f"{r['scale']}: files that differ from the baseline's outputs: {differ}")
    if args.json:
        args.json.write_text(json.dumps({"load": load, "rows": rows}, indent=2))
    if args.clean:
        args.db.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
