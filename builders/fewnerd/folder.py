"""The Hub-ready folder of a built Few-NERD split: parquet per part, README card, summary.

    fewnerd-inter/
        data/{train,validation,test}-00000-of-00001.parquet
        README.md  summary.json

Columns follow `DFKI-SLT/few-nerd` plus `spans` (`start`, `end` exclusive, `label` = the
official fine type). The same build gives the same bytes; the folder is swapped in whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builders import __version__
from builders.defaults import hub_split
from builders.errors import InputError
from builders.fewnerd.splits import (
    PARTS,
    FewnerdRequest,
    Part,
    SplitBuild,
    coarse_of,
    coarse_types,
    split_and_measure,
)
from builders.hub.folder import PARQUET_NAME, SUMMARY_JSON, atomic_dir, dataset_sizes, write_json
from builders.hub.readme import CARD, folder_card, load_path, repo_name, write_method
from builders.shift.report import FamiliarityReport
from builders.sources.base import Example
from builders.store import Store


def features(fine_names: Iterable[str]) -> Any:
    """The dataset features: `DFKI-SLT/few-nerd`'s columns plus `spans` (`end` exclusive)."""
    from datasets import ClassLabel, Features, List, Value

    return Features(
        {
            "id": Value("string"),
            "tokens": List(Value("string")),
            "ner_tags": List(ClassLabel(names=["O", *coarse_types()])),
            "fine_ner_tags": List(ClassLabel(names=["O", *fine_names])),
            "spans": List(
                {"start": Value("int32"), "end": Value("int32"), "label": Value("string")}
            ),
        }
    )


def part_columns(part: Part, fine_names: list[str]) -> dict[str, list[Any]]:
    """A part's rows as columns, with the coarse and fine tag ids derived from its spans."""
    coarse_id = {c: i for i, c in enumerate(coarse_types(), start=1)}
    fine_id = {f: i for i, f in enumerate(fine_names, start=1)}
    ner, fine = [], []
    for tokens, spans in zip(part.tokens, part.spans, strict=True):
        c_tags, f_tags = [0] * len(tokens), [0] * len(tokens)
        for span in spans:
            n = span["end"] - span["start"]
            c_tags[span["start"] : span["end"]] = [coarse_id[coarse_of(span["label"])]] * n
            f_tags[span["start"] : span["end"]] = [fine_id[span["label"]]] * n
        ner.append(c_tags)
        fine.append(f_tags)
    return {
        "id": part.ids,
        "tokens": part.tokens,
        "ner_tags": ner,
        "fine_ner_tags": fine,
        "spans": part.spans,
    }


def write_split(
    build: SplitBuild,
    out_dir: str | Path,
    familiarity: FamiliarityReport | None = None,
    command: str | None = None,
    extra_json: dict[str, Any] | None = None,
    org: str | None = None,
) -> Path:
    """Write `OUT/fewnerd-{mode}/` atomically: parquet per part, README.md, summary.json (with
    each part's `num_bytes`, the command and the toolkit version, so that the card can be
    rendered again from the folder)."""
    import pyarrow.parquet as pq
    from datasets import Dataset

    target = Path(out_dir) / build.name
    feats = features(build.fine_names)
    summary = build.summary()
    if familiarity is not None:
        summary["familiarity"] = familiarity.to_dict()
    summary |= {"command": command, "toolkit_version": __version__}
    with atomic_dir(target) as tmp:
        (tmp / "data").mkdir()
        files = {
            hub_split(p): tmp / "data" / PARQUET_NAME.format(split=hub_split(p)) for p in PARTS
        }
        for p in PARTS:
            ds = Dataset.from_dict(part_columns(build.parts[p], build.fine_names), features=feats)
            # The table carries the features in its schema metadata; written as datasets would,
            # without its progress bar.
            pq.write_table(ds.data.table, files[hub_split(p)], row_group_size=10_000)
        sizes = dataset_sizes({split: [f] for split, f in files.items()}, feats)
        for split in files:
            summary["parts"][split]["num_bytes"] = sizes[split]
        summary["download_size"] = sizes["download_size"]
        write_json(tmp / SUMMARY_JSON, summary)
        for name, obj in (extra_json or {}).items():  # e.g. the changelog, kept across builds
            write_json(tmp / name, obj)
        write_method(tmp)
        card = folder_card(tmp, repo_name(target, org), load_path(target, org))
        (tmp / CARD).write_text(card, encoding="utf-8")
    return target


@dataclass
class FewnerdFolder:
    """A written Few-NERD split: the build, its Familiarity (None when not asked), the folder."""

    build: SplitBuild
    familiarity: FamiliarityReport | None
    folder: Path


def build_fewnerd(
    store: Store,
    request: FewnerdRequest,
    out: str | Path,
    *,
    progress: Callable[[str], AbstractContextManager[Callable[[int], None]]] | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> FewnerdFolder:
    """What `builders fewnerd-splits` does: the request's split and its Familiarity, written
    to `OUT/fewnerd-{mode}/`. The caller holds `out` (`hub.outdir.OutLock`)."""
    build, fam = split_and_measure(store, request, progress=progress, on_stage=on_stage)
    folder = write_split(build, out, fam, command=request.command_line())
    return FewnerdFolder(build, fam, folder)


def read_part(folder: str | Path, part: str) -> list[Example]:
    """The sentences of one part of a built split folder (`train`, `dev`/`validation`, `test`)."""
    import pyarrow.parquet as pq

    hub = hub_split(part)
    files = sorted((Path(folder) / "data").glob(f"{hub}-*.parquet"))
    if not files:
        raise InputError(
            f"{folder}: no data/{hub}-*.parquet; is it a folder written by `builders fewnerd-splits`?"
        )
    return [
        Example(
            r["tokens"], [(s["start"], s["end"], s["label"]) for s in r["spans"]], raw_id=r["id"]
        )
        for path in files
        for r in pq.read_table(path, columns=["id", "tokens", "spans"]).to_pylist()
    ]
