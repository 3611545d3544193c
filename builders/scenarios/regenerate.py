"""Regenerating what the project publishes: scenarios -> repo folders, reusing what is current.

    book = load_scenarios("scenarios.toml")          (parsing: `builders.scenarios.book`)
    regenerate(store, book.scenarios, book.out)   -> [ScenarioReport]  (reused | built | ...)

A scenario's key hashes the fingerprints of its source's stored splits, its parameters, the
evaluation label sets, the fingerprints of the benchmarks' evaluation sentences (when leakage
is measured) and the toolkit version. `regenerate` ingests each source (a no-op when
unchanged) and rebuilds a scenario only when no folder records its key; otherwise nothing is
loaded, embedded or written. A rebuild (`builders.scenarios.rebuild`) is compared with the
previous build (rows, mentions, labels, Familiarity macro and per benchmark) and the
comparison is prepended to the folder's `changelog.json` (`builders.hub.changelog`), which the
dataset card shows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from builders import __version__
from builders.defaults import DEFAULT_BACKEND, DEFAULT_PRECISION
from builders.errors import BuildersError
from builders.hub.outdir import OutLock
from builders.labels import label_map, union_labels
from builders.scenarios.book import Scenario
from builders.scenarios.rebuild import rebuild_fewnerd, rebuild_splits, recorded
from builders.scenarios.report import ScenarioReport
from builders.shift.benchmarks import EvalSet, ingest_local, read_label_map, resolve
from builders.store import Store

# ---------------------------------------------------------------------------- keys
#: Parameters left out of a key at their default, so that scenarios built before they
#: existed keep their keys (the default torch fp32 is what those were built with).
_UNKEYED_DEFAULTS = {"backend": DEFAULT_BACKEND, "precision": DEFAULT_PRECISION}


def _keyed_params(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if _UNKEYED_DEFAULTS.get(k, object()) != v}


def scenario_key(store: Store, sc: Scenario) -> tuple[str, dict[str, Any]]:
    """Hash of what determines the scenario's output; also returns its parts (for reasons)."""
    parts: dict[str, Any] = {
        "kind": sc.kind,
        "fingerprints": {split: fp for _, split, fp in store.fingerprints(sc.stored)},
        "params": _keyed_params(sc.params),
        "toolkit_version": __version__,
    }
    if sc.kind == "splits":
        evalsets = resolve(
            list(sc.params["benchmarks"]) or None,
            store=store,
            keep_misc=sc.params["keep_misc"],
            mapping=sc.params.get("label_map"),
            protocol=sc.params["protocol"],
        )
        sets = {s.name: s.labels for s in evalsets}
        parts["eval_labels"] = {name: list(labels) for name, labels in sets.items()}
        parts["n_eval"] = len(union_labels(sets))
        if sc.params.get("leakage") or sc.params.get("decontaminate"):
            parts["benchmark_fingerprints"] = _sentence_fingerprints(store, evalsets)
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest(), parts


def _sentence_fingerprints(store: Store, evalsets: list[EvalSet]) -> dict[str, str | None]:
    """The fingerprint of each benchmark's evaluation sentences (the leakage scan reads them),
    a packaged one ingested from its local copy first as the scan would; None if unavailable."""
    out: dict[str, str | None] = {}
    for s in evalsets:
        if s.sentences is None:
            continue
        src, split = s.sentences
        if not store.has_source(src):
            ingest_local(store, src)
        found = dict((sp, fp) for _, sp, fp in store.fingerprints(src))
        out[s.name] = found.get(split)
    return out


