#!/usr/bin/env python
"""Measure the leakage scan on a NuNER-sized corpus against the 7 zero-shot benchmarks.

Setup (not timed): the NuNER-sized CSV (`scripts/make_nuner_scale.py`, 1M sentences) and the
seven zero-shot benchmarks (from the shared data folder) are ingested into a store under
`build/bench-leakage/`, and the embedding cache is warmed with every training and benchmark
label (as `builders familiarity` leaves it; the seen mentions of this synthetic corpus carry
~135k distinct labels, whose cold embedding would dominate and is not the scan).

Timed, each in its own child process (wall time around it; CPU time and peak RSS from
`os.wait4`):
- `sql`: the store's SQL alone (`Store.overlap_tables`: hashes of normalised sentences and
  n-grams, joined; the benchmark mentions' surfaces in the corpus);
- `cli`: `builders leakage --source nuner --benchmarks all --json` as a user runs it (the SQL,
  the familiar-label check of the seen mentions, the figures, the pairs parquet);
- `python`: a plain Python set-based scan of the same rows (streamed from the same store):
  sets of normalised sentences, n-gram tuples and mention token tuples.
The figures of `python` and `cli` must agree (exact, n-gram and seen counts); the script says so.
Targets (issue 12): under 60 s and 4 GB on 2 cores. The machine may be shared: the load
average is printed before and after.

Usage: python scripts/bench_leakage.py [--model all-MiniLM-L6-v2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHARED = Path(os.environ.get("LABELSHIFT_SHARED_DATA", ROOT.parent / "shared" / "data"))
WORK = ROOT / "build" / "bench-leakage"
NUNER_CSV = ROOT / "build" / "nuner-scale" / "nuner-scale.csv"
N = 13


# ---------------------------------------------------------------------------- the reference
def norm(tokens: Iterable[str]) -> tuple[str, ...]:
    return tuple(unicodedata.normalize("NFC", t).lower() for t in tokens)


def python_scan(
    bench: list[list[str]],
    train: Iterable[list[str]],
    n: int,
    bench_mentions: list[tuple[str, ...]] | None = None,
    train_mentions: Iterable[tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """Plain Python sets: how many benchmark sentences occur whole in `train` (exact), share
    an n-gram with it (of those with >= n tokens), and how many benchmark mentions' normalised
    tokens occur as a training mention's (`seen`)."""
    sents = [norm(s) for s in bench]
    whole = set(sents)
    grams = {s[i : i + n] for s in sents for i in range(len(s) - n + 1)}
    found_whole: set[tuple[str, ...]] = set()
    found_grams: set[tuple[str, ...]] = set()
    for tokens in train:
        t = norm(tokens)
        if t in whole:
            found_whole.add(t)
        for i in range(len(t) - n + 1):
            g = t[i : i + n]
            if g in grams:
                found_grams.add(g)
    out: dict[str, Any] = {
        "sentences": len(sents),
        "exact": sum(s in found_whole for s in sents),
        "ngram": sum(
            any(s[i : i + n] in found_grams for i in range(len(s) - n + 1)) for s in sents
        ),
    }
    if bench_mentions is not None and train_mentions is not None:
        wanted = set(bench_mentions)
        seen = {m for m in train_mentions if m in wanted}
        out["mentions"] = len(bench_mentions)
        out["seen"] = sum(m in seen for m in bench_mentions)
    return out


def _stream(con: Any, sql: str, params: list[Any], size: int = 20_000) -> Iterator[tuple]:
    cur = con.cursor().execute(sql, params)  # a cursor each: two streams read side by side
    while rows := cur.fetchmany(size):
        yield from rows


