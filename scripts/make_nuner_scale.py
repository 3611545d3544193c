#!/usr/bin/env python
"""Generate a NuNER-sized CSV for BENCHMARKING ONLY: synthetic rows built from real excerpts.

The real NuNER (numind/NuNER, MIT) is about 1M sentences, 4.4M mentions and 200k types; it is
not available offline, so this writes a file of the same size and format (`input,output`, the
output a Python list literal of `'<mention> <> <type>'`) from real material:

- sentences: the real sentences of the column files under the shared data folder (Pile-NER's
  BIO passages cut at sentence ends, CrossNER, CoNLL-2003, MIT Movie / Restaurant) or of the
  `--from` files, lightly detokenised (no space before `, . ; : ! ? )`), drawn with repetition
  in proportion to their length (a mean of about 28 tokens, like C4 sentences);
- mentions: the sentence's real entities, topped up with word n-grams of the sentence to about
  4.4 mentions a row on average; about 1% of items name a mention from another sentence (not
  found, as in real NuNER);
- types: the 924 real NuNER type names (`nuner/top_tag_names.json`) in their frequency order,
  extended by deterministic compounds `<type> of <other type>` to about 212k names, and drawn
  with a Zipf (s=1) frequency so that about 200k distinct types occur.

The rows are SYNTHETIC: the sentence/mention/type combinations mean nothing; use the file to
measure speed and memory, never to train or evaluate. Deterministic for a given `--seed` and
inputs; written atomically (temporary file + `os.replace`) with a README beside it.

Usage: python scripts/make_nuner_scale.py --out build/nuner-scale/nuner-scale.csv
       python scripts/make_nuner_scale.py --scale 10 --out build/scale/nuner-x10.csv

`--scale S` makes S times NuNER: S million rows and about 200k * S^0.4 distinct types (a
vocabulary that grows slower than the text, as real corpora's do: 3x ~310k, 10x ~500k).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from builders.sources.base import ReadReport  # noqa: E402
from builders.sources.columns import read as read_columns  # noqa: E402

DEFAULT_SHARED = Path(os.environ.get("LABELSHIFT_SHARED_DATA", ROOT.parent / "shared" / "data"))
DEFAULT_OUT = ROOT / "build" / "nuner-scale" / "nuner-scale.csv"
ZIPF_S = 1.0
NAME_POOL_FACTOR = 1.06  # names beyond the target so that ~target distinct types are drawn

# (relative path, reader options); token-first unless said otherwise
SHARED_FILES: list[tuple[str, dict]] = [
    ("pilener/pilener-391xALL-dev.bio", {"sep": "\t", "repair": True, "split_passages": True}),
    *(
        (f"crossner/{d}/{s}.txt", {"sep": "\t"})
        for d in ("ai", "literature", "music", "politics", "science")
        for s in ("train", "dev", "test")
    ),
    ("crossner/conll2003/train.txt", {"sep": "\t"}),
    ("mit-movie/engtrain.bio", {"sep": "\t", "columns": "tag,token"}),
    ("mit-restaurant/restauranttrain.bio", {"sep": "\t", "columns": "tag,token"}),
]

_NO_SPACE_BEFORE = re.compile(r" ([,.;:!?)\]}])")
_NO_SPACE_AFTER = re.compile(r"([(\[{]) ")


def detok(tokens: list[str]) -> str:
    return _NO_SPACE_AFTER.sub(r"\1", _NO_SPACE_BEFORE.sub(r"\1", " ".join(tokens)))


def load_sentences(files: list[tuple[Path, dict]]) -> list[tuple[list[str], list[tuple[int, int]]]]:
    """(tokens, entity spans) of every sentence; Pile-NER passages cut after `.`/`!`/`?`."""
    out: list[tuple[list[str], list[tuple[int, int]]]] = []
    for path, opts in files:
        if not path.exists():
            print(f"skipping missing {path}", file=sys.stderr)
            continue
        opts = dict(opts)
        split = opts.pop("split_passages", False)
        for ex in read_columns(path, ReadReport(), scheme="bio", **opts):
            spans = [(a, b) for a, b, _ in ex.spans]
            if not split:
                out.append((ex.tokens, spans))
                continue
            start = 0
            for i, tok in enumerate(ex.tokens):
                end = i + 1
                if (tok in (".", "!", "?") and end - start >= 6) or end - start >= 80:
                    out.append(_cut(ex.tokens, spans, start, end))
                    start = end
            if len(ex.tokens) - start >= 3:
                out.append(_cut(ex.tokens, spans, start, len(ex.tokens)))
    return [s for s in out if s[0]]


def _cut(
    tokens: list[str], spans: list[tuple[int, int]], a: int, b: int
) -> tuple[list[str], list[tuple[int, int]]]:
    return tokens[a:b], [(s - a, e - a) for s, e in spans if a <= s and e <= b]


def type_names(real: list[str], n: int, rng: np.random.Generator) -> list[str]:
    """The real names first, then `<a> of <b>` compounds in a seeded order, n in all."""
    names = list(dict.fromkeys(real))
    seen = set(names)
    k = len(names)
    for pair in rng.permutation(k * k):
        if len(names) >= n:
            break
        a, b = divmod(int(pair), k)
        if a == b:
            continue
        name = f"{names[a]} of {names[b]}"
        if name not in seen:
            seen.add(name)
            names.append(name)
    return names[:n]


@dataclass
class Draws:
    """Every numpy draw of a run, made in one fixed order (the bytes written depend on it)."""

    names: list[str]  # the type names, most frequent first
    per_row: np.ndarray  # mentions in each row
    type_ids: np.ndarray  # the type of each mention, in row order
    picks: np.ndarray  # the pool sentence of each row
    lengths: np.ndarray  # tokens in each pool sentence


@dataclass
class Tally:
    """What the rows written so far hold."""

    items: int = 0
    foreign: int = 0  # mentions taken from another sentence
    distinct: set[int] = field(default_factory=set)
    next_type: int = 0  # index into Draws.type_ids


def draw(
    sentences: list[tuple[list[str], list[tuple[int, int]]]],
    real_types: list[str],
    args: argparse.Namespace,
) -> Draws:
    """The type names, the mentions per row, their types and the rows' sentences."""
    rng = np.random.default_rng(args.seed)
    names = type_names(real_types, int(args.types * NAME_POOL_FACTOR), rng)
    weights = 1.0 / np.arange(1, len(names) + 1) ** ZIPF_S
    cdf = np.cumsum(weights / weights.sum())
    per_row = 1 + rng.poisson(args.mentions_per_row - 1, args.rows)
    total = int(per_row.sum())
    type_ids = np.minimum(np.searchsorted(cdf, rng.random(total)), len(names) - 1)
    # Drawn in proportion to length: a mean near 28 tokens, C4-like sentences, not MIT's queries.
    lengths = np.array([len(tok) for tok, _ in sentences], dtype=np.float64)
    picks = np.minimum(
        np.searchsorted(np.cumsum(lengths / lengths.sum()), rng.random(args.rows)),
        len(sentences) - 1,
    )
    return Draws(names, per_row, type_ids, picks, lengths)


