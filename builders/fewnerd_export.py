"""The Hub-ready folder of a built Few-NERD split: parquet per part, README card, summary.

    fewnerd-inter/
        data/{train,validation,test}-00000-of-00001.parquet
        README.md  summary.json

Columns follow `DFKI-SLT/few-nerd` (`id`, `tokens`, `ner_tags` and `fine_ner_tags` as ClassLabel
sequences, same names and order) plus `spans` (`start`, `end` exclusive, `label` = the official
fine type). The card's YAML declares the configs and features, so `load_dataset(folder)` gives
typed ClassLabel columns. The same build gives the same bytes; the folder is swapped in whole.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from builders.errors import BuildersError
from builders.fewnerd import HUB_SPLITS, PARTS, Part, SplitBuild, coarse_of, coarse_types
from builders.sources.base import Example


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


def render_card(
    summary: dict[str, Any], features_yaml: list[Any], command: str | None = None
) -> str:
    """The provisional dataset card (pure): YAML configs and features, then the counts."""
    import yaml

    from builders import __version__

    meta = {
        "license": "cc-by-sa-4.0",
        "language": ["en"],
        "task_categories": ["token-classification"],
        "task_ids": ["named-entity-recognition"],
        "pretty_name": f"Few-NERD {summary['mode'].upper()} (rebuilt)",
        "configs": [
            {
                "config_name": "default",
                "data_files": [
                    {"split": HUB_SPLITS[p], "path": f"data/{HUB_SPLITS[p]}-*"} for p in PARTS
                ],
            }
        ],
        "dataset_info": {"features": features_yaml},
    }
    lines = [
        "---",
        yaml.safe_dump(meta, sort_keys=False, allow_unicode=True).rstrip(),
        "---",
        "",
        f"# {meta['pretty_name']}",
        "",
        f"Few-NERD {summary['mode'].upper()} parts rebuilt from `{summary['source']}` with the "
        f"{summary['assignment']} type assignment (seed {summary['seed']}), following METHOD.md "
        "section 5: each sentence goes to one of the parts owning its types, entities of other "
        "parts' types are O, sentences without entities are dropped. `spans` have `end` exclusive.",
        "",
        "| split | sentences | mentions | types |",
        "|---|---:|---:|---:|",
    ]
    for p in PARTS:
        row = summary["parts"][p]
        lines.append(
            f"| {HUB_SPLITS[p]} | {row['sentences']:,} | {row['mentions']:,} | {row['types']} |"
        )
    lines += [
        "",
        f"Input sentences: {summary['input_sentences']:,}; dropped without entities: "
        f"{summary['dropped_no_entity']:,}; mentions relabelled O: {summary['relabelled_o']:,}.",
    ]
    fam = summary.get("familiarity")
    if fam:
        lines += [
            "",
            f"Familiarity against the train labels ({fam['model']}, K={fam['k']}, {fam['weighting']}):",
        ]
        for p in ("dev", "test"):
            if fam.get(p):
                lines.append(f"- {HUB_SPLITS[p]}: {fam[p]['mean']:.4f} (VB_1 {fam[p]['vb_1']:.4f})")
    lines += [
        "",
        f"Built by labelshift-builders {__version__}" + (f" with `{command}`." if command else "."),
        "Licence: CC BY-SA 4.0, inherited from Few-NERD (Ding et al., ACL 2021).",
        "",
    ]
    return "\n".join(lines)


def write_split(
    build: SplitBuild,
    out_dir: str | Path,
    familiarity: dict[str, Any] | None = None,
    command: str | None = None,
) -> Path:
    """Write `OUT/fewnerd-{mode}/` atomically: parquet per part, README.md, summary.json.

    The same build gives the same bytes. The folder is written beside its target and swapped
    in, so a reader never sees half of it.
    """
    import pyarrow.parquet as pq
    from datasets import Dataset

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = out / build.name
    tmp = Path(tempfile.mkdtemp(prefix=f".{build.name}.tmp-", dir=out))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 would survive the rename
        (tmp / "data").mkdir()
        feats = features(build.fine_names)
        for p in PARTS:
            ds = Dataset.from_dict(part_columns(build.parts[p], build.fine_names), features=feats)
            # The table carries the features in its schema metadata; written as datasets would,
            # without its progress bar.
            pq.write_table(
                ds.data.table,
                tmp / "data" / f"{HUB_SPLITS[p]}-00000-of-00001.parquet",
                row_group_size=10_000,
            )
        summary = build.summary()
        if familiarity is not None:
            summary["familiarity"] = familiarity
        (tmp / "summary.json").write_text(
            json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        (tmp / "README.md").write_text(
            render_card(summary, feats._to_yaml_list(), command), encoding="utf-8"
        )
        old = None
        if target.exists():
            old = out / f".{build.name}.old-{os.getpid()}"
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def read_part(folder: str | Path, part: str) -> list[Example]:
    """The sentences of one part of a built split folder (`train`, `dev`/`validation`, `test`)."""
    import pyarrow.parquet as pq

    hub = HUB_SPLITS.get(part, part)
    files = sorted((Path(folder) / "data").glob(f"{hub}-*.parquet"))
    if not files:
        raise BuildersError(
            f"{folder}: no data/{hub}-*.parquet; is it a folder written by `builders fewnerd-splits`?"
        )
    out: list[Example] = []
    for path in files:
        table = pq.read_table(path, columns=["id", "tokens", "spans"])
        for rid, tokens, spans in zip(
            *(table.column(c).to_pylist() for c in ("id", "tokens", "spans")), strict=True
        ):
            out.append(
                Example(
                    tokens=tokens,
                    spans=[(s["start"], s["end"], s["label"]) for s in spans],
                    raw_id=rid,
                )
            )
    return out
