"""Peak memory of Familiarity against a large benchmark label file (`file:labels.txt`).

    python scripts/bench_memory_labels.py cli --labels 20000,50000,100000 --before /tmp/before
    python scripts/bench_memory_labels.py stages --labels 20000,100000

`cli`: `builders familiarity --source pilener-sample --benchmarks file:labels-N.txt` in a child
process per run, its peak RSS from `os.wait4` (what `/usr/bin/time -v` calls "Maximum resident
set size"). The label files are made here (distinct phrases, each file a prefix of the
next). Every run is made once per tree: `--before PATH` names a folder holding another copy
of the `builders` package to compare with (run first, from `PYTHONPATH=PATH`), so before and
after are measured in one run on the same machine. First a cold run per tree at the largest
size (`--cold N`), each in a new store of its own, so it embeds every label; then every size
warm, against the after tree's store. A run with `--benchmarks crossner-ai`
(31 labels) gives the fixed cost (imports; the model is not loaded when the cache is warm).
A first warm run, not shown, replays the cold store's write-ahead log, which would otherwise
be counted in whichever tree opens it first.
The two trees' `--json` results are compared: every figure must be equal, to the bit.

`stages`: the numerical stages in this process on random unit vectors (MiniLM's 384
dimensions, the sample's 368 training labels), each stage's peak of traced allocations
(`tracemalloc`, which numpy reports to): similarity, exact matches, Familiarity, the bootstrap.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

_HEADS = (
    "ancient modern northern southern eastern western central coastal rural urban royal "
    "military civil public private digital marine alpine tropical arctic desert volcanic "
    "medieval colonial federal local national regional global industrial agricultural "
    "musical literary scientific medical legal financial religious political academic "
    "athletic nautical orbital chemical genetic solar lunar sacred secular rebel imperial "
    "tribal urbanised forested mountainous"
)
_NOUNS = (
    "river lake mountain city village festival award protein enzyme algorithm theorem "
    "novel poem album song band singer painter novelist physicist chemist disease symptom "
    "drug vehicle aircraft ship weapon fortress temple palace bridge railway station airport "
    "university journal newspaper company bank court treaty battle dynasty empire party "
    "election parliament senate language dialect currency mineral galaxy comet species genus"
)
_TAILS = (
    "basin region dispute era movement society prize index protocol theory series genre "
    "district province council league tournament campaign archive collection model edition "
    "school tradition ritual reform crisis network system order institute museum library "
    "gallery expedition mission"
)


def label_texts(n: int, seed: int = 0) -> list[str]:
    """`n` distinct label phrases (1 to 3 words), the same first labels for any `n`."""
    heads, nouns, tails = _HEADS.split(), _NOUNS.split(), _TAILS.split()
    pool = [f"{h} {w} {t}" for h in heads for w in nouns for t in tails]
    pool += [f"{h} {w}" for h in heads for w in nouns] + nouns
    if n > len(pool):
        raise SystemExit(f"at most {len(pool):,} labels, asked {n:,}")
    random.Random(seed).shuffle(pool)
    return pool[:n]


def run_child(args: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Run a command; (wall seconds, its own peak RSS in MiB, stdout)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=err, cwd=cwd, env=env)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's rusage only
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"command failed: {' '.join(args)}\n{stderr[-3000:]}")
    return wall, usage.ru_maxrss / 1024, stdout


def familiarity_run(
    tree: Path, db: Path, benchmarks: str, model: str
) -> tuple[float, float, dict[str, Any]]:
    """`builders familiarity` on the sample, with `builders` imported from `tree` (the child
    runs in the store's folder, so the checkout's own folder is not on its path first)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(tree), LABELSHIFT_EMBEDDINGS="off")
    code = "import sys; from builders.cli.main import main; sys.exit(main())"
    cmd = [sys.executable, "-c", code, "familiarity", "--source", "pilener-sample"]
    cmd += ["--benchmarks", benchmarks, "--model", model, "--db", str(db)]
    cmd += ["--no-leakage", "--json", "-q"]
    wall, peak, out = run_child(cmd, env, db.parent)
    result = json.loads(out)["result"]
    check = f"import builders; assert builders.__file__.startswith({str(tree)!r})"
    run_child([sys.executable, "-c", check], env, db.parent)  # the tree asked, not another
    return wall, peak, result