def row_mentions(
    tokens: list[str],
    spans: list[tuple[int, int]],
    k: int,
    sentences: list[tuple[list[str], list[tuple[int, int]]]],
    py: random.Random,
    tally: Tally,
) -> list[str]:
    """The sentence's first k entities, topped up to k with its word n-grams (about 1% of
    them a mention from another sentence instead)."""
    mentions = [" ".join(tokens[a:b]) for a, b in spans[:k]]
    words = [i for i, tok in enumerate(tokens) if tok[0].isalnum()] or [0]
    n = len(tokens)
    while len(mentions) < k:
        if py.random() < 0.01:  # a mention from another sentence: usually not found
            other, ospans = sentences[py.randrange(len(sentences))]
            a, b = ospans[0] if ospans else (0, 1)
            mentions.append(" ".join(other[a:b]))
            tally.foreign += 1
            continue
        a = words[py.randrange(len(words))]
        b = min(n, a + 1 + int(py.random() < 0.35) + int(py.random() < 0.1))
        mentions.append(" ".join(tokens[a:b]))
    return mentions


def write_rows(
    fh: TextIO,
    sentences: list[tuple[list[str], list[tuple[int, int]]]],
    draws: Draws,
    py: random.Random,
    tally: Tally,
) -> None:
    """The CSV: a header, then one `input,output` row per picked sentence."""
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(["input", "output"])
    for r in range(len(draws.picks)):
        tokens, spans = sentences[draws.picks[r]]
        mentions = row_mentions(tokens, spans, int(draws.per_row[r]), sentences, py, tally)
        items = []
        for m in mentions:
            tid = int(draws.type_ids[tally.next_type])
            tally.next_type += 1
            tally.distinct.add(tid)
            items.append(f"{m} <> {draws.names[tid]}")
        tally.items += len(items)
        w.writerow([detok(tokens), repr(items)])