def _why(old: dict[str, Any] | None, new: dict[str, Any], force: bool) -> str:
    if old is None:
        return "first build"
    reasons = []
    if old.get("fingerprints") != new["fingerprints"]:
        changed = sorted(
            s
            for s in set(old.get("fingerprints", {})) | set(new["fingerprints"])
            if old.get("fingerprints", {}).get(s) != new["fingerprints"].get(s)
        )
        reasons.append(f"source changed ({', '.join(changed)})")
    if old.get("params") != new["params"]:
        keys = sorted(k for k in new["params"] if old.get("params", {}).get(k) != new["params"][k])
        reasons.append(f"parameters changed ({', '.join(keys)})")
    if old.get("eval_labels") != new.get("eval_labels"):
        reasons.append("benchmark label sets changed")
    if old.get("benchmark_fingerprints") != new.get("benchmark_fingerprints"):
        reasons.append("benchmark sentences changed")
    if old.get("toolkit_version") != new["toolkit_version"]:
        reasons.append(f"toolkit {old.get('toolkit_version')} -> {new['toolkit_version']}")
    if not reasons:
        reasons.append("forced" if force else "output missing or incomplete")
    return "; ".join(reasons)


# ---------------------------------------------------------------------------- regenerate
def regenerate(
    store: Store,
    scenarios: list[Scenario],
    out: str | Path,
    only: list[str] | None = None,
    publish_org: str | None = None,
    force: bool = False,
    *,
    tag: str | None = None,
    progress: bool = False,
    on_stage: Callable[[str], None] | None = None,
    publish_kwargs: dict[str, Any] | None = None,
) -> list[ScenarioReport]:
    """Rebuild what changed, reuse the rest, report per scenario; then push if asked."""
    out = Path(out)
    stage = on_stage or (lambda s: None)
    scenarios = _selected(scenarios, only)
    run = _run_id(store, scenarios, tag)
    reports = []
    with OutLock(out, "builders regenerate"):
        for sc in scenarios:
            stage(f"scenario {sc.name}")
            reports.append(
                _one(
                    store,
                    sc,
                    out,
                    force,
                    explicit=bool(only),
                    run=run,
                    progress=progress,
                    stage=stage,
                )
            )
    if publish_org:
        _publish(scenarios, reports, out, publish_org, tag, publish_kwargs)
    return reports


def _selected(scenarios: list[Scenario], only: list[str] | None) -> list[Scenario]:
    """The scenarios named in `only` (all when empty), in the book's order.

    Raises:
        BuildersError: naming the first of `only` that is not a scenario of the book.
    """
    if not only:
        return scenarios
    known = {s.name for s in scenarios}
    missing = [n for n in only if n not in known]
    if missing:
        raise BuildersError(f"unknown scenario {missing[0]!r}. Valid: {', '.join(sorted(known))}")
    return [s for s in scenarios if s.name in only]


def _run_id(store: Store, scenarios: list[Scenario], tag: str | None) -> dict[str, str]:
    """The run's changelog version and id. Deterministic: the same regeneration gives the same
    changelog and card bytes, and entries of one run (e.g. entropy and max into one folder)
    merge by this id."""
    version = tag or f"untagged (toolkit {__version__})"
    ident = json.dumps([version, sorted(s.name for s in scenarios), store.fingerprints()])
    return {"version": version, "id": hashlib.sha256(ident.encode()).hexdigest()[:12]}


def _publish(
    scenarios: list[Scenario],
    reports: list[ScenarioReport],
    out: Path,
    publish_org: str,
    tag: str | None,
    publish_kwargs: dict[str, Any] | None,
) -> None:
    """Push the folders of every scenario that was not skipped and is published (each folder
    once), and record each push's result on the reports of the scenarios writing that folder."""
    from builders.hub.publish import plan_publishes, publish

    folders: list[str] = []
    for sc, rep in zip(scenarios, reports, strict=True):
        if rep.status != "skipped" and sc.publish:
            folders += [f for f in rep.folders if f not in folders]
    plans = plan_publishes([out / f for f in folders], publish_org)
    results = {r.repo_id: r.to_dict() for r in publish(plans, tag=tag, **(publish_kwargs or {}))}
    for rep in reports:
        rep.published = [
            results[f"{publish_org}/{f}"] for f in rep.folders if f"{publish_org}/{f}" in results
        ]


