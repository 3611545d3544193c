"""What makes a build's levels comparable beside their Familiarity (METHOD.md section 4):
`sentences_shared`, `effective_labels` and `largest_label`, computed from what is written: the
label counts a level's rows hold (`SubsetResult.label_counts`) and the `id` column of its rows,
read back from the parquet file it was streamed to (DuckDB, within the store's memory limit,
spilling beside it), never its rows held in memory.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from builders.deferred import duckdb, pa
from builders.splits.config import SubsetResult
from builders.store.db import memory_limit


def describe(subsets: Sequence[SubsetResult], scratch: Path | None = None) -> None:
    """Fill each level's `composition` from its written rows and label counts; `scratch` is
    where DuckDB may spill (a temporary folder under it)."""
    shared = sentences_shared(subsets, scratch)
    for sub in subsets:
        sub.composition = {
            "sentences_shared": shared[sub.name],
            "effective_labels": effective_labels(sub.label_counts),
            "largest_label": largest_label(sub.label_counts),
        }


def effective_labels(counts: Mapping[str, int]) -> float:
    """exp(-sum p ln p) over the labels' shares p of the mentions: the number of equally
    frequent labels with the same entropy (0 for no mentions)."""
    total = sum(counts.values())
    if total <= 0:
        return 0.0
    return math.exp(-sum(n / total * math.log(n / total) for n in counts.values() if n > 0))


def largest_label(counts: Mapping[str, int]) -> dict[str, Any] | None:
    """The label with the most mentions (ties by label text), its mentions and its share."""
    total = sum(counts.values())
    if total <= 0:
        return None
    label, n = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return {"label": label, "mentions": n, "share": n / total}


def sentences_shared(
    subsets: Sequence[SubsetResult], scratch: Path | None = None
) -> dict[str, int]:
    """Per level (by name), how many of its sentences another of `subsets` also keeps.

    Each level's ids come from its parquet file (`rows_file`) or its rows in memory, and are
    joined in DuckDB, which spills to `scratch` past the store's memory limit."""
    config = {"memory_limit": limit} if (limit := memory_limit()) else {}
    with (
        tempfile.TemporaryDirectory(prefix="shared.", dir=scratch) as spill,
        duckdb.connect(config={**config, "temp_directory": spill}) as con,
    ):
        parts = []
        for i, sub in enumerate(subsets):
            view = f"_ids{i}"
            if sub.rows_file is not None:
                con.read_parquet(str(sub.rows_file)).select("id").create_view(view)
            else:
                assert sub.rows is not None, "a level has its rows in memory or in a file"
                con.register(view, pa.table({"id": sub.rows.column("id")}))
            parts.append(f"SELECT {i} AS level, id FROM {view}")
        found = dict.fromkeys(range(len(subsets)), 0)
        if parts:
            found |= dict(
                con.sql(
                    f"WITH ids AS ({' UNION ALL '.join(parts)}), "
                    "many AS (SELECT id FROM ids GROUP BY id HAVING count(DISTINCT level) > 1) "
                    "SELECT level, count(*) FROM ids WHERE id IN (SELECT id FROM many) "
                    "GROUP BY level"
                ).fetchall()
            )
    return {sub.name: int(found[i]) for i, sub in enumerate(subsets)}