def write_atomically(out: Path, write: Callable[[TextIO], None]) -> None:
    """Write `out` through a temporary file beside it, swapped in only when complete."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=out.name + ".", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            write(fh)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def generate(args: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    files = [(Path(p), {"sep": "\t"}) for p in args.sources] or [
        (args.shared / r, o) for r, o in SHARED_FILES
    ]
    sentences = load_sentences(files)
    if not sentences:
        raise SystemExit("no sentences found; give --shared or --from")
    real_types = json.loads(
        (args.shared / "nuner" / "top_tag_names.json").read_text(encoding="utf-8")
    )
    draws = draw(sentences, real_types, args)
    py = random.Random(args.seed)
    tally = Tally()
    write_atomically(args.out, lambda fh: write_rows(fh, sentences, draws, py, tally))
    stats = {
        "rows": args.rows,
        "items": tally.items,
        "distinct_types": len(tally.distinct),
        "foreign_mentions": tally.foreign,
        "sentence_pool": len(sentences),
        "mean_tokens": round(float(draws.lengths[draws.picks].mean()), 1),
        "seed": args.seed,
        "bytes": args.out.stat().st_size,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    write_readme(args.out, stats, files)
    return stats


def write_readme(out: Path, stats: dict, files: list[tuple[Path, dict]]) -> None:
    text = f"""# {out.name}: SYNTHETIC NuNER-sized file, for benchmarking only

Made by `scripts/make_nuner_scale.py --rows {stats["rows"]} --seed {stats["seed"]}`.
Same format and size as NuNER (numind/NuNER, MIT): `input,output`, the output a Python list
literal of `'<mention> <> <type>'`. The sentences are real (from the files below), the mentions
are their real entities topped up with word n-grams, and the types are the real NuNER type
names plus `<type> of <other type>` compounds drawn with a Zipf frequency. The combinations are
meaningless: measure speed and memory with it, never train or evaluate on it.

| rows | items | distinct types | sentence pool | mean tokens | bytes |
|---|---|---|---|---|---|
| {stats["rows"]:,} | {stats["items"]:,} | {stats["distinct_types"]:,} | {stats["sentence_pool"]:,} | {stats["mean_tokens"]} | {stats["bytes"]:,} |

Sentences from (licences of their origins apply: Pile-NER CC BY-NC 4.0, CrossNER MIT,
CoNLL-2003 research use only, MIT SLS corpora):
""" + "".join(f"- {p}\n" for p, _ in files)
    readme = out.with_name(out.stem + ".README.md")
    tmp = readme.with_suffix(".md.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, readme)


def scale_size(scale: float) -> tuple[int, int]:
    """(rows, types) of `scale` times NuNER."""
    return round(1_000_000 * scale), round(200_000 * scale**0.4)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="CSV to write (default: %(default)s)"
    )
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--mentions-per-row", type=float, default=4.4)
    ap.add_argument("--types", type=int, default=200_000, help="about this many distinct types")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--scale", type=float, help="S x NuNER: S million rows, ~200k x S^0.4 types (sets both)"
    )
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED, help="the shared data folder")
    ap.add_argument(
        "--from",
        dest="sources",
        nargs="*",
        default=[],
        type=Path,
        help="token<TAB>BIO-tag files to take sentences from instead",
    )
    args = ap.parse_args(argv)
    if args.scale is not None:
        args.rows, args.types = scale_size(args.scale)
    stats = generate(args)
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
