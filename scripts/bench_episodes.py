"""Episodes per second of the greedy N-way K~2K-shot sampler on Few-NERD INTER dev.

Usage: python scripts/bench_episodes.py [--path ../shared/data/fewnerd/inter/dev.txt] [--episodes 2000]

Reads the official INTER dev file (18,817 sentences) into a temporary store, then times
`sample_episodes` (support and query, 5-way 1~2-shot and 10-way 5~10-shot) and the checks.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from builders.fewnerd.episodes import check_episode, sample_episodes
from builders.fewnerd.splits import store_examples
from builders.store import Store
from builders.store.ingest import ingest

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "fewnerd" / "inter" / "dev.txt"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", type=Path, default=DEFAULT)
    ap.add_argument("--episodes", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "bench.duckdb") as store:
        ingest(store, "fewnerd", args.path, split="dev")
        examples = store_examples(store, "fewnerd", "dev")
    rows = []
    for n, k in ((5, 1), (10, 5)):
        start = time.perf_counter()
        eps = sample_episodes(examples, None, n, k, args.episodes, seed=args.seed)
        seconds = time.perf_counter() - start
        bad = sum(bool(check_episode(ep, examples, n, k)) for ep in eps)
        rows.append(
            {
                "setting": f"{n}-way {k}~{2 * k}-shot",
                "sentences": len(examples),
                "episodes": len(eps),
                "seconds": round(seconds, 3),
                "episodes_per_s": round(len(eps) / seconds, 1),
                "failed_checks": bad,
            }
        )
    print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
