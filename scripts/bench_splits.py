"""Benchmark `build-splits` end to end on a NuNER-sized corpus (warm and cold embedding cache).

    python scripts/bench_splits.py --csv build/nuner-scale/nuner-scale.csv --model all-MiniLM-L6-v2

1. Ingests the CSV into a fresh store (`scripts/make_nuner_scale.py` makes one; skipped if the
   store already holds it).
2. Cold cache: runs `build-splits` in a child process with no cached embeddings, and times the
   embedding stage inside it against the model's raw `encode` on the same labels.
3. Warm cache: runs the same `build-splits` again in a child process: wall time and peak RSS
   (the target is under 2 minutes and 4 GB on 2 cores). With several strategies
   (`--strategy entropy,familiarity`), each gets a warm build, run in turn `--repeat` times,
   and the table gives each one's median wall time as a ratio of the first strategy's, and
   its phases as the build times them (`BuildResult.timings`, logged at DEBUG: similarities,
   placement: scores or windows and the levels fitted, rows: each level's rows written and
   measured, measure, write, total), with the placement's share and the placement against
   the first strategy's whole build (issue 29: the search within 1.5x an entropy build), and
   the rows each strategy's levels write and the rows phase's pace. `--equal-output` adds
   `familiarity@equal`: familiarity levels that write, in all, the mentions the first
   strategy's levels write, so the placement is compared with a build writing as much.

Figures are printed as one table; compare ratios within one run, the machines are noisy.
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
from typing import Any


def run_child(args: list[str], cwd: Path | None = None) -> tuple[float, float, str]:
    """Run a command; return (wall seconds, its own peak RSS in GB, stdout)."""
    wall, gb, stdout, _ = run_child_err(args, cwd)
    return wall, gb, stdout


def run_child_err(args: list[str], cwd: Path | None = None) -> tuple[float, float, str, str]:
    """`run_child`, with the command's stderr too."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's rusage, not all children's
        wall = time.perf_counter() - start
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if code != 0:
        sys.exit(f"command failed ({code}): {' '.join(args)}\n{stderr[-3000:]}")
    return wall, usage.ru_maxrss / 1024 / 1024, stdout, stderr


def cold_rows(args: argparse.Namespace, rows: list[tuple[str, str]]) -> None:
    """Throughput of the embedding stage vs the model's raw encode, on the same labels, with
    nothing cached (the vectors are dropped after)."""
    import numpy as np

    from builders.shift.embedder import Embedder
    from builders.store import Store

    with Store(args.db) as store:
        labels = [r[0] for r in store.label_counts("nuner", top=args.raw_sample, by="label")]
        emb = Embedder(args.model)
        key = emb.cache_key  # what the vectors are cached under (not the model name alone)
        store.drop_vectors(key)
        emb.encode(labels[:256])  # load the model and warm both paths outside the timings
        emb.st.encode(labels[:256], batch_size=emb.batch_size)
        t0 = time.perf_counter()
        raw = emb.st.encode(labels, batch_size=emb.batch_size, normalize_embeddings=True)
        t_raw = time.perf_counter() - t0
        t0 = time.perf_counter()
        cached = emb.embed_cached(store, labels)
        t_cached = time.perf_counter() - t0
        assert np.allclose(raw, cached, atol=1e-5)
        assert emb.last_stats is not None and emb.last_stats.cached == 0  # cold for real
        store.drop_vectors(key)
    rows.append(("raw encode", f"{len(labels) / t_raw:,.0f} labels/s"))
    rows.append(
        (
            "embed_cached, cold",
            f"{len(labels) / t_cached:,.0f} labels/s ({t_cached / t_raw:.3f}x the raw time)",
        )
    )


def parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--csv", type=Path, default=Path("build/nuner-scale/nuner-scale.csv"))
    ap.add_argument("--db", type=Path, default=Path("build/bench-splits.duckdb"))
    ap.add_argument("--out", type=Path, default=Path("build/bench-splits-out"))
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument(
        "--strategy", default="entropy", help="comma-separated; ratios are against the first"
    )
    ap.add_argument("--repeat", type=int, default=1, help="warm builds per strategy")
    ap.add_argument(
        "--raw-sample",
        type=int,
        default=20000,
        help="labels for the raw-encode vs cached-embed throughput comparison",
    )
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument(
        "--equal-output",
        action="store_true",
        help="also build familiarity levels holding, in all, the mentions the first "
        "strategy's levels write (--level-mentions: a third of them): the search's cost "
        "beside a build that writes as much",
    )
    return ap


