"""`builders fewnerd-splits` and `builders fewnerd-episodes`: thin commands over
`builders.fewnerd`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from builders.cli.errors import handle_errors
from builders.cli.options import (
    common_options,
    embedding_options,
    metric_options,
    model_option,
    option,
)
from builders.cli.output import emit_json, note, print_table
from builders.cli.session import open_store, warn_older_reads
from builders.defaults import (
    FEWNERD_ASSIGNMENTS,
    FEWNERD_MODES,
    SEED,
    SPLITS,
    canonical_split,
    hub_split,
)
from builders.fewnerd.episodes import check_all, episode_record, sample_episodes, write_jsonl
from builders.fewnerd.folder import build_fewnerd, read_part
from builders.fewnerd.splits import FewnerdRequest, store_examples
from builders.hub.outdir import OutLock
from builders.progress import progress_bar
from builders.sources import SOURCES
from builders.store.ingest import ingest

if TYPE_CHECKING:
    from builders.shift.specs import EmbeddingSpec, MetricSpec
    from builders.store import Store


def _ensure_source(store: Store, source: str, path: str | None, quiet: bool) -> None:
    """Ingest the source when it is missing or files are given; a name the registry does not
    know is stored as a Few-NERD source."""
    if path is None and store.has_source(source):
        warn_older_reads(store, source)
        return
    spec = source if source in SOURCES else "fewnerd"
    with progress_bar(f"ingest {source}", quiet, unit=" sent") as bar:
        result = ingest(store, spec, path, name=source, progress=bar)
    for s in result.splits:
        note(
            f"{source}/{s.split}: {s.status}, {s.sentences:,} sentences, {s.mentions:,} mentions",
            quiet,
        )
        for key, n in s.report.get("counts", {}).items():
            note(f"{s.split}: {key.replace('_', ' ')}: {n:,}", quiet)


@click.command("fewnerd-splits")
@click.option(
    "--mode",
    type=click.Choice(FEWNERD_MODES),
    required=True,
    help="INTRA (by coarse type) or INTER (by fine type).",
)
@option(
    "--assignment",
    type=click.Choice(FEWNERD_ASSIGNMENTS),
    default="official",
    help="INTER type assignment: the official 36/13/17, or a seeded random 60/20/20 per coarse type.",
)
@option(
    "--seed", type=int, default=SEED, help="Seed of the sentence picks and the random assignment."
)
@option(
    "--source",
    default="fewnerd",
    help="The stored source to split; ingested first when missing (from --path, or its default origin).",
)
@click.option(
    "--path", help="Few-NERD files (IO coarse-fine or BIO coarse_fine) to ingest as the source."
)
@option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out"),
    help="Where the fewnerd-{intra|inter}/ folder is written.",
)
@click.option(
    "--no-familiarity", is_flag=True, help="Skip Familiarity (no embedding model needed)."
)
@model_option
@metric_options("k")
@embedding_options
@common_options
@handle_errors
def fewnerd_splits_cmd(
    mode: str,
    assignment: str,
    seed: int,
    source: str,
    path: str | None,
    out: Path,
    no_familiarity: bool,
    embedding: EmbeddingSpec,
    metric: MetricSpec,
    db: Path,
    as_json: bool,
    quiet: bool,
) -> None:
    """Rebuild Few-NERD INTRA / INTER train/validation/test parts from a stored source.

    Each sentence goes to one part owning one of its types (seeded); other parts' entities
    become O (METHOD.md section 5). Writes OUT/fewnerd-{mode}/ with the Familiarity of the dev
    and test labels against the train labels.

    Example: builders fewnerd-splits --mode inter --path data/fewnerd/inter --out build --no-familiarity
    """
    request = FewnerdRequest(
        mode,
        assignment,
        seed,
        source,
        familiarity=not no_familiarity,
        embedding=embedding,
        metric=metric,
    )
    with (
        OutLock(out, request.command_line()),
        open_store(db, create=True, shared=True) as store,
    ):  # --out checked before the work
        _ensure_source(store, source, path, quiet)
        made = build_fewnerd(
            store,
            request,
            out,
            progress=lambda desc: progress_bar(desc, quiet, unit=" sent"),
            on_stage=lambda s: note(s, quiet),
        )
    build, fam, folder = made.build, made.familiarity, made.folder
    summary = build.summary()
    if fam is not None:
        summary["familiarity"] = fam.to_dict()
    if as_json:
        emit_json({"folder": str(folder), **summary})
        return
    rows = []
    for p in map(hub_split, SPLITS):
        part = summary["parts"][p]
        f = fam.per_benchmark.get(p) if fam is not None else None
        rows.append(
            [p, part["sentences"], part["mentions"], part["types"], f.familiarity if f else None]
        )
    print_table(
        f"{build.name} ({build.assignment}, seed {build.seed}) -> {folder}",
        ["part", "sentences", "mentions", "types", "familiarity"],
        rows,
    )
    note(
        f"dropped without entities: {build.dropped_no_entity:,}; mentions relabelled O: {build.relabelled_o:,}",
        quiet,
    )
    if build.warning:
        note(f"warning: {build.warning}", quiet)
    if build.negatives_left_out or build.negative_spans_left_out:
        note(
            f"left out: {build.negatives_left_out:,} negatives and "
            f"{build.negative_spans_left_out:,} negative spans of {build.source} (the Few-NERD "
            "layout has no column for them; build-splits' folders keep them)",
            quiet,
        )


@click.command("fewnerd-episodes")
@click.option(
    "--part",
    type=click.Choice(["train", "dev", "validation", "test"]),
    required=True,
    help="The part to sample from.",
)
@option("--n-way", type=click.IntRange(min=1), default=5, help="N: types per episode.")
@option(
    "--k-shot",
    type=click.IntRange(min=1),
    default=1,
    help="K: K~2K mentions per type in the support set.",
)
@click.option(
    "--q-shot",
    type=click.IntRange(min=1),
    help="Q: Q~2Q mentions per type in the query set [default: K].",
)
@option(
    "--episodes", "n_episodes", type=click.IntRange(min=0), default=1000, help="Number of episodes."
)
@option("--seed", type=int, default=SEED)
@click.option(
    "--split-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="A folder written by fewnerd-splits; read the part from it.",
)
@option(
    "--source",
    default="fewnerd",
    help="Without --split-dir: the stored source whose split of that name is the part "
    "(e.g. the official INTER files, ingested as `fewnerd`).",
)
@click.option(
    "--lowercase",
    is_flag=True,
    help="Lower-case words and labels, as the official episode files are.",
)
@option(
    "--max-attempts",
    type=click.IntRange(min=1),
    default=1000,
    help="Type draws per episode before giving up.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Output JSONL [default: SPLIT_DIR/episode-data/PART_N_K.jsonl, or ./PART_N_K.jsonl].",
)
@common_options
@handle_errors
def fewnerd_episodes_cmd(
    part: str,
    n_way: int,
    k_shot: int,
    q_shot: int | None,
    n_episodes: int,
    seed: int,
    split_dir: Path | None,
    source: str,
    lowercase: bool,
    max_attempts: int,
    out: Path | None,
    db: Path,
    as_json: bool,
    quiet: bool,
) -> None:
    """Sample N-way K~2K-shot episodes (greedy, Few-NERD's Algorithm 1) from one part.

    Writes the official episode JSONL and checks every episode: each support type has K..2K
    mentions, the query (from the other sentences) Q..2Q.

    Example: builders fewnerd-episodes --split-dir build/fewnerd-inter --part test --n-way 5 --k-shot 1 --episodes 1000
    """
    part = canonical_split(part)
    if split_dir is not None:
        examples, where = read_part(split_dir, part), f"{split_dir}:{part}"
    else:
        with open_store(db, read_only=True) as store:
            examples, where = store_examples(store, source, part), f"{source}/{part}"
    start = time.perf_counter()
    with progress_bar(f"episodes {where}", quiet, total=n_episodes, unit=" ep") as bar:
        eps = sample_episodes(
            examples, None, n_way, k_shot, n_episodes, seed, q_shot, max_attempts, progress=bar
        )
    seconds = time.perf_counter() - start
    check_all(eps, examples, n_way, k_shot, q_shot)
    if out is None:
        name = f"{part}_{n_way}_{k_shot}.jsonl"
        out = split_dir / "episode-data" / name if split_dir is not None else Path(name)
    write_jsonl(out, (episode_record(ep, examples, lowercase) for ep in eps))
    n = max(len(eps), 1)
    summary = {
        "out": str(out),
        "part": where,
        "sentences": len(examples),
        "n_way": n_way,
        "k_shot": k_shot,
        "q_shot": q_shot or k_shot,
        "episodes": len(eps),
        "seed": seed,
        "checked": True,
        "seconds": round(seconds, 3),
        "episodes_per_s": round(len(eps) / seconds, 1) if seconds > 0 else None,
        "mean_support_sentences": round(sum(len(e.support) for e in eps) / n, 3),
        "mean_query_sentences": round(sum(len(e.query) for e in eps) / n, 3),
    }
    if as_json:
        emit_json(summary)
        return
    click.echo(
        f"{len(eps):,} episodes ({n_way}-way {k_shot}~{2 * k_shot}-shot) from {where} -> {out}; "
        f"all checked; {summary['episodes_per_s']} episodes/s"
    )
