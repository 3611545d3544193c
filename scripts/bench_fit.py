"""Benchmark fitting familiarity levels to their size (`Store.fit_level`), old code vs new.

    python scripts/bench_fit.py --db /tmp/nuner.duckdb --source nuner --base main --repeat 2

The store is opened read-only. `--base` is a git revision of this repository holding the old
code (exported with `git archive` to a temp folder); each build runs in a child process, with
the old tree and the working tree on PYTHONPATH in turn, back to back, `--repeat` times:

1. the familiarity build (`build(..., out=None)`, no leakage scan): wall time, the time in
   `walk`, in `fit_level`, in choosing sentences (`select_sentences`, `select_fitted`
   where the code has it), and every level's mentions, sentences,
   labels, a digest of its rows and its union Familiarity, which must be the same under both;
2. the entropy build with the new code (the reference the familiarity build is compared to).

The table gives each figure's median and the ratios new/old (walk, fit, build) and new
familiarity/entropy. Compare ratios within one run: the machines are noisy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def child(db: str, source: str, strategy: str, model: str) -> dict[str, Any]:
    """One build in this process: its times and what it chose (printed as JSON)."""
    import pyarrow as pa

    from builders.shift.specs import EmbeddingSpec
    from builders.splits import SplitConfig, build
    from builders.store import Store, subsets

    spent = {"walk": 0.0, "fit_level": 0.0, "select": 0.0}

    def timed(owner: Any, name: str, key: str) -> None:
        inner = getattr(owner, name, None)
        if inner is None:  # older code has no such step
            return

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - start

        setattr(owner, name, wrapper)

    timed(subsets, "walk", "walk")  # as fit_level calls it (older code: `_walk`)
    timed(subsets, "_walk", "walk")
    timed(subsets.SubsetQueries, "fit_level", "fit_level")
    timed(subsets.SubsetQueries, "select_sentences", "select")
    timed(subsets.SubsetQueries, "select_fitted", "select")  # (its fallback counts twice)
    with Store(db, read_only=True) as store:
        cfg = SplitConfig(source, strategy, embedding=EmbeddingSpec(model), leakage=False)
        start = time.perf_counter()
        results = build(store, cfg, out=None)
        wall = time.perf_counter() - start
    levels = {}
    for result in results:
        for sub in result.subsets:
            digest = hashlib.sha256()
            if sub.rows is not None:  # the rows as Arrow IPC bytes, one chunk per column
                sink = pa.BufferOutputStream()
                table = sub.rows.combine_chunks()
                with pa.ipc.new_stream(sink, table.schema) as writer:
                    writer.write_table(table)
                digest.update(sink.getvalue().to_pybytes())
            counts = json.dumps(sorted(sub.label_counts.items())).encode()
            levels[sub.name] = {
                "mentions": sub.mentions,
                "sentences": sub.sentences,
                "labels": sub.labels,
                "familiarity": sub.familiarity.union_macro,
                "label_counts": hashlib.sha256(counts).hexdigest()[:16],
                "rows": digest.hexdigest()[:16],
            }
    return {"wall": wall, **spent, "levels": levels}


def run(tree: Path, args: argparse.Namespace, strategy: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", strategy]
    cmd += ["--db", args.db, "--source", args.source, "--model", args.model]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"build failed ({tree}, {strategy}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default="/tmp/nuner.duckdb")
    parser.add_argument("--source", default="nuner")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--base", default="main", help="git revision of the old code")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.db, args.source, args.child, args.model)))
        return
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": [], "entropy": []}
    with tempfile.TemporaryDirectory(prefix="bench-fit-") as tmp:
        base = Path(tmp)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.base, "builders"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        for i in range(args.repeat):
            for name, tree, strategy in (
                ("old", base, "familiarity"),
                ("new", ROOT, "familiarity"),
                ("entropy", ROOT, "entropy"),
            ):
                runs[name].append(run(tree, args, strategy))
                got = runs[name][-1]
                parts = ", ".join(f"{k} {got[k]:.1f}" for k in ("walk", "fit_level", "select"))
                print(f"round {i + 1} {name}: {got['wall']:.1f} s ({parts})", flush=True)
    old, new = runs["old"][0]["levels"], runs["new"][0]["levels"]
    same = all(r["levels"] == old for r in runs["old"] + runs["new"])
    print(f"\nlevels identical old vs new (every run): {same}")
    for name, level in new.items():
        print(f"  {name}: {json.dumps(level)}")
    if not same:
        for name in sorted(set(old) | set(new)):
            if old.get(name) != new.get(name):
                print(f"  DIFFERS {name}: old {old.get(name)} new {new.get(name)}")

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    print(f"\n{'figure':<20}{'old s':>10}{'new s':>10}{'new/old':>10}")
    for key in ("walk", "fit_level", "select", "wall"):
        o, n = med("old", key), med("new", key)
        print(f"{key:<20}{o:>10.2f}{n:>10.2f}{n / o if o else float('nan'):>10.3f}")
    fam, ent = med("new", "wall"), med("entropy", "wall")
    print(f"\nfamiliarity/entropy (new code): {fam:.1f} / {ent:.1f} s = {fam / ent:.2f}")
    print(f"familiarity/entropy (old code): {med('old', 'wall') / ent:.2f}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
