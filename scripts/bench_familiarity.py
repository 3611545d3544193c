"""Benchmark closed-form Familiarity against the literal repeat-by-count reference.

Generates a random but realistic input (clipped Beta similarities, Zipf-like support counts
summing to about --mentions), times `familiarity` and `familiarity_reference` on the same input
in the same run, checks that they agree to 1e-9 and prints the timings, their ratio and the
peak RSS. Example:

    python scripts/bench_familiarity.py --labels 200000 --eval 80 --k 1000 --reference-eval 10
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time

import numpy as np

from builders.shift.familiarity import familiarity, familiarity_reference


def make_input(
    n_labels: int, n_eval: int, mentions: int, seed: int
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Sims (Z, D) float32 in [0, 1] with clipped zeros; counts ~ 1/rank, shuffled; labels."""
    rng = np.random.default_rng(seed)
    # Cosines of label embeddings sit mostly in 0..0.5; shifting by 0.05 and clipping at 0
    # gives the exact zeros that clipped cosine produces (and hence large ties).
    sims = np.maximum(rng.beta(2.0, 5.0, size=(n_eval, n_labels)) - 0.05, 0).astype(np.float32)
    weights = 1.0 / np.arange(1, n_labels + 1)
    counts = np.maximum(np.round(weights * mentions / weights.sum()), 1).astype(np.int64)
    rng.shuffle(counts)
    labels = [f"label {i:07d}" for i in rng.permutation(n_labels)]
    return sims, counts, labels


def peak_rss_mib() -> float:
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return kib / 1024


def parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=200_000, help="training labels D")
    parser.add_argument("--eval", type=int, default=80, help="evaluation labels Z")
    parser.add_argument("--k", type=int, default=1000, help="K, values kept")
    parser.add_argument("--mentions", type=int, default=4_400_000, help="about sum of counts")
    parser.add_argument("--weighting", default="zipf", choices=("zipf", "linear", "unweighted"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="closed-form runs; best is shown")
    parser.add_argument(
        "--reference-eval",
        type=int,
        default=None,
        help="time the reference on the first N eval labels only and extrapolate (default: all)",
    )
    return parser


def print_setup(args: argparse.Namespace, sims: np.ndarray, counts: np.ndarray) -> None:
    """The input's shape and the machine it runs on."""
    print(
        f"input: Z={args.eval} D={args.labels} K={args.k} weighting={args.weighting} "
        f"sum(c)={int(counts.sum()):,} sims={sims.dtype} seed={args.seed}"
    )
    print(
        f"machine: {platform.machine()} {os.cpu_count()} CPUs (affinity {len(os.sched_getaffinity(0))}), "
        f"numpy {np.__version__}, python {platform.python_version()}"
    )


def time_closed_form(
    args: argparse.Namespace, sims: np.ndarray, counts: np.ndarray, labels: list[str]
) -> tuple[np.ndarray, list[float]]:
    """`familiarity` run --repeat times (at least once): its F(z) and the time of each run."""
    times = []
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        fast = familiarity(sims, counts, args.k, args.weighting, labels)
        times.append(time.perf_counter() - t0)
    return fast, times


def print_rows(rows: list[tuple[str, str, str]]) -> None:
    """The results as a three-column table (what, seconds or value, note)."""
    width = max(len(r[0]) for r in rows)
    print(f"\n{'what':<{width}}  {'seconds / value':>15}  note")
    for name, value, extra in rows:
        print(f"{name:<{width}}  {value:>15}  {extra}")


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    sims, counts, labels = make_input(args.labels, args.eval, args.mentions, args.seed)
    rss_input = peak_rss_mib()
    print_setup(args, sims, counts)

    fast, times = time_closed_form(args, sims, counts, labels)
    t_fast = min(times)
    rss_fast = peak_rss_mib()

    n_ref = args.eval if args.reference_eval is None else min(args.reference_eval, args.eval)
    t0 = time.perf_counter()
    slow = familiarity_reference(sims[:n_ref], counts, args.k, args.weighting, labels)
    t_ref_measured = time.perf_counter() - t0
    t_ref = t_ref_measured * args.eval / n_ref
    rss_ref = peak_rss_mib()

    diff = float(np.abs(fast[:n_ref] - slow).max())
    ok = diff <= 1e-9
    note = "" if n_ref == args.eval else f" (measured on {n_ref} rows, x{args.eval / n_ref:g})"
    print_rows(
        [
            (
                "closed form (familiarity)",
                f"{t_fast:.3f}",
                f"best of {len(times)}: " + ", ".join(f"{t:.3f}" for t in times),
            ),
            (
                "reference (repeat by count)",
                f"{t_ref:.3f}",
                f"{t_ref_measured:.3f}s measured{note}",
            ),
            ("ratio reference / closed", f"{t_ref / t_fast:.1f}x", ""),
            ("max |difference|", f"{diff:.2e}", "OK (<= 1e-9)" if ok else "MISMATCH (> 1e-9)"),
            ("peak RSS after input", f"{rss_input:.0f} MiB", ""),
            ("peak RSS after closed form", f"{rss_fast:.0f} MiB", ""),
            ("peak RSS after reference", f"{rss_ref:.0f} MiB", ""),
            ("mean F(z)", f"{fast.mean():.5f}", ""),
        ]
    )
    if not ok:
        print("closed form and reference disagree", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
