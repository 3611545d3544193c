"""A label-shift subset itself (METHOD.md section 4): its rows, and its repo folder config.

`materialise` selects the rows in DuckDB SQL: a sentence is kept if it has at least one
mention of a selected label; only those mentions are kept, and only the negatives (types
asked about with no answer) that are selected labels. `write_subset` writes one strategy
config of the subset's Hub-ready folder (parquet, scores, histogram, build.json) and its card.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from builders import __version__
from builders.store import Store

if TYPE_CHECKING:
    from builders.shift.scoring import SelectionResult
    from builders.splits.pipeline import LabelTable, SplitConfig, SubsetResult


def materialise(store: Store, source: str, selected: list[str]) -> pa.Table:
    """Rows of a subset, in corpus order: id, tokens, spans [{start, end, label}], negatives.

    `end` is exclusive (as in the store); GLiNER's inclusive end is made at export time.
    """
    con = store.con
    con.register("_selected", pa.table({"label": pa.array(selected, pa.string())}))
    try:
        return con.sql(
            """
            WITH m AS (
                SELECT split, idx,
                       list({'start': start, 'end': stop, 'label': label}
                            ORDER BY start, stop, label) AS spans
                FROM mentions
                WHERE source = $1 AND label IN (SELECT label FROM _selected)
                GROUP BY split, idx
            ), n AS (
                SELECT split, idx, list(DISTINCT label ORDER BY label) AS negatives
                FROM negatives
                WHERE source = $1 AND label IN (SELECT label FROM _selected)
                GROUP BY split, idx
            )
            SELECT s.sentence_id AS id, s.tokens, m.spans,
                   coalesce(n.negatives, []::VARCHAR[]) AS negatives
            FROM sentences s
            JOIN m ON s.split = m.split AND s.idx = m.idx
            LEFT JOIN n ON s.split = n.split AND s.idx = n.idx
            WHERE s.source = $1
            ORDER BY CASE s.split WHEN 'train' THEN 0 WHEN 'dev' THEN 1 WHEN 'test' THEN 2 ELSE 3 END,
                     s.split, s.idx
            """,
            params=[source],
        ).to_arrow_table()
    finally:
        con.unregister("_selected")


def write_subset(
    folder: Path,
    strategy: str,
    rows: pa.Table,
    sub: SubsetResult,
    cfg: SplitConfig,
    scores: np.ndarray,
    cut: SelectionResult,
    table: LabelTable,
    command: str | None,
    *,
    full: SubsetResult | None = None,
    cuts: dict[str, SelectionResult] | None = None,
) -> Path:
    """Write one strategy config of a subset repo folder atomically, then its README card.

    The config folder gets the rows, every label's score, the score histogram with the cuts
    of all levels marked (`scores.png`) and `build.json`: the parameters, this subset's
    results, the full corpus's (`full`) and every level's cut (`cuts`), which the card shows.
    """
    import pyarrow.parquet as pq

    from builders.hub.cards import render_card
    from builders.hub.folder import (
        PARQUET_NAME,
        SUBSET_FEATURES,
        atomic_dir,
        atomic_write_text,
        configs_of,
        write_json,
        write_parquet,
    )
    from builders.hub.plots import render_histogram
    from builders.sources import SOURCES

    cuts = cuts or {sub.level: cut}
    folder.mkdir(parents=True, exist_ok=True)
    with atomic_dir(folder / strategy) as tmp:
        write_parquet(rows, tmp / PARQUET_NAME.format(split="train"), SUBSET_FEATURES)
        score_table = pa.table(
            {
                "label": pa.array(table.labels, pa.string()),
                "mentions": pa.array(table.mentions, pa.int64()),
                "score": pa.array(scores, pa.float64()),
                "selected": pa.array(cut.mask, pa.bool_()),
            }
        )
        pq.write_table(score_table, tmp / "scores.parquet", compression="zstd")
        render_histogram(
            scores,
            {lv: list(c.thresholds) for lv, c in cuts.items()},
            strategy,
            tmp / "scores.png",
            level=sub.level,
        )
        write_json(
            tmp / "build.json",
            {
                "toolkit_version": __version__,
                "command": command,
                "config": asdict(cfg),
                "subset": {k: v for k, v in sub.to_dict().items() if k != "path"},
                "full": None
                if full is None
                else {k: v for k, v in full.to_dict().items() if k != "path"},
                "cuts": {lv: c.to_dict() for lv, c in cuts.items()},
                "num_bytes": rows.nbytes,
            },
        )
    builds = {
        name: json.loads((folder / name / "build.json").read_text(encoding="utf-8"))
        for name in configs_of(folder)
    }
    spec = SOURCES.get(cfg.source)  # a store name given with `ingest --name` has no spec
    card = render_card(
        folder.name,
        builds,
        license=spec.license if spec else "unknown",
        source_origin=spec.origin if spec else None,
    )
    atomic_write_text(folder / "README.md", card)
    return folder
