#!/usr/bin/env python
"""Check built label-shift levels against their promise, with code independent of the build.

    python scripts/verify_levels.py out/demo/pilener-sample-{low,medium,high}-shift \\
        --config familiarity

First the levels are checked to come from one build (`builders.hub.manifest.check_levels`:
no interrupted build beside them, every file as its build wrote it, one build id; folders
without a manifest are read with a note). Then for every level folder it reads only what a
user downloads: the config's parquet rows and
its build.json (for the model, K, weighting and the benchmarks' label lists), and then

- counts each label's mentions in the parquet spans;
- embeds the training and evaluation labels with sentence-transformers directly (the model
  folder is located by `builders.shift.models.resolve_model`, nothing else of the toolkit is
  used), clips cosines at 0 and sets an exact label match to 1 (METHOD.md section 4);
- computes Familiarity literally (every similarity repeated by its count, sorted, the first K
  weighted) and its union macro and per-benchmark means;
- compares them with build.json's figures (and each check model's, when the build named any);
- checks the levels share no label, hold the same mentions (within 1%) and fall in order
  under every model (by the build's --min-gap for the familiarity strategy);
- recomputes what makes the levels comparable (METHOD.md section 4) from the rows: each
  level's sentences also in another of the folders given (by `id`), its effective labels
  (exp of the entropy of its labels' mention shares) and its largest label's share, and
  compares them with build.json's.

Prints one line per level and model, then `verdict: OK` or the failures; exits 1 on failure.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import Counter
from itertools import combinations, pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LEVELS = ("low", "medium", "high")


def read_level(folder: Path, config: str) -> tuple[dict, Counter, set[str]]:
    """build.json, each label's mentions in the parquet rows and the rows' sentence ids."""
    build = json.loads((folder / config / "build.json").read_text(encoding="utf-8"))
    counts: Counter = Counter()
    ids: set[str] = set()
    for path in sorted((folder / config).glob("train-*.parquet")):
        table = pq.read_table(path, columns=["id", "spans"])
        ids.update(table.column("id").to_pylist())
        for spans in table.column("spans").to_pylist():
            counts.update(s["label"] for s in spans)
    return build, counts, ids


_MODELS: dict = {}


def embed(model: str, texts: list[str]) -> np.ndarray:
    """Unit vectors of `texts` with sentence-transformers' own encode."""
    from sentence_transformers import SentenceTransformer

    from builders.shift.models import resolve_model  # where the weights are, nothing more

    if model not in _MODELS:
        _MODELS[model] = SentenceTransformer(resolve_model(model).path_or_name, device="cpu")
    st = _MODELS[model]
    return np.asarray(st.encode(texts, normalize_embeddings=True), dtype=np.float64)


def literal_familiarity(
    sims: np.ndarray, counts: np.ndarray, labels: list[str], k: int, weighting: str
) -> np.ndarray:
    """F(z) per row of `sims` (Z, D): repeat, sort (ties by label text), keep K, weight."""
    out = np.zeros(sims.shape[0])
    order_text = np.argsort(np.array(labels, dtype=str), kind="stable")
    rank = np.empty(len(labels), dtype=np.int64)
    rank[order_text] = np.arange(len(labels))
    for i, row in enumerate(sims):
        order = np.lexsort((rank, -row))
        values = np.repeat(row[order], counts[order])[:k]
        pos = np.arange(1, values.size + 1, dtype=np.float64)
        if weighting == "unweighted":
            out[i] = values.sum() / k
            continue
        w = 1.0 / pos if weighting == "zipf" else (k - pos + 1) / k
        out[i] = (values * w).sum() / w.sum()
    return out


def figures(build: dict, counts: Counter, model: str, cache: dict) -> dict[str, float]:
    """The union macro and per-benchmark Familiarity of these counts under `model`."""
    cfg = build["config"]
    benches = {n: b["labels"] for n, b in build["subset"]["familiarity"]["per_benchmark"].items()}
    evals = list(dict.fromkeys(z for labels in benches.values() for z in labels))
    train = sorted(counts)
    missing = [t for t in [*train, *evals] if (model, t) not in cache]
    if missing:
        for t, v in zip(missing, embed(model, missing), strict=True):
            cache[(model, t)] = v
    a = np.stack([cache[(model, t)] for t in evals])
    b = np.stack([cache[(model, t)] for t in train])
    sims = np.maximum(a @ b.T, 0.0)
    for i, z in enumerate(evals):
        if z in counts:
            sims[i, train.index(z)] = 1.0
    c = np.array([counts[t] for t in train], dtype=np.int64)
    f = dict(
        zip(evals, literal_familiarity(sims, c, train, cfg["k"], cfg["weighting"]), strict=True)
    )
    out = {"union": float(np.mean([f[z] for z in evals]))}
    out.update({n: float(np.mean([f[z] for z in labels])) for n, labels in benches.items()})
    return out