def _python_child(db: Path, benchmarks: list[str]) -> dict[str, Any]:
    """The reference over the store's rows: benchmark test sets, then the corpus streamed."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    bench, bench_mentions = [], []
    for b in benchmarks:
        rows = con.execute(
            "SELECT idx, tokens FROM sentences WHERE source = ? AND split = 'test' ORDER BY idx",
            [b],
        ).fetchall()
        tokens = {idx: toks for idx, toks in rows}
        bench += [toks for _, toks in rows]
        for idx, start, stop in con.execute(
            "SELECT idx, start, stop FROM mentions WHERE source = ? AND split = 'test'", [b]
        ).fetchall():
            bench_mentions.append(norm(tokens[idx][start:stop]))
    t0 = time.perf_counter()
    sentences = _stream(
        con,
        "SELECT split, idx, tokens FROM sentences WHERE source = 'nuner' ORDER BY split, idx",
        [],
    )
    mentions = _stream(
        con,
        "SELECT split, idx, start, stop FROM mentions WHERE source = 'nuner' ORDER BY split, idx",
        [],
    )
    surfaces: list[tuple[str, ...]] = []

    def corpus() -> Iterator[list[str]]:
        pending = next(mentions, None)
        for split, idx, tokens in sentences:
            while pending is not None and (pending[0], pending[1]) <= (split, idx):
                if (pending[0], pending[1]) == (split, idx):
                    surfaces.append(norm(tokens[pending[2] : pending[3]]))
                pending = next(mentions, None)
            yield tokens

    res = python_scan(bench, corpus(), N)
    seen = python_scan([], [], N, bench_mentions, surfaces)
    res.update(mentions=seen["mentions"], seen=seen["seen"], seconds=time.perf_counter() - t0)
    return res


# ---------------------------------------------------------------------------- children
def _sql_child(db: Path, benchmarks: list[str]) -> dict[str, Any]:
    import pyarrow as pa

    from builders.store import Store

    with Store(db, read_only=True) as store:
        query = pa.table({"benchmark": benchmarks, "source": benchmarks, "split": ["test"] * 7})
        t0 = time.perf_counter()
        tables = store.overlap_tables("nuner", query, N)
        return {"seconds": time.perf_counter() - t0, "pairs": tables.pairs.num_rows}


def run_child(args: list[str]) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory(prefix="bench-leakage-") as tmp,
        open(Path(tmp) / "out", "w+b") as fo,
        open(Path(tmp) / "err", "w+b") as fe,
    ):
        t0 = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's `builders`
        proc = subprocess.Popen(args, stdout=fo, stderr=fe, cwd=tmp, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    if code != 0:
        raise SystemExit(f"{args}: exit {code}: {err.decode(errors='replace')[-2000:]}")
    return {
        "result": json.loads(out),
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_gb": usage.ru_maxrss * 1024 / 1e9,
    }


# ---------------------------------------------------------------------------- setup
def setup(db: Path, model: str) -> None:
    from builders.labels import ZERO_SHOT
    from builders.shift.embedder import Embedder
    from builders.store import Store
    from builders.store.ingest import ingest

    if not NUNER_CSV.exists():
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "scripts" / "make_nuner_scale.py"),
                "--out",
                str(NUNER_CSV),
            ],
            check=True,
        )
    db.parent.mkdir(parents=True, exist_ok=True)
    with Store(db) as store:
        t0 = time.perf_counter()
        ingest(store, "nuner", NUNER_CSV)
        for b in ZERO_SHOT:
            ingest(store, b, SHARED / _LOCAL[b])
        print(f"ingest (not timed): {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        t0 = time.perf_counter()
        labels = [r[0] for r in store.con.execute("SELECT DISTINCT label FROM mentions").fetchall()]
        Embedder(model).embed_cached(store, sorted(labels))
        print(
            f"embedding cache warm (not timed): {len(labels):,} labels, "
            f"{time.perf_counter() - t0:.0f} s",
            file=sys.stderr,
        )


_LOCAL = {
    **{
        f"crossner-{d}": f"crossner/{d}"
        for d in ("ai", "literature", "music", "politics", "science")
    },
    "mit-movie": "mit-movie",
    "mit-restaurant": "mit-restaurant",
}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--db", type=Path, default=WORK / "store.duckdb")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--child", choices=["sql", "python"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        from builders.labels import ZERO_SHOT

        fn = _sql_child if args.child == "sql" else _python_child
        print(json.dumps(fn(args.db, list(ZERO_SHOT))))
        return

    setup(args.db, args.model)
    load = f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    print(f"load average before: {load}", file=sys.stderr)
    me = [sys.executable, str(Path(__file__).resolve()), "--db", str(args.db), "--child"]
    env_cli = [sys.executable, "-m", "builders", "leakage", "--source", "nuner", "--benchmarks"]
    rows = {
        "sql": run_child([*me, "sql"]),
        "cli": run_child(
            [*env_cli, "all", "--model", args.model, "--db", str(args.db), "--json", "-q"]
        ),
        "python": run_child([*me, "python"]),
    }
    after = f"{os.getloadavg()[0]:.1f}"
    cli, py = rows["cli"]["result"]["union"], rows["python"]["result"]
    agree = (cli["exact_sentences"], cli["ngram_sentences"], cli["seen_mentions"]) == (
        py["exact"],
        py["ngram"],
        py["seen"],
    )
    print("| run | wall s | cpu s | peak RSS GB |\n|---|---:|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['peak_rss_gb']:.2f} |")
    print(
        f"\nexact {cli['exact_sentences']:,} / n-gram {cli['ngram_sentences']:,} / seen "
        f"{cli['seen_mentions']:,} of {cli['sentences']:,} sentences and {cli['mentions']:,} "
        f"mentions; pairs {rows['cli']['result']['pairs']:,}; python reference agrees: {agree}"
    )
    print(
        f"python / sql wall: {rows['python']['wall_s'] / rows['sql']['wall_s']:.1f}x; "
        f"python / cli wall: {rows['python']['wall_s'] / rows['cli']['wall_s']:.1f}x; "
        f"load average {load} before, {after} after"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"rows": rows, "agree": agree, "load": [load, after]}, indent=2),
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
