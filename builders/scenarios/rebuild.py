"""Rebuilding one scenario's folders, with its record, changelog entry and card.

    OUT/<source>-<level>-shift/<strategy>/build.json   + {"scenario": record}   (kind "splits")
    OUT/<source>-<level>-shift/changelog.json, README.md (the card shows the changelog)
    OUT/fewnerd-<mode>/scenario.json, changelog.json   (kind "fewnerd", written inside the swap)

`builders.scenarios.regenerate` decides when to rebuild (the scenario's key); this module does it and
compares the result with the previous build.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builders.hub.changelog import CHANGELOG, compare, fewnerd_metrics, subset_metrics, with_entry
from builders.scenarios.book import Scenario
from builders.store import Store

if TYPE_CHECKING:
    from builders.scenarios.regenerate import ScenarioReport

SCENARIO_FILE = "scenario.json"  # Few-NERD folders (their summary.json belongs to the builder)


def read_json(path: Path) -> Any:
    """The parsed file, or None when it is missing or not valid JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def recorded(out: Path, sc: Scenario, folder: str) -> dict[str, Any] | None:
    """The scenario record (name, key, parts) of the build in `out/folder`, if any."""
    if sc.kind == "fewnerd":
        path = out / folder / SCENARIO_FILE
    else:
        path = out / folder / sc.params["strategy"] / "build.json"
    rec = read_json(path)
    return rec.get("scenario") if isinstance(rec, dict) else None


def _append_changelog(
    folder: Path,
    run: dict[str, str],
    config: str,
    changes: dict[str, list[Any]],
    note: str,
    extra: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Prepend (or merge into this run's) entry in `folder/changelog.json`; newest first."""
    from builders.hub.folder import write_json

    path = folder / CHANGELOG
    log = with_entry(read_json(path) or [], run, config, changes, note, extra)
    write_json(path, log)
    return log


def _selected_labels(folder: Path, strategy: str) -> list[str] | None:
    path = folder / strategy / "scores.parquet"
    if not path.exists():
        return None
    import pyarrow.parquet as pq

    t = pq.read_table(path, columns=["label", "selected"])
    return [
        lab
        for lab, s in zip(
            t.column("label").to_pylist(), t.column("selected").to_pylist(), strict=True
        )
        if s
    ]


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
    """Build the scenario's subsets; per folder record, compare, log and render the card."""
    from builders.hub.folder import atomic_write_text, configs_of, write_json
    from builders.splits import SplitConfig, build

    p = sc.params
    strategy = p["strategy"]
    old_builds = {f: read_json(out / f / strategy / "build.json") for f in rep.folders}
    old_labels = {f: _selected_labels(out / f, strategy) for f in rep.folders}
    cfg = SplitConfig(
        source=sc.stored,
        strategy=strategy,
        levels=tuple(p["levels"]),
        benchmarks=tuple(p["benchmarks"]),
        model=p["model"],
        k=int(p["k"]),
        temperature=float(p["temperature"]),
        weighting=p["weighting"],
        low_q=p["low_q"],
        high_q=p["high_q"],
        medium_q=tuple(p["medium_q"]) if p["medium_q"] is not None else None,
        profile=p["profile"],
        keep_misc=bool(p["keep_misc"]),
        seed=int(p["seed"]),
    )
    build(store, cfg, out, progress=progress, command=_command(sc), on_stage=stage)
    for folder in rep.folders:
        path = out / folder / strategy / "build.json"
        new = read_json(path)
        new["scenario"] = record
        write_json(path, new)
        changes = compare(subset_metrics(old_builds[folder]), subset_metrics(new))
        rep.changes[folder] = changes
        before, after = old_labels[folder], _selected_labels(out / folder, strategy) or []
        if before is not None:
            rep.labels_added[folder] = sorted(set(after) - set(before))
            rep.labels_removed[folder] = sorted(set(before) - set(after))
        log = _append_changelog(
            out / folder,
            run,
            strategy,
            changes,
            note=f"{sc.name}: {rep.reason}",
            extra={
                "labels_added": rep.labels_added.get(folder, []),
                "labels_removed": rep.labels_removed.get(folder, []),
            },
        )
        builds = {c: read_json(out / folder / c / "build.json") for c in configs_of(out / folder)}
        card = _render_card(folder, builds, sc, log)
        if card is not None:
            atomic_write_text(out / folder / "README.md", card)


def _render_card(
    folder: str, builds: dict[str, Any], sc: Scenario, changelog: list[dict[str, Any]]
) -> str:
    """The full card, with the changelog."""
    from builders.hub.cards import render_card
    from builders.sources import get_source

    spec = get_source(sc.source)
    return render_card(
        folder, builds, license=spec.license, source_origin=spec.origin, changelog=changelog
    )


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
    """Build the Few-NERD split; its changelog and record go in before the folder swap."""
    from builders.fewnerd.folder import write_split
    from builders.fewnerd.splits import build_split, familiarity_summary

    p = sc.params
    folder = out / rep.folders[0]
    old = read_json(folder / "summary.json")
    log = read_json(folder / CHANGELOG) or []
    stage(f"Few-NERD {p['mode']} split of {sc.stored}")
    built = build_split(store, sc.stored, p["mode"], p["assignment"], int(p["seed"]))
    fam = familiarity_summary(store, built, p["model"], k=int(p["k"])) if p["familiarity"] else None
    command = (
        f"builders fewnerd-splits --mode {p['mode']} --assignment {p['assignment']} "
        f"--seed {p['seed']} --source {sc.stored}"
    )
    new = {**built.summary(), **({"familiarity": fam} if fam is not None else {})}
    changes = compare(fewnerd_metrics(old), fewnerd_metrics(new))
    rep.changes[folder.name] = changes
    log = with_entry(log, run, p["mode"], changes, note=f"{sc.name}: {rep.reason}")
    # The history and the scenario record go into the new folder before it is swapped in.
    write_split(
        built,
        out,
        fam,
        command=command,
        extra_json={CHANGELOG: log, SCENARIO_FILE: {"scenario": record}},
    )