def _available(store: Store, sc: Scenario) -> tuple[str | Path | None, str]:
    """Where to ingest from (None: use the stored copy), or raise with why it is unavailable."""
    from builders.sources import get_source, is_hub_id

    spec = get_source(sc.source)
    if sc.path is not None:
        if Path(sc.path).exists():
            return Path(sc.path), ""
        if is_hub_id(sc.path):
            return sc.path, ""  # a Hub dataset id (online users)
        where = f"{sc.path} does not exist"
    else:
        local = spec.default_path()
        if local is not None:
            return local, ""
        where = "no `path` in the scenario and no local copy ($LABELSHIFT_DATA)"
    if store.has_source(sc.stored):
        return None, f"{where}; using the copy already in the store"
    raise _Unavailable(
        f"source {sc.source!r} of scenario {sc.name!r} is not available: {where}. "
        f"Give its files with `path = ...` in the scenarios file, set LABELSHIFT_DATA, "
        f"or ingest it first (`builders ingest {sc.source} --path ...`)"
    )


class _Unavailable(BuildersError):
    pass


def _check_stored_map(store: Store, sc: Scenario, mapping: dict[str, str] | None) -> None:
    """A source used from the store (its input is not at hand) was read with the scenario's
    `ingest_label_map`; else its labels are not the ones the scenario asks for.

    Raises:
        BuildersError: a split read with another map (or none), naming the fix.
    """
    want = dict(sorted(label_map(mapping or {}).items()))
    for split, stored in sorted(store.stored_splits(sc.stored).items()):
        if (stored.options or {}).get("label_map", {}) != want:
            raise BuildersError(
                f"scenario {sc.name!r}: {sc.stored}/{split} is in the store read with another "
                f"label map than ingest_label_map ({sc.ingest_label_map or 'none'}), and its "
                "input is not at hand to read again: give its files with `path = ...`, or "
                f"ingest it again (`builders ingest {sc.source} --path ... --name {sc.stored} "
                f"--label-map {sc.ingest_label_map or 'FILE'} --replace`)"
            )


def _one(
    store: Store,
    sc: Scenario,
    out: Path,
    force: bool,
    *,
    explicit: bool,
    run: dict[str, str],
    progress: bool,
    stage: Callable[[str], None],
) -> ScenarioReport:
    from builders.store.ingest import ingest

    rep = ScenarioReport(sc.name, "skipped", folders=sc.folders())
    try:
        where, note = _available(store, sc)
    except _Unavailable as exc:
        if explicit:
            raise
        rep.reason = str(exc)
        return rep
    mapping = read_label_map(sc.ingest_label_map) if sc.ingest_label_map else None
    if where is not None or not store.has_source(sc.stored):
        res = ingest(
            store, sc.source, where, name=sc.stored, options=dict(sc.options), label_map=mapping
        )
        rep.ingest = res.status
    else:
        _check_stored_map(store, sc, mapping)
        rep.ingest = "stored"
    key, parts = scenario_key(store, sc)
    rep.key = key
    olds = {f: recorded(out, sc, f) for f in rep.folders}
    if not force and all(o is not None and o.get("key") == key for o in olds.values()):
        rep.status = "reused"
        rep.reason = "unchanged" + (f" ({note})" if note else "")
        return rep
    previous = next((o for o in olds.values() if o), None)
    rep.reason = _why(previous.get("parts") if previous else None, parts, force)
    record = {"name": sc.name, "key": key, "parts": parts}
    if sc.kind == "fewnerd":
        rebuild_fewnerd(store, sc, out, record, rep, run, progress, stage)
    else:
        rebuild_splits(store, sc, out, record, rep, run, progress, stage)
    rep.status = "rebuilt" if previous else "built"
    return rep
