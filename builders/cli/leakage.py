"""`leakage`: benchmark sentences and mentions inside a training corpus; and the leakage
tables `familiarity` and `build-splits` print."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from builders.cli.errors import handle_errors
from builders.cli.options import (
    benchmarks_option,
    common_options,
    embedding_options,
    model_option,
    option,
    source_options,
    stacked,
)
from builders.cli.output import emit_json, note, print_table
from builders.cli.session import ensure_ingested, open_store
from builders.defaults import FAMILIAR_SIM, NGRAM
from builders.files import atomic_open
from builders.shift.survey import LeakageRequest, leakage_survey

if TYPE_CHECKING:
    from builders.shift.specs import EmbeddingSpec


#: `--ngram`: the n-gram length of the leakage scan.
ngram_option = option(
    "--ngram",
    type=click.IntRange(min=1),
    default=NGRAM,
    help="Leakage: n-gram length (shorter sentences count for exact overlap only).",
)


#: `--leakage/--no-leakage` and `--ngram`, for the commands that print leakage beside Familiarity.
leakage_options = stacked(
    option(
        "--leakage/--no-leakage",
        default=True,
        help="Scan the corpus for the benchmarks' sentences and mentions (METHOD.md section 7).",
    ),
    ngram_option,
)


def _count(part: int | None, share: float | None, whole: int | None = None) -> str:
    if part is None:
        return "–"
    of = f"/{whole:,}" if whole is not None else ""
    return f"{part:,}{of}" + ("" if share is None else f" ({share:.1%})")


def _row(name: str, f: Mapping[str, Any]) -> list[Any]:
    cont = f["containment_mean"]
    return [
        name,
        f["sentences"],
        _count(f["exact_sentences"], f["exact_share"]),
        _count(f["ngram_sentences"], f["ngram_share"], f["ngram_eligible_sentences"]),
        "–" if cont is None else f"{cont:.2f}",
        f["mentions"],
        _count(f["seen_mentions"], f["seen_share"]),
        _count(f["seen_familiar_mentions"], f["seen_familiar_share"]),
        f["training_sentences_overlapping"],
    ]


COLUMNS = [
    "benchmark",
    "sentences",
    "exact",
    "n-gram / >=n",
    "contain.",
    "mentions",
    "seen",
    "familiar",
    "train sent.",
]


def print_leakage(title: str, rep: Mapping[str, Any], quiet: bool = False) -> None:
    """A leakage report (its `to_dict()`): one row per benchmark, then the union."""
    rows = [_row(name, f) for name, f in rep["per_benchmark"].items()]
    if len(rows) > 1:
        rows.append(_row("union", rep["union"]))
    if rows:
        print_table(title, COLUMNS, rows)
    # one line per reason: the first benchmark said in full, the others named after it
    by_reason: dict[str, list[tuple[str, str]]] = {}
    for name, why in rep["not_scanned"].items():
        by_reason.setdefault(_template(why, name), []).append((name, why))
    for entries in by_reason.values():
        (first, why), rest = entries[0], [name for name, _ in entries[1:]]
        same = f"; the same for {', '.join(rest)}" if rest else ""
        note(f"leakage: {first} not scanned: {why}{same}", quiet)


def _template(why: str, name: str) -> str:
    """`why` with `name` as a whole word taken out: the key grouping benchmarks by reason."""
    return re.sub(rf"(?<![\w-]){re.escape(name)}(?![\w-])", "\x00", why)


def print_build_leakage(source: str, rec: Mapping[str, Any], quiet: bool) -> None:
    """A build's leakage: the full corpus per benchmark, then each level over the union."""
    full = rec["full"]
    print_leakage(f"Leakage of {source} (n = {full['n']}; --no-leakage skips)", full, quiet)
    if not full["per_benchmark"]:
        return
    by_set = {"full": full, **rec["levels"]}
    print_table(
        "Leakage by set (union of the benchmarks)",
        ["set", *COLUMNS[1:]],
        [_row(name, r["union"]) for name, r in by_set.items()],
    )
    if rec.get("decontaminated"):
        note(
            f"decontaminated: {rec['decontaminated']['dropped_sentences']:,} overlapping "
            "training sentences dropped before cutting",
            quiet,
        )


@click.command("leakage")
@source_options
@benchmarks_option
@ngram_option
@option(
    "--threshold",
    type=click.FloatRange(0, 1),
    default=FAMILIAR_SIM,
    help="A seen mention's training label is familiar at this similarity to its benchmark label.",
)
@model_option
@click.option(
    "--pairs",
    "pairs_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the overlapping (benchmark, training) sentence pairs to this parquet file.",
)
@embedding_options
@common_options
@handle_errors
def leakage_cmd(
    source: str,
    path: str | None,
    benchmarks: str,
    label_map: str | None,
    ngram: int,
    threshold: float,
    embedding: EmbeddingSpec,
    pairs_path: Path | None,
    db: Path,
    as_json: bool,
    quiet: bool,
) -> None:
    """Is my zero-shot score zero-shot? Benchmark sentences and mentions in a training corpus.

    Per benchmark and over their union: exact and n-gram sentence overlap and seen mentions
    (METHOD.md section 7). --pairs writes the overlapping sentence pairs; nothing else is.

    Example: builders leakage --source pilener --benchmarks crossner-ai,crossner-music
    """
    import pyarrow.parquet as pq

    request = LeakageRequest(
        source,
        benchmarks,
        label_map=label_map,
        ngram=ngram,
        threshold=threshold,
        embedding=embedding,
    )
    with open_store(db, create=True, shared=True) as store:
        ensure_ingested(store, source, path, quiet)
        found = leakage_survey(
            store,
            request,
            on_note=lambda s: note(s, quiet),
            on_warning=lambda s: click.echo(f"warning: {s}", err=True),
        )
        rep = found.scan.report()
    pairs = found.scan.pairs_table()
    if pairs_path is not None:  # a command that reads writes only the file it was asked for
        with atomic_open(pairs_path, binary=True) as fh:
            pq.write_table(pairs, fh, compression="zstd")
    if as_json:
        emit_json(
            {
                **rep.to_dict(),
                "benchmarks": [s.describe() for s in found.evalsets],
                "pairs_file": None if pairs_path is None else str(pairs_path),
                "pairs": pairs.num_rows,
            }
        )
        return
    title = (
        f"Leakage of {rep.source} into the benchmarks (n = {rep.n}; familiar: sim >= "
        f"{rep.threshold:g} with {rep.model} or the same label)"
    )
    print_leakage(title, rep.to_dict(), quiet)
    kept = f"-> {pairs_path}" if pairs_path is not None else "(--pairs FILE.parquet keeps them)"
    note(f"{pairs.num_rows:,} overlapping sentence pairs {kept}", quiet)
