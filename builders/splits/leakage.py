"""A build's leakage record: the full corpus's figures, each level's, and what was dropped.

    res.leakage = leakage_record(res, found, after, dropped)
    build.json["leakage"] = res.leakage_of(level)   ({full, subset, decontaminated})

`found` is the scan of the corpus as stored; `after` the scan the subsets were cut from (the
same scan, or the decontaminated corpus's with `--decontaminate`). A level's figures count the
sentences it keeps (those with a mention of one of its labels), as `builders.shift.leakage`
restricts them.
"""

from __future__ import annotations

from typing import Any

from builders.shift.leakage import LeakageScan
from builders.splits.config import BuildResult


def leakage_record(
    res: BuildResult, found: LeakageScan, after: LeakageScan, dropped: int | None
) -> dict[str, Any]:
    """The figures of one benchmark group: the full corpus (as stored) and every level."""
    names = list(res.benchmarks)
    return {
        "full": found.report(benchmarks=names).to_dict(),
        "levels": {
            sub.level: after.report(
                labels=res.table.stored(res.selected(sub.level)), benchmarks=names
            ).to_dict()
            for sub in res.subsets
        },
        "decontaminated": None if dropped is None else {"dropped_sentences": dropped},
    }