def cli(args: argparse.Namespace) -> None:
    sizes = [int(s) for s in args.labels.split(",")]
    cold = args.cold or max(sizes)
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-memory-labels-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    texts = label_texts(max([*sizes, cold]))
    for n in sorted(set([*sizes, cold])):
        (work / f"labels-{n}.txt").write_text("\n".join(texts[:n]) + "\n", encoding="utf-8")
    trees = [("after", ROOT)] + ([("before", Path(args.before).resolve())] if args.before else [])
    trees.reverse()
    print(
        f"{'labels':>8} {'run':<5} " + " ".join(f"{t + ' MiB':>11} {t + ' s':>8}" for t, _ in trees)
    )
    row, results = [], []
    for name, tree in trees:  # each tree in a store of its own, nothing cached: embeds them all
        db = work / f"cold-{name}.duckdb"
        for stale in (db, db.with_name(db.name + ".wal")):
            stale.unlink(missing_ok=True)
        wall, peak, res = familiarity_run(tree, db, f"file:{work}/labels-{cold}.txt", args.model)
        row.append(f"{peak:>11,.0f} {wall:>8.1f}")
        results.append(res)
    _row(cold, "cold", row, results)
    db = work / "cold-after.duckdb"  # holds every label's vector now: the warm runs
    familiarity_run(ROOT, db, "crossner-ai", args.model)  # not shown: replays the store's WAL
    for bench, n in [("crossner-ai", 31)] + [(f"file:{work}/labels-{n}.txt", n) for n in sizes]:
        row, results = [], []
        for _, tree in trees:
            wall, peak, res = familiarity_run(tree, db, bench, args.model)
            row.append(f"{peak:>11,.0f} {wall:>8.1f}")
            results.append(res)
        _row(n, "warm", row, results)


def _row(n: int, run: str, cells: list[str], results: list[dict[str, Any]]) -> None:
    same = all(_figures(r) == _figures(results[0]) for r in results)
    print(f"{n:>8,} {run:<5} " + " ".join(cells) + ("" if same else "  RESULTS DIFFER"), flush=True)


def _figures(result: dict[str, Any]) -> Any:
    """Every number of a familiarity result (what the trees must agree on, to the bit)."""
    return {k: v for k, v in result.items() if k not in {"version"}}


def stages(args: argparse.Namespace) -> None:
    for n in [int(s) for s in args.labels.split(",")]:
        print(f"{n:,} evaluation labels x {args.train:,} training labels:")
        _stages_at(n, args.train, args.dim)


def _stages_at(n: int, n_train: int, dim: int) -> None:
    import numpy as np

    from builders.labels import union_labels
    from builders.shift.familiarity import familiarity, summarise
    from builders.shift.report import familiarity_report, set_exact_matches

    rng = np.random.default_rng(0)
    tv, ev = (rng.standard_normal((m, dim)).astype(np.float32) for m in (n_train, n))
    tv /= np.linalg.norm(tv, axis=1, keepdims=True)
    ev /= np.linalg.norm(ev, axis=1, keepdims=True)
    train = [f"t {i}" for i in range(n_train)]
    evals = union_labels({"b": tuple(f"e {i}" for i in range(n))})
    counts = rng.integers(1, 500, n_train)
    sims = _stage("similarity (Z, D)", lambda: _similarity_zd(tv, ev))
    _stage("exact matches", lambda: set_exact_matches(sims.T, train, evals))
    f = _stage("familiarity", lambda: familiarity(sims, counts, labels=train))
    _stage("bootstrap", lambda: summarise(f))
    _stage("report", lambda: familiarity_report(sims, counts, train, {"b": evals}, model="x"))


def _similarity_zd(train: Any, evals: Any) -> Any:
    """The (Z, D) matrix `report.measure` works on, made as the tree under test makes it."""
    import numpy as np

    from builders.shift.embedder import cosine_clipped

    try:
        return cosine_clipped(train, evals, dtype=np.float32, transposed=True)
    except TypeError:  # a tree before `transposed`: (D, Z), then its transpose copied
        return np.ascontiguousarray(cosine_clipped(train, evals, dtype=np.float32).T)


def _stage(name: str, step: Callable[[], Any]) -> Any:
    if not tracemalloc.is_tracing():
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    out = step()
    peak = tracemalloc.get_traced_memory()[1] - base
    print(f"  {name:<20} peak {peak / 2**20:>9,.1f} MiB  {time.perf_counter() - start:6.2f} s")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    p_cli = sub.add_parser("cli", help="peak RSS of `builders familiarity` in a child")
    p_cli.add_argument("--labels", default="20000,50000,100000", help="label counts")
    p_cli.add_argument("--model", default="all-MiniLM-L6-v2")
    p_cli.add_argument("--before", help="a folder holding the `builders` package to compare")
    p_cli.add_argument("--cold", type=int, help="labels of the cold runs [default: the most]")
    p_cli.add_argument("--work", help="folder for the label files and the stores (kept)")
    p_st = sub.add_parser("stages", help="traced peak of each numerical stage")
    p_st.add_argument("--labels", default="20000,100000", help="evaluation label counts")
    p_st.add_argument("--train", type=int, default=368, help="training labels")
    p_st.add_argument("--dim", type=int, default=384, help="vector dimensions")
    args = parser.parse_args(argv)
    (cli if args.what == "cli" else stages)(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