def reported(rep: dict) -> dict[str, float]:
    return {"union": rep["union_macro"]} | {
        n: b["familiarity"] for n, b in rep["per_benchmark"].items()
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("folders", nargs="+", type=Path, help="the levels' repo folders")
    ap.add_argument("--config", default="familiarity", help="the config (strategy) to check")
    ap.add_argument("--tolerance", type=float, default=2e-3)
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from builders.errors import BuildersError
    from builders.hub.manifest import check_levels

    try:
        check_levels(args.folders, args.config, note=lambda t: print(f"note: {t}", file=sys.stderr))
    except BuildersError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        print(f"verdict: FAILED: {exc}")
        return 1
    cache: dict = {}
    failures: list[str] = []
    levels: dict[str, dict[str, tuple[dict, Counter, float]]] = {}  # model -> level -> figures
    ids: dict[str, set[str]] = {}
    for folder in args.folders:
        build, counts, level_ids = read_level(folder, args.config)
        level = build["subset"]["level"]
        ids[level] = level_ids
        cfg = build["config"]
        checks = [(cfg["model"], build["subset"]["familiarity"])]
        named = _listed(cfg.get("check_model"))
        checks += zip(named, _listed(build["subset"].get("check_familiarity")), strict=True)
        for model, rep in checks:
            mine, theirs = figures(build, counts, model, cache), reported(rep)
            delta = max(abs(mine[n] - theirs[n]) for n in theirs)
            print(
                f"{level} {model}: union {mine['union']:.6f} (reported {theirs['union']:.6f}), "
                f"max |delta| over union and benchmarks {delta:.2e}, "
                f"{sum(counts.values()):,} mentions, {len(counts):,} labels"
            )
            if delta > args.tolerance:
                failures.append(f"{level} under {model} differs by {delta:.2e}")
            levels.setdefault(model, {})[level] = (build, counts, mine["union"])
    for model, by_level in levels.items():
        failures += _promises(model, by_level)
    if levels:
        failures += _composition(levels[cfg["model"]], ids)
    print("verdict: OK" if not failures else "verdict: FAILED: " + "; ".join(failures))
    return 1 if failures else 0


def _listed(value: Any) -> list[Any]:
    """A build.json entry per check model as a list: older builds hold one model's."""
    if not value:
        return []
    return [value] if isinstance(value, (str, dict)) else list(value)


def _promises(model: str, levels: dict[str, tuple[dict, Counter, float]]) -> list[str]:
    """Disjoint labels, sizes within 1%, and the order of the Familiarity recomputed under
    `model` (by the build's --min-gap for the familiarity strategy)."""
    order = [lv for lv in LEVELS if lv in levels]
    out = []
    for a, b in combinations(order, 2):
        shared = set(levels[a][1]) & set(levels[b][1])
        if shared:
            out.append(f"{a} and {b} share {len(shared)} labels")
    sizes = [sum(levels[lv][1].values()) for lv in order]
    if sizes and (max(sizes) - min(sizes)) > 0.01 * max(sizes):
        out.append(f"sizes differ by more than 1%: {sizes}")
    cfg = levels[order[0]][0]["config"] if order else {}
    gap = cfg.get("min_gap", 0.0) if cfg.get("strategy") == "familiarity" else 0.0
    values = [levels[lv][2] for lv in order]
    for (a, x), (b, y) in pairwise(zip(order, values, strict=True)):
        if not x - y >= max(gap, 1e-12):
            out.append(f"{a} ({x:.4f}) is not above {b} ({y:.4f}) by {gap:g} under {model}")
    shown = ", ".join(f"{lv} {v:.4f}" for lv, v in zip(order, values, strict=True))
    print(f"levels under {model}: {shown}")
    return out


def _composition(
    levels: dict[str, tuple[dict, Counter, float]], ids: dict[str, set[str]]
) -> list[str]:
    """Each level's sentences also in another level, effective labels and largest label's
    share, recomputed from its rows, against its build.json."""
    out = []
    for level, (build, counts, _) in levels.items():
        sub, total = build["subset"], sum(counts.values())
        if not total:
            out.append(f"{level}: no mentions")
            continue
        mine = ids[level]
        others = set().union(*(v for k, v in ids.items() if k != level))
        shared = len(mine & others)
        effective = math.exp(-sum(n / total * math.log(n / total) for n in counts.values()))
        top, n = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        if "sentences_shared" not in sub:
            print(f"note: {level}: build.json records no sentences_shared (an older build)")
            continue
        largest = sub["largest_label"] or {}
        print(
            f"{level}: {shared:,} of {len(mine):,} sentences also in another level (reported "
            f"{sub['sentences_shared']:,}), effective labels {effective:.4f} (reported "
            f"{sub['effective_labels']:.4f}), largest label {top!r} {n / total:.4%} of the "
            f"mentions (reported {largest.get('label')!r} {largest.get('share', 0.0):.4%})"
        )
        if not (
            shared == sub["sentences_shared"]
            and math.isclose(effective, sub["effective_labels"], rel_tol=1e-9)
            and (top, n) == (largest.get("label"), largest.get("mentions"))
            and math.isclose(n / total, largest.get("share", -1.0), rel_tol=1e-9)
        ):
            out.append(f"{level}: sentences shared, effective labels or largest label differ")
    return out


if __name__ == "__main__":
    sys.exit(main())
