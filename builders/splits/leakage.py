"""A build's leakage record: the full corpus's figures, each level's, and what was dropped.

    res.leakage = leakage_record(res, found, after, dropped)
    build.json["leakage"] = res.leakage_of(level)   ({full, subset, decontaminated})

`found` is the scan of the corpus as stored; `after` the scan the subsets were cut from (the
same scan, or the decontaminated corpus's with `--decontaminate`). A level's figures count the
sentences it keeps (those with a mention of one of its labels), as `builders.shift.leakage`
restricts them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from builders.errors import CannotBuild, opt, options_that_help
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


def refuse_unscannable(missing: Mapping[str, str], benchmarks: Sequence[str]) -> None:
    """Refuse a decontamination that cannot scan every benchmark of the build (`missing`:
    name -> why, as `builders.shift.benchmarks.unscannable` or a scan's `not_scanned` says):
    it would drop none of their overlapping sentences, and the card would say the corpus
    was decontaminated. Nothing is refused when `missing` is empty."""
    if not missing:
        return
    by_why: dict[str, list[str]] = {}
    for name, why in missing.items():
        by_why.setdefault(why, []).append(name)
    shown = "; ".join(f"{', '.join(names)} ({why})" for why, names in by_why.items())
    rest = [b for b in benchmarks if b not in missing]
    narrow = (
        f"{opt('benchmarks', ','.join(rest))} (only the benchmarks it can scan)"
        if rest
        else f"{opt('benchmarks')} naming benchmarks whose sentences are stored"
    )
    raise CannotBuild(
        f"{opt('decontaminate')} cannot scan {len(missing)} of the build's "
        f"{len(benchmarks)} benchmarks for their sentences, so it would drop none of their "
        f"overlaps: {shown}. Nothing was written. {options_that_help()}: ingest their "
        "sentences (`builders ingest SOURCE --path ...`), or set LABELSHIFT_DATA to the folder "
        f"holding the packaged benchmarks' local copies; {narrow}"
    )
