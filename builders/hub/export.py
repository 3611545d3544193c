"""Export a built subset to GLiNER's training json.

    [{"tokenized_text": ["Ada", "wrote", "code"], "ner": [[0, 0, "person"]],
      "negatives": ["city"]}, ...]          ner = [start, end_inclusive, label]

The folder's spans have `end` exclusive (as in the span store); GLiNER's `end` is inclusive,
so it is written as `end - 1`. Works on a subset repo folder (`{config}/train-*.parquet`,
configs `entropy` and `max`) and on a Few-NERD folder (`data/{split}-*.parquet`, no negatives).
The same folder gives the same bytes; the file is written beside its target and moved in.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from builders.defaults import config_order, hub_split
from builders.errors import BuildersError


def parquet_files(folder: Path, config: str | None = None, split: str = "train") -> list[Path]:
    """The parquet files of one config and split of a built folder (sorted).

    Raises:
        BuildersError: when the folder, the config or the split has no parquet file.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise BuildersError(f"{folder}: no such folder (expected a folder written by build-splits)")
    split = hub_split(split)
    configs = config_order(
        p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.parquet"))
    )
    if (folder / "data").is_dir() and "data" in configs:  # Few-NERD layout: one default config
        if config not in (None, "default"):
            raise BuildersError(f"{folder}: has only the default config, not {config!r}")
        where = folder / "data"
    else:
        if not configs:
            raise BuildersError(f"{folder}: no config folder with parquet files")
        config = config or configs[0]
        if config not in configs:
            raise BuildersError(f"{folder}: no config {config!r}. Valid: {', '.join(configs)}")
        where = folder / config
    files = sorted(p for p in where.glob(f"{split}-*.parquet"))
    if not files:
        have = sorted({p.name.split("-")[0] for p in where.glob("*-*.parquet")})
        raise BuildersError(f"{where}: no {split}-*.parquet (splits: {', '.join(have) or 'none'})")
    return files


def gliner_records(files: list[Path]) -> Iterator[dict[str, Any]]:
    """One GLiNER training record per row, in file order.

    Raises:
        BuildersError: on a span outside its sentence or an empty one (never repaired).
    """
    import pyarrow.parquet as pq

    for path in files:
        pf = pq.ParquetFile(path)
        names = set(pf.schema_arrow.names)
        if not {"tokens", "spans"} <= names:
            raise BuildersError(f"{path}: expected columns tokens and spans, got {sorted(names)}")
        cols = ["id", "tokens", "spans"] + (["negatives"] if "negatives" in names else [])
        for batch in pf.iter_batches(batch_size=10_000, columns=cols):
            data = batch.to_pydict()
            negs = data.get("negatives") or [None] * batch.num_rows
            for rid, tokens, spans, neg in zip(
                data["id"], data["tokens"], data["spans"], negs, strict=True
            ):
                ner = []
                for s in spans:
                    start, end = int(s["start"]), int(s["end"])
                    if not 0 <= start < end <= len(tokens):
                        raise BuildersError(
                            f"{path}: row {rid!r}: span [{start}, {end}) {s['label']!r} is "
                            f"outside its {len(tokens)} tokens or empty"
                        )
                    ner.append([start, end - 1, s["label"]])
                yield {"tokenized_text": list(tokens), "ner": ner, "negatives": list(neg or [])}


def export_gliner(folder: Path, config: str | None, out: Path, *, split: str = "train") -> int:
    """Write one config (and split) of a built folder as GLiNER training json; return the rows.

    Args:
        folder: a subset repo folder (`build-splits`) or a Few-NERD folder (`fewnerd-splits`).
        config: `entropy`, `max`, ...; None = the folder's default (`entropy` first).
        out: the json file to write (atomically).
        split: the split to export (`train`; Few-NERD also `validation`, `test`).
    """
    files = parquet_files(Path(folder), config, split)
    from builders.hub.folder import atomic_open

    n = 0
    with atomic_open(Path(out)) as fh:
        fh.write("[")
        for rec in gliner_records(files):
            fh.write(",\n" if n else "\n")
            fh.write(json.dumps(rec, ensure_ascii=False, separators=(", ", ": ")))
            n += 1
        fh.write("\n]\n" if n else "]\n")
    return n
