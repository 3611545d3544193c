"""Rebuilding one scenario's folders: built, compared with the previous build, and each
written once with its record (`build.json`'s `scenario`, or Few-NERD's `scenario.json`),
changelog entry and card in one swap.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from builders.hub.changelog import (
    CHANGELOG,
    compare,
    fewnerd_metrics,
    has_changes,
    subset_metrics,
    with_entry,
)
from builders.hub.folder import read_json
from builders.scenarios.book import Scenario
from builders.scenarios.report import ScenarioReport
from builders.splits import SplitConfig, build
from builders.splits.subsets import build_record, old_build, selected_labels, write_results
from builders.store import Store

SCENARIO_FILE = "scenario.json"  # Few-NERD folders (their summary.json belongs to the builder)


def recorded(out: Path, sc: Scenario, folder: str) -> dict[str, Any] | None:
    """The scenario record (name, key, parts) of the build in `out/folder`, if any."""
    if sc.kind == "fewnerd":
        rec = read_json(out / folder / SCENARIO_FILE)
    else:
        rec = old_build(out / folder, sc.params["strategy"])
    return rec.get("scenario") if isinstance(rec, dict) else None


def key_of(parts: Mapping[str, Any]) -> str:
    """A scenario's key: the sha256 of its parts (`regenerate.scenario_key`)."""
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def settle_models(record: dict[str, Any], ran: Mapping[str, Any] | None = None) -> None:
    """After a build, each model of the record's key as it ran (the build model's as `ran`,
    build.json's `provenance.model`, says; the others' runtime as `auto.expected_backend`
    now knows it), then the key again."""
    from builders.shift.auto import expected_backend

    models = record["parts"].get("models") or []
    for i, m in enumerate(models):
        if i == 0 and ran:
            m["runtime"] = ran.get("backend") or m.get("runtime")
            key = str(ran.get("cache_key") or "").split("|")
            m["weights"] = m.get("weights") or (key[-1] if len(key) > 1 else None)
        elif m.get("runtime") is None and m.get("weights"):
            m["runtime"] = expected_backend(m["name"], m["weights"], m.get("precision", "fp32"))
    record["key"] = key_of(record["parts"])


def _command(sc: Scenario) -> str:
    return f"builders regenerate --only {sc.name}"


def rebuild_splits(
    store: Store,
    sc: Scenario,
    out: Path,
    record: dict[str, Any],
    rep: ScenarioReport,
    run: dict[str, str],
    progress: bool,
    stage: Callable[[str], None],
) -> None:
    """Build the scenario's subsets, then write every folder with its changelog entry."""
    cfg = SplitConfig.from_dict({"source": sc.stored, **sc.params})
    results = build(store, cfg, None, progress=progress, on_stage=stage)
    prov = results[0].provenance if results else None
    settle_models(record, (prov or {}).get("model"))
    rep.key = record["key"]
    logs = {}
    for res in results:
        moved = _moved(out, cfg.strategy, res)
        for sub in res.subsets:
            folder = out / sub.name
            new = build_record(res, sub)
            changes = compare(subset_metrics(old_build(folder, cfg.strategy)), subset_metrics(new))
            rep.changes[sub.name] = changes
            before = selected_labels(folder, cfg.strategy)
            if before is not None:
                after = res.selected(sub.level)
                rep.labels_added[sub.name] = sorted(set(after) - set(before))
                rep.labels_removed[sub.name] = sorted(set(before) - set(after))
            extra: dict[str, Any] = {
                "labels_added": rep.labels_added.get(sub.name, []),
                "labels_removed": rep.labels_removed.get(sub.name, []),
            }
            if moved.get(sub.name):
                rep.moved[sub.name] = moved[sub.name]
                extra |= moved[sub.name]
            if not has_changes(changes, extra) and not rep.inputs:
                continue  # the folder keeps its changelog as it is
            logs[sub.name] = with_entry(
                read_json(folder / CHANGELOG) or [],
                run,
                cfg.strategy,
                changes,
                note=f"{sc.name}: {rep.reason}",
                extra=extra,
                inputs=rep.inputs,
            )
    write_results(out, results, command=_command(sc), scenario=record, changelogs=logs)


def _moved(out: Path, strategy: str, res: Any) -> dict[str, dict[str, dict[str, str]]]:
    """Per level folder, the labels that moved between the levels of one build: `moved_in`
    (label -> its level before) and `moved_out` (label -> its level now)."""
    subs = list(res.subsets)
    before = {s.level: selected_labels(out / s.name, strategy) for s in subs}
    if all(v is None for v in before.values()):
        return {}
    after = {s.level: set(res.selected(s.level)) for s in subs}
    was = {lab: lv for lv, labs in before.items() for lab in labs or []}
    now = {lab: lv for lv, labs in after.items() for lab in labs}
    out_: dict[str, dict[str, dict[str, str]]] = {}
    for s in subs:
        inn = {lab: was[lab] for lab in sorted(after[s.level]) if was.get(lab, s.level) != s.level}
        gone = {
            lab: now[lab]
            for lab in sorted(before[s.level] or [])
            if now.get(lab, s.level) != s.level
        }
        if inn or gone:
            out_[s.name] = {"moved_in": inn, "moved_out": gone}
    return out_


def rebuild_fewnerd(
    store: Store,
    sc: Scenario,
    out: Path,
    record: dict[str, Any],
    rep: ScenarioReport,
    run: dict[str, str],
    progress: bool,
    stage: Callable[[str], None],
) -> None:
    """Build the Few-NERD split; its changelog and record go in with the folder's one swap."""
    from builders.fewnerd.folder import write_split
    from builders.fewnerd.splits import FewnerdRequest, split_and_measure

    request = FewnerdRequest.from_dict(sc.stored, sc.params)
    folder = out / rep.folders[0]
    stage(f"Few-NERD {request.mode} split of {sc.stored}")
    built, fam = split_and_measure(store, request)
    settle_models(record)
    rep.key = record["key"]
    new = {**built.summary(), **({"familiarity": fam.to_dict()} if fam is not None else {})}
    changes = compare(fewnerd_metrics(read_json(folder / "summary.json")), fewnerd_metrics(new))
    rep.changes[folder.name] = changes
    log = read_json(folder / CHANGELOG) or []
    if has_changes(changes) or rep.inputs:
        log = with_entry(
            log, run, request.mode, changes, f"{sc.name}: {rep.reason}", inputs=rep.inputs
        )
    extra: dict[str, Any] = {SCENARIO_FILE: {"scenario": record}}
    if log:
        extra[CHANGELOG] = log
    write_split(built, out, fam, command=request.command_line(), extra_json=extra)