def corpus_rows(args: argparse.Namespace, exe: list[str], rows: list[tuple[str, str]]) -> None:
    """Ingest the CSV in a child process unless the store holds `nuner` (a row with its time
    and peak RSS), then a row with the corpus's size."""
    from builders.store import Store

    with Store(args.db) as store:
        have = store.has_source("nuner")
    if not have:
        if not args.csv.exists():
            sys.exit(f"{args.csv}: missing; run scripts/make_nuner_scale.py first")
        wall, gb, _ = run_child(
            [*exe, "ingest", "nuner", "--path", str(args.csv), "--db", str(args.db), "-q"]
        )
        rows.append(("ingest (NuNER-sized)", f"{wall:.1f} s, peak {gb:.2f} GB"))

    with Store(args.db) as store:
        n_labels = len(store.label_counts("nuner"))
        n_sent = store.count_sentences("nuner")
    rows.append(("corpus", f"{n_sent:,} sentences, {n_labels:,} labels"))


#: A variant of a strategy (`--equal-output`) whose levels hold, in all, the mentions the
#: first strategy's levels write: `familiarity@equal`.
EQUAL = "@equal"


def build_cmd(
    args: argparse.Namespace, exe: list[str], strategy: str, size: int | None = None
) -> list[str]:
    """The `build-splits` command of one strategy (JSON out, into its own folder); `size`:
    its `--level-mentions` (the `EQUAL` variant's)."""
    name = strategy.removesuffix(EQUAL)
    sized = ["--level-mentions", str(size)] if size is not None else []
    return [
        *exe,
        "build-splits",
        "--source",
        "nuner",
        "--strategy",
        name,
        *sized,
        "--model",
        args.model,
        "--db",
        str(args.db),
        "--out",
        str(args.out / strategy.replace(EQUAL, "-equal")),
        "-q",
        "--json",
    ]


#: The first argument that makes this script the CLI with the build's phase timings logged
#: to stderr (`splits.pipeline` logs them at DEBUG; nothing else changes: the same command,
#: the same files). A script file, not `python -c`: DuckDB takes a `__main__` without a file
#: for an interactive session and draws its progress bar on stdout, in the `--json` output.
TIMED_CLI = "--as-timed-cli"


def timed_cli(args: list[str]) -> None:
    """`builders ARGS` with the phase log on (see `TIMED_CLI`)."""
    import logging

    from builders.cli.main import main as cli_main

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("builders.splits.pipeline")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    sys.argv = ["builders", *args]
    cli_main()


#: The phases `splits.pipeline.build` times (`BuildResult.timings`), in build order.
PHASES = ("similarities", "placement", "rows", "measure", "write", "total")


def phases_of(stderr: str) -> dict[str, float]:
    """The phase seconds a timed build logged (`phase STRATEGY PHASE SECONDS` lines)."""
    found = {}
    for line in stderr.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "phase":
            found[parts[2]] = float(parts[3])
    return found


