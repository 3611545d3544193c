"""A folder's history: what changed between two builds, kept in `changelog.json`, newest first.

    [{"version": "v2 (toolkit 0.1.0)", "run": "3f2a...", "note": "...",
      "input": {source: {split: {"files_added": [...], "files_removed": [...],
                                 "files_changed": [...], "sentences": [before, after],
                                 "mentions": [before, after],
                                 "revision": [before, after]}}},   (a Hub dataset's commit)
      "changes": {config: {metric: [before, after]}},
      "details": {config: {"labels_added": [...], "labels_removed": [...],
                           "moved_in": {label: level}, "moved_out": {label: level}}}}, ...]

Metrics come from a subset's `build.json` or a Few-NERD folder's `summary.json`, and their
Familiarity report. Pure: the scenarios' rebuild writes the file, the cards show it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from builders import __version__
from builders.hub.templating import r4

CHANGELOG = "changelog.json"
#: How an entry built without a tag is named until a push names it (`named_by`).
UNTAGGED = "untagged"
#: The metrics a commit message names, in order (no per-benchmark Familiarity).
HEADLINE = ("rows", "mentions", "labels", "familiarity")


def report_metrics(rep: Mapping[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    """`familiarity` (the union macro) and `familiarity <benchmark>` of a Familiarity report,
    rounded to 4 places; `prefix` names the part."""
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


def compare(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[Any]]:
    """metric -> [before, after] (None where a side lacks it): `after`'s metrics, then those
    only `before` has."""
    keys = [*after, *(k for k in before if k not in after)]
    return {k: [before.get(k), after.get(k)] for k in keys}


def run_version(tag: str | None) -> str:
    """The version a rebuild's entry is named: the tag it is built for, else `untagged
    (toolkit VERSION)` (no tag git takes: it holds spaces), until a push names it."""
    return tag or f"{UNTAGGED} (toolkit {__version__})"


def named_by(log: list[dict[str, Any]], tag: str | None) -> list[dict[str, Any]]:
    """The changelog as a push tagged `tag` publishes it: its newest entry, if built without a
    tag (named by `run_version`), named by the tag; otherwise `log` itself."""
    version = log[0].get("version") if log else None
    untagged = isinstance(version, str) and (
        version == UNTAGGED or version.startswith(UNTAGGED + " (")
    )
    if not tag or not untagged:
        return log
    return [{**log[0], "version": tag}, *log[1:]]


def has_changes(changes: Mapping[str, list[Any]], extra: Mapping[str, Any] | None = None) -> bool:
    """Whether a rebuild changed a metric (`compare`'s [before, after]) or `extra` holds a
    non-empty value (labels added or removed)."""
    return any(before != after for before, after in changes.values()) or any(
        bool(v) for v in (extra or {}).values()
    )


def input_changes(
    before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """What changed between two scenario records' `inputs` (source -> split -> {inputs,
    sentences, mentions}), only the splits that changed listed: see the module docstring."""
    out: dict[str, dict[str, Any]] = {}
    for source in sorted(set(before) | set(after)):
        old, new = before.get(source) or {}, after.get(source) or {}
        splits: dict[str, Any] = {}
        for split in sorted(set(old) | set(new)):
            a, b = old.get(split) or {}, new.get(split) or {}
            fa = {i["input"]: i["fingerprint"] for i in a.get("inputs", [])}
            fb = {i["input"]: i["fingerprint"] for i in b.get("inputs", [])}
            if fa == fb and a.get("sentences") == b.get("sentences"):
                continue
            splits[split] = {
                "files_added": [n for n in fb if n not in fa],
                "files_removed": [n for n in fa if n not in fb],
                "files_changed": [n for n in fb if n in fa and fa[n] != fb[n]],
                "sentences": [a.get("sentences"), b.get("sentences")],
                "mentions": [a.get("mentions"), b.get("mentions")],
            }
            ra, rb = _commits(a), _commits(b)
            if ra != rb:  # a Hub dataset read at another commit
                splits[split]["revision"] = [ra, rb]
        if splits:
            out[source] = splits
    return out


def _commits(split: Mapping[str, Any]) -> str | None:
    """The Hub commit(s) a recorded split's inputs were read at, or None (files)."""
    found = sorted({i["revision"] for i in split.get("inputs", []) if i.get("revision")})
    return ", ".join(found) or None


def describe_inputs(changes: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per changed split: `med/train: +part3.json; 500 -> 750 sentences, ...`, a
    Hub dataset's `Hub revision 1a2b3c4d5e6f -> 6f5e4d3c2b1a` among them."""
    lines = []
    for source, splits in changes.items():
        for split, c in splits.items():
            files = [f"+{n}" for n in c["files_added"]] + [f"-{n}" for n in c["files_removed"]]
            files += [f"~{n}" for n in c["files_changed"]]
            shown = ", ".join(files[:6]) + (f" and {len(files) - 6} more" if len(files) > 6 else "")
            rev = c.get("revision")
            revised = f"Hub revision {_short(rev[0])} -> {_short(rev[1])}" if rev else ""
            counts = [
                f"{_n(c[k][0])} -> {_n(c[k][1])} {k}"
                for k in ("sentences", "mentions")
                if c[k][0] != c[k][1]
            ]
            parts = (shown, revised, ", ".join(counts))
            lines.append(f"{source}/{split}: " + "; ".join(x for x in parts if x))
    return lines


def _short(commit: str | None) -> str:
    """A commit as a line shows it: its first 12 hex digits (each, where several)."""
    return "-" if commit is None else ", ".join(c.strip()[:12] for c in commit.split(","))


def _n(v: Any) -> str:
    return "-" if v is None else f"{v:,}"


def commit_message(folder: str, log: Sequence[Mapping[str, Any]]) -> str:
    """A push's commit message: the folder and its newest changelog entry (its version, note,
    input changes and the headline metrics that moved), one line each."""
    if not log:
        return f"Publish {folder}"
    e = log[0]
    lines = [f"Publish {folder} {e.get('version', '')}".rstrip(), ""]
    if e.get("note"):
        lines.append(str(e["note"]))
    lines += [f"input {x}" for x in describe_inputs(e.get("input") or {})]
    for config, metrics in (e.get("changes") or {}).items():
        moved = [
            f"{m} {_v(metrics[m][0])} -> {_v(metrics[m][1])}"
            for m in HEADLINE
            if m in metrics and metrics[m][0] != metrics[m][1]
        ]
        if moved:
            lines.append(f"{config}: " + ", ".join(moved))
    return "\n".join(lines).rstrip()


def _v(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else _n(v)


def with_entry(
    log: list[dict[str, Any]],
    run: Mapping[str, str],
    config: str,
    changes: dict[str, list[Any]],
    note: str,
    extra: dict[str, Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The changelog with this run's entry first, merged by `run["id"]` where the run already
    has one (entropy and max into one folder); `inputs`: `input_changes`."""
    log = [dict(e) for e in log]
    if log and log[0].get("run") == run["id"]:
        entry = log[0]
        entry["note"] = "; ".join(x for x in (entry.get("note"), note) if x)
    else:
        entry = {"version": run["version"], "run": run["id"], "note": note, "changes": {}}
        log.insert(0, entry)
    if inputs:
        entry["input"] = {**entry.get("input", {}), **inputs}
    entry["changes"] = {**entry.get("changes", {}), config: changes}
    if extra:
        entry["details"] = {**entry.get("details", {}), config: extra}
    return log
