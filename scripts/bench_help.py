#!/usr/bin/env python
"""Time `builders --help` and every command's `--help`, each in a fresh process.

    python scripts/bench_help.py [--runs 7] [--base REV]

The target (issue 31) is under 0.2 s a help. Each help runs `--runs` times, interleaved with
`python -c pass` (the interpreter's own start) so that a busy machine shows in the baseline;
the table gives min and median seconds. Bytecode is written and used, as in a user's install
(a shell with PYTHONDONTWRITEBYTECODE=1 recompiles every module on each start: about 0.08 s
more). With `--base REV`, the same helps of the code at git revision REV (extracted to a
temporary folder and put first on its path) are timed in the same rounds, and the table gives
their ratio (a command REV lacks has none).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def commands() -> list[str]:
    from builders.cli.main import COMMANDS

    return sorted(COMMANDS)


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - start


def runs(argv: list[str], env: dict[str, str]) -> bool:
    """Whether the command exits cleanly (a command the older code lacks does not)."""
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return done.returncode == 0


def help_argv(tree: Path, name: str | None) -> list[str]:
    """`builders [name] --help` of the code in `tree` (this interpreter, that tree first)."""
    code = (
        f"import sys; sys.path.insert(0, {str(tree)!r}); sys.argv = ['builders'"
        + (f", {name!r}" if name else "")
        + ", '--help']; from builders.cli.main import main; main()"
    )
    return [sys.executable, "-c", code]


def extract(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--base", help="a git revision to compare with")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"now": ROOT}
        if args.base:
            trees["base"] = extract(args.base, Path(tmp))
        rows: dict[str, dict[str, list[float]]] = {}
        names: list[str | None] = [None, *commands()]
        has = {}  # (tree, command): whether that code has the command (one added since REV)
        for label, tree in trees.items():  # compile and write bytecode once, untimed
            for name in names:
                has[label, name] = runs(help_argv(tree, name), env)
        for _ in range(args.runs):
            rows.setdefault("python -c pass", {}).setdefault("now", []).append(
                timed([sys.executable, "-c", "pass"], env)
            )
            for name in names:
                for label, tree in trees.items():
                    if not has[label, name]:
                        continue
                    key = f"{name or 'builders'} --help"
                    rows.setdefault(key, {}).setdefault(label, []).append(
                        timed(help_argv(tree, name), env)
                    )
    print(f"{'command':<28} {'min':>6} {'median':>7}" + ("  base med  now/base" * bool(args.base)))
    for key, by in rows.items():
        now = by["now"]
        line = f"{key:<28} {min(now):6.3f} {statistics.median(now):7.3f}"
        if "base" in by:
            base = statistics.median(by["base"])
            line += f"  {base:8.3f}  {statistics.median(now) / base:8.2f}"
        print(line)


if __name__ == "__main__":
    main()