def warm_rows(
    args: argparse.Namespace, strategies: list[str], rows: list[tuple[str, str]]
) -> dict[str, Any]:
    """--repeat warm builds of every strategy, interleaved so that load drifts hit every
    strategy; a row per strategy (median wall time, peak RSS, ratio to the first), then
    each one's phases (medians of what the build timed) and the placement's share of it.
    Returns the result of the last build."""
    walls: dict[str, list[float]] = {s: [] for s in strategies}
    peaks: dict[str, float] = dict.fromkeys(strategies, 0.0)
    timed: dict[str, list[dict[str, float]]] = {s: [] for s in strategies}
    written: dict[str, tuple[int, int]] = {}
    timed_exe = [sys.executable, str(Path(__file__).resolve()), TIMED_CLI]
    size = None  # the EQUAL variant's level size, from the first strategy's first build
    for _ in range(args.repeat):
        for strategy in strategies:
            cmd = build_cmd(args, timed_exe, strategy, size if EQUAL in strategy else None)
            wall, gb, out, err = run_child_err(cmd)
            walls[strategy].append(wall)
            peaks[strategy] = max(peaks[strategy], gb)
            phases = phases_of(err)
            if not phases:  # the pipeline's DEBUG log did not come through
                sys.exit(f"build-splits --strategy {strategy} logged no phase timings")
            timed[strategy].append(phases)
            res = json.loads(out)["result"][0]
            written[strategy] = (
                sum(sub["sentences"] for sub in res["subsets"]),
                sum(sub["mentions"] for sub in res["subsets"]),
            )
            if size is None:
                size = written[strategy][1] // len(res["subsets"])
    for strategy in strategies:
        mid = statistics.median(walls[strategy])
        ratio = mid / statistics.median(walls[strategies[0]])
        rows.append(
            (
                f"build-splits --strategy {strategy}, warm",
                f"{mid:.1f} s median of {len(walls[strategy])}, peak {peaks[strategy]:.2f} GB, "
                f"{ratio:.2f}x {strategies[0]}",
            )
        )
    phase_rows(strategies, timed, written, rows)
    return res


def phase_rows(
    strategies: list[str],
    timed: dict[str, list[dict[str, float]]],
    written: dict[str, tuple[int, int]],
    rows: list[tuple[str, str]],
) -> None:
    """A row per strategy: its phases' median seconds (as the build timed them, in the
    child), the placement's share of its total, its placement (the search for the levels'
    windows and size, and their fitting) against the first strategy's whole build, and the
    rows its levels write (sentences and mentions, all levels) with the rows phase's pace:
    levels of another size write another amount, at about the same pace."""
    mid = {
        s: {p: statistics.median(t.get(p, 0.0) for t in timed[s]) for p in PHASES}
        for s in strategies
    }
    first = mid[strategies[0]]
    for s in strategies:
        m = mid[s]
        shown = ", ".join(f"{p} {m[p]:.1f}" for p in PHASES)
        share = m["placement"] / m["total"] if m["total"] else 0.0
        vs = ""
        if s != strategies[0] and first["total"]:
            vs = (
                f"; placement {m['placement'] / first['total']:.2f}x {strategies[0]}'s whole "
                f"build, total {m['total'] / first['total']:.2f}x"
            )
        rows.append((f"  phases, {s} (s)", f"{shown}; placement {share:.0%} of total{vs}"))
        sentences, mentions = written[s]
        pace = f", {sentences / m['rows'] / 1000:.0f}k sentences/s" if m["rows"] else ""
        rows.append(
            (
                f"  written, {s}",
                f"{sentences:,} sentences, {mentions:,} mentions (all levels){pace}",
            )
        )


def main() -> None:
    if sys.argv[1:2] == [TIMED_CLI]:  # a timed build's child process (`warm_rows`)
        timed_cli(sys.argv[2:])
        return
    args = parser().parse_args()
    # the store's cache only: the per-user one would make the cold rows warm
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LABELSHIFT_EMBEDDINGS": "off"}
    os.environ.update(env)
    exe = [sys.executable, "-m", "builders"]
    rows: list[tuple[str, str]] = []
    corpus_rows(args, exe, rows)
    strategies = args.strategy.split(",")
    if args.equal_output:
        strategies.append("familiarity" + EQUAL)
    if not args.skip_cold:
        cold_rows(args, rows)
        wall, gb, _ = run_child(build_cmd(args, exe, strategies[0]))
        rows.append(("build-splits, cold cache", f"{wall:.1f} s, peak {gb:.2f} GB"))

    res = warm_rows(args, strategies, rows)
    for sub in res["subsets"]:
        rows.append(
            (
                f"  {sub['level']} subset ({strategies[-1]})",
                f"{sub['sentences']:,} sentences, {sub['mentions']:,} mentions, "
                f"{sub['labels']:,} labels, Familiarity {sub['familiarity']['union_macro']:.4f}",
            )
        )
    rows.append(("  full corpus", f"Familiarity {res['full']['familiarity']['union_macro']:.4f}"))

    width = max(len(k) for k, _ in rows)
    print(f"model {args.model}, strategy {args.strategy}, {os.cpu_count()} CPUs")
    for k, v in rows:
        print(f"{k:<{width}}  {v}")


if __name__ == "__main__":
    main()
