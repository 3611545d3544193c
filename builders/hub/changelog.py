"""A folder's history: what changed between two builds, kept in `changelog.json`, newest first.

    [{"version": "v2 (toolkit 0.1.0)", "run": "3f2a...", "note": "...",
      "changes": {config: {metric: [before, after]}},
      "details": {config: {"labels_added": [...], "labels_removed": [...]}}}, ...]

Metrics come from a subset's `build.json` (rows, mentions, labels) or a Few-NERD folder's
`summary.json` (per part), and from their Familiarity report (union macro and per benchmark,
read by the one `report_metrics`). Pure: entries in, entries out; the scenarios' rebuild
writes the file and the dataset cards show it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from builders.defaults import config_order
from builders.hub.templating import r4

CHANGELOG = "changelog.json"
#: The metrics of `changelog_entry`, in order (no per-benchmark Familiarity).
HEADLINE = ("rows", "mentions", "labels", "familiarity")


def report_metrics(rep: Mapping[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    """`familiarity` (the union macro) and `familiarity <benchmark>` of a Familiarity report
    (`FamiliarityReport.to_dict()`), rounded to 4 places; `prefix` names the part."""
    if not rep:
        return {}
    m: dict[str, Any] = {f"{prefix}familiarity": r4(rep["union_macro"])}
    for bench, b in sorted(rep["per_benchmark"].items()):
        m[f"{prefix}familiarity {bench}"] = r4(b["familiarity"])
    return m


def subset_metrics(build: Mapping[str, Any] | None) -> dict[str, Any]:
    """rows, mentions, labels and the Familiarity metrics of a subset's build.json."""
    if not build:
        return {}
    s = build["subset"]
    return {
        "rows": int(s["sentences"]),
        "mentions": int(s["mentions"]),
        "labels": int(s["labels"]),
        **report_metrics(s["familiarity"]),
    }


def fewnerd_metrics(summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """`<part> rows|mentions|labels` and the Familiarity metrics of a Few-NERD summary.json."""
    if not summary:
        return {}
    m: dict[str, Any] = {}
    for part, v in summary["parts"].items():
        m[f"{part} rows"] = v.get("sentences")
        m[f"{part} mentions"] = v.get("mentions")
        m[f"{part} labels"] = v.get("types")
    return {**m, **report_metrics(summary.get("familiarity"))}


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
        for c in config_order(set(old) | set(new))
    }
    return {"version": version, "note": note, "changes": changes}


def has_changes(changes: Mapping[str, list[Any]], extra: Mapping[str, Any] | None = None) -> bool:
    """Whether a rebuild changed anything a changelog entry would show: a metric (`compare`'s
    [before, after]) or a non-empty list in `extra` (labels added or removed)."""
    return any(before != after for before, after in changes.values()) or any(
        bool(v) for v in (extra or {}).values()
    )


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
