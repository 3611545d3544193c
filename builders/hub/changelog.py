"""A folder's history: what changed between two builds, kept in `changelog.json`, newest first.

    [{"version": "v2 (toolkit 0.1.0)", "run": "3f2a...", "note": "...",
      "changes": {config: {metric: [before, after]}},
      "details": {config: {"labels_added": [...], "labels_removed": [...]}}}, ...]

Metrics come from a subset's `build.json` (rows, mentions, labels, Familiarity macro and per
benchmark) or a Few-NERD folder's `summary.json` (per part). Pure: entries in, entries out;
`scenario_rebuild` reads and writes the file on each rebuild, and the dataset cards show it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

CHANGELOG = "changelog.json"
#: The metrics of `changelog_entry`, in order (no per-benchmark Familiarity).
HEADLINE = ("rows", "mentions", "labels", "familiarity")


def _r4(x: Any) -> float | None:
    return None if x is None else round(float(x), 4)


def subset_metrics(build: Mapping[str, Any] | None) -> dict[str, Any]:
    """rows, mentions, labels, familiarity (macro) and `familiarity <benchmark>` of a build.json."""
    if not build:
        return {}
    s = build["subset"]
    m: dict[str, Any] = {
        "rows": int(s["sentences"]),
        "mentions": int(s["mentions"]),
        "labels": int(s["labels"]),
        "familiarity": _r4(s["familiarity"]["macro"]),
    }
    for bench, v in sorted(s["familiarity"]["per_benchmark"].items()):
        m[f"familiarity {bench}"] = _r4(v)
    return m


def fewnerd_metrics(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """`<part> rows|mentions|labels` and `dev|test familiarity` of a Few-NERD summary.json."""
    if not summary:
        return {}
    m: dict[str, Any] = {}
    for part, v in summary["parts"].items():
        m[f"{part} rows"] = v.get("sentences")
        m[f"{part} mentions"] = v.get("mentions")
        m[f"{part} labels"] = v.get("types")
    for part in ("dev", "test"):
        f = (summary.get("familiarity") or {}).get(part)
        if f:
            m[f"{part} familiarity"] = _r4(f["mean"])
    return m


def compare(
    before: Mapping[str, Any], after: Mapping[str, Any], metrics: Iterable[str] | None = None
) -> dict[str, list[Any]]:
    """metric -> [before, after] (None where a side lacks it).

    By default the metrics are `after`'s, then those only `before` has.
    """
    keys = [*after, *(k for k in before if k not in after)] if metrics is None else metrics
    return {k: [before.get(k), after.get(k)] for k in keys}


def changelog_entry(
    version: str,
    old: Mapping[str, Mapping[str, Any]],
    new: Mapping[str, Mapping[str, Any]],
    note: str | None = None,
) -> dict[str, Any]:
    """One changelog entry for `render_card`: what changed per config between two sets of builds.

    `old` and `new` map config name -> build.json; a config present on one side only is listed
    as added or removed. The result is `{"version", "note", "changes": {config: {metric:
    [before, after]}}}` with metrics rows, mentions, labels and familiarity (the macro).
    """
    changes = {
        c: compare(subset_metrics(old.get(c)), subset_metrics(new.get(c)), HEADLINE)
        for c in sorted(set(old) | set(new), key=lambda n: (n != "entropy", n))
    }
    return {"version": version, "note": note, "changes": changes}


def with_entry(
    log: list[dict[str, Any]],
    run: Mapping[str, str],
    config: str,
    changes: dict[str, list[Any]],
    note: str,
    extra: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The changelog with this run's entry first (merged if the run already has one).

    Entries of one run (e.g. entropy and max into one folder) merge by `run["id"]`.
    """
    log = [dict(e) for e in log]
    if log and log[0].get("run") == run["id"]:
        entry = log[0]
        entry["note"] = "; ".join(x for x in (entry.get("note"), note) if x)
    else:
        entry = {"version": run["version"], "run": run["id"], "note": note, "changes": {}}
        log.insert(0, entry)
    entry["changes"] = {**entry.get("changes", {}), config: changes}
    if extra:
        entry["details"] = {**entry.get("details", {}), config: extra}
    return log
