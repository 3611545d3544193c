"""What the project publishes, and rebuilding it: `scenarios.toml` -> repo folders.

    [defaults]                      model, k, benchmarks, seed, ... shared by every scenario
    [[scenario]]                    name, source, strategy, levels (kind = "splits", default)
    [[scenario]]                    name, kind = "fewnerd", mode = "intra" | "inter"

A scenario's key hashes the fingerprints of its source's stored splits, its parameters, the
evaluation label sets and the toolkit version. `regenerate` ingests each source (a no-op when
unchanged) and rebuilds a scenario only when no folder records its key; otherwise nothing is
loaded, embedded or written. A rebuild is compared with the previous build (rows, mentions,
labels, Familiarity macro and per benchmark) and the comparison is prepended to the folder's
`changelog.json`, which the dataset card shows.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from builders import __version__
from builders.errors import BuildersError
from builders.store import Store

KINDS = ("splits", "fewnerd")
SPLIT_KEYS = {
    "strategy": "entropy",
    "levels": ["low", "medium", "high"],
    "benchmarks": "all",
    "model": "all-mpnet-base-v2",
    "k": 1000,
    "temperature": 0.01,
    "weighting": "zipf",
    "low_q": None,
    "high_q": None,
    "medium_q": None,
    "profile": None,
    "keep_misc": False,
    "seed": 0,
}
FEWNERD_KEYS = {
    "mode": None,
    "assignment": "official",
    "seed": 0,
    "model": "all-mpnet-base-v2",
    "k": 1000,
    "familiarity": True,
}
COMMON_KEYS = {"name", "kind", "source", "path", "store_as", "options", "description", "publish"}
CHANGELOG = "changelog.json"
SCENARIO_FILE = "scenario.json"  # Few-NERD folders (their summary.json belongs to the builder)


@dataclass(frozen=True)
class Scenario:
    """One published build: a source, how it is read, and the build parameters."""

    name: str
    source: str
    kind: str = "splits"
    path: str | None = None
    store_as: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    publish: bool = True

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise BuildersError(
                f"scenario {self.name!r}: unknown kind {self.kind!r}. Valid: {', '.join(KINDS)}"
            )
        if self.kind == "fewnerd" and self.params.get("mode") not in ("intra", "inter"):
            raise BuildersError(
                f'scenario {self.name!r}: kind = "fewnerd" needs mode = "intra" or "inter"'
            )

    @property
    def stored(self) -> str:
        """The name the source is stored under (and the prefix of its folders)."""
        return self.store_as or self.source

    def folders(self) -> list[str]:
        if self.kind == "fewnerd":
            return [f"fewnerd-{self.params['mode']}"]
        return [f"{self.stored}-{lv}-shift" for lv in self.params["levels"]]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "options": dict(self.options), "params": dict(self.params)}


@dataclass
class ScenarioBook:
    scenarios: list[Scenario]
    out: Path
    path: Path | None = None


def load_scenarios(path: str | Path) -> ScenarioBook:
    """Read a scenarios file; relative `path`s and `out` are relative to the file's folder."""
    path = Path(path)
    if not path.is_file():
        raise BuildersError(f"{path}: no scenarios file here (give one with --scenarios)")
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise BuildersError(f"{path}: not valid TOML: {exc}") from exc
    return parse_scenarios(doc, base=path.parent, origin=str(path))


def parse_scenarios(
    doc: Mapping[str, Any], base: Path = Path("."), origin: str = "scenarios"
) -> ScenarioBook:
    defaults = dict(doc.get("defaults", {}))
    out = Path(os.path.expandvars(str(defaults.pop("out", "out"))))
    out = out if out.is_absolute() else base / out
    entries = doc.get("scenario", [])
    if not isinstance(entries, list) or not entries:
        raise BuildersError(f"{origin}: no [[scenario]] tables")
    scenarios: list[Scenario] = []
    for i, raw in enumerate(entries, start=1):
        name = raw.get("name")
        if not name:
            raise BuildersError(f"{origin}: scenario #{i} has no name")
        kind = raw.get("kind", "splits")
        keys = SPLIT_KEYS if kind == "splits" else FEWNERD_KEYS
        unknown = sorted(set(raw) - set(keys) - COMMON_KEYS)
        if unknown:
            raise BuildersError(
                f"{origin}: scenario {name!r}: unknown key {unknown[0]!r}. "
                f"Valid: {', '.join(sorted(set(keys) | COMMON_KEYS))}"
            )
        params = {k: raw.get(k, defaults.get(k, v)) for k, v in keys.items()}
        if kind == "splits":
            params["levels"] = list(params["levels"])
            b = params["benchmarks"]
            params["benchmarks"] = (
                [x.strip() for x in b.split(",")] if isinstance(b, str) else list(b)
            )
            if params["medium_q"] is not None:
                params["medium_q"] = list(params["medium_q"])
        p = raw.get("path")
        if p is not None:
            p = os.path.expanduser(os.path.expandvars(str(p)))
            if "$" not in p and not Path(p).is_absolute():
                p = str(base / p)
        scenarios.append(
            Scenario(
                name=name,
                kind=kind,
                source=raw.get("source") or ("fewnerd" if kind == "fewnerd" else ""),
                path=p,
                store_as=raw.get("store_as"),
                options=dict(raw.get("options", {})),
                params=params,
                description=raw.get("description", ""),
                publish=bool(raw.get("publish", True)),
            )
        )
        if not scenarios[-1].source:
            raise BuildersError(f"{origin}: scenario {name!r} has no source")
    names = [s.name for s in scenarios]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise BuildersError(f"{origin}: scenario name {dup[0]!r} is used twice")
    return ScenarioBook(scenarios, out, None)


@dataclass
class ScenarioReport:
    name: str
    status: str  # reused | built | rebuilt | skipped
    folders: list[str] = field(default_factory=list)
    reason: str = ""
    ingest: str | None = None
    key: str | None = None
    changes: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    labels_added: dict[str, list[str]] = field(default_factory=dict)
    labels_removed: dict[str, list[str]] = field(default_factory=dict)
    published: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """One line per folder of what changed, e.g. `low: rows 120 -> 98, familiarity ...`."""
        if self.status in ("reused", "skipped"):
            return self.reason
        parts = []
        for folder, metrics in self.changes.items():
            if all(a is None for a, _ in metrics.values()):  # a first build: the headline only
                head = [
                    f"{m} {_fmt(b)}"
                    for m, (_, b) in metrics.items()
                    if m.split()[-1] in ("rows", "labels")
                    or m in ("familiarity",)
                    or m.endswith(" familiarity")
                ]
                parts.append(f"{folder}: {', '.join(head)}")
                continue
            diffs = [f"{m} {_fmt(a)} -> {_fmt(b)}" for m, (a, b) in metrics.items() if a != b]
            added, removed = self.labels_added.get(folder), self.labels_removed.get(folder)
            if added:
                diffs.append("+" + ", +".join(added[:5]) + (" ..." if len(added) > 5 else ""))
            if removed:
                diffs.append("-" + ", -".join(removed[:5]) + (" ..." if len(removed) > 5 else ""))
            parts.append(f"{folder}: {'; '.join(diffs) if diffs else 'no change in the numbers'}")
        return (self.reason + "\n" if self.reason else "") + "\n".join(parts)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4f}"
    return "-" if v is None else f"{v:,}" if isinstance(v, int) else str(v)


# ---------------------------------------------------------------------------- keys
def scenario_key(store: Store, sc: Scenario) -> tuple[str, dict[str, Any]]:
    """Hash of what determines the scenario's output; also returns its parts (for reasons)."""
    rows = store.con.execute(
        "SELECT split, fingerprint FROM sources WHERE source = ? ORDER BY split", [sc.stored]
    ).fetchall()
    parts: dict[str, Any] = {
        "kind": sc.kind,
        "fingerprints": {s: fp for s, fp in rows},
        "params": dict(sc.params),
        "toolkit_version": __version__,
    }
    if sc.kind == "splits":
        from builders.labels import resolve_benchmarks, union_labels

        benches = resolve_benchmarks(list(sc.params["benchmarks"]))
        parts["eval_labels"] = {b.name: list(b.labels(sc.params["keep_misc"])) for b in benches}
        parts["n_eval"] = len(union_labels(benches, sc.params["keep_misc"]))
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest(), parts


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
    if old.get("toolkit_version") != new["toolkit_version"]:
        reasons.append(f"toolkit {old.get('toolkit_version')} -> {new['toolkit_version']}")
    if not reasons:
        reasons.append("forced" if force else "output missing or incomplete")
    return "; ".join(reasons)


# ---------------------------------------------------------------------------- records
def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _record_path(out: Path, sc: Scenario, folder: str) -> Path:
    if sc.kind == "fewnerd":
        return out / folder / SCENARIO_FILE
    return out / folder / sc.params["strategy"] / "build.json"


def _recorded(out: Path, sc: Scenario, folder: str) -> dict[str, Any] | None:
    rec = _read_json(_record_path(out, sc, folder))
    return rec.get("scenario") if isinstance(rec, dict) else None


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
    if only:
        known = {s.name for s in scenarios}
        missing = [n for n in only if n not in known]
        if missing:
            raise BuildersError(
                f"unknown scenario {missing[0]!r}. Valid: {', '.join(sorted(known))}"
            )
        scenarios = [s for s in scenarios if s.name in only]
    # Deterministic: the same regeneration gives the same changelog and card bytes. Entries
    # of one run (e.g. entropy and max into one folder) merge by this id.
    version = tag or f"untagged (toolkit {__version__})"
    ident = json.dumps([version, sorted(s.name for s in scenarios), _store_state(store)])
    run = {"version": version, "id": hashlib.sha256(ident.encode()).hexdigest()[:12]}
    reports = []
    for sc in scenarios:
        stage(f"scenario {sc.name}")
        reports.append(
            _one(
                store, sc, out, force, explicit=bool(only), run=run, progress=progress, stage=stage
            )
        )
    if publish_org:
        from builders.publish import plan_publish, publish

        folders: list[str] = []
        for sc, rep in zip(scenarios, reports, strict=True):
            if rep.status != "skipped" and sc.publish:
                folders += [f for f in rep.folders if f not in folders]
        plans = [plan_publish(out / f, publish_org) for f in folders]
        results = {
            r.repo_id: r.to_dict() for r in publish(plans, tag=tag, **(publish_kwargs or {}))
        }
        for rep in reports:
            rep.published = [
                results[f"{publish_org}/{f}"]
                for f in rep.folders
                if f"{publish_org}/{f}" in results
            ]
    return reports


def _available(store: Store, sc: Scenario) -> tuple[str | Path | None, str]:
    """Where to ingest from (None: use the stored copy), or raise with why it is unavailable."""
    from builders.sources import get_source

    spec = get_source(sc.source)
    if sc.path is not None:
        if Path(sc.path).exists():
            return Path(sc.path), ""
        if sc.source == "hf" and "$" not in sc.path and not sc.path.startswith(("/", ".")):
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
    from builders.ingest import ingest

    rep = ScenarioReport(sc.name, "skipped", folders=sc.folders())
    try:
        where, note = _available(store, sc)
    except _Unavailable as exc:
        if explicit:
            raise
        rep.reason = str(exc)
        return rep
    if where is not None or not store.has_source(sc.stored):
        res = ingest(store, sc.source, where, name=sc.stored, options=dict(sc.options))
        rep.ingest = res.status
    else:
        rep.ingest = "stored"
    key, parts = scenario_key(store, sc)
    rep.key = key
    olds = {f: _recorded(out, sc, f) for f in rep.folders}
    if not force and all(o is not None and o.get("key") == key for o in olds.values()):
        rep.status = "reused"
        rep.reason = "unchanged" + (f" ({note})" if note else "")
        return rep
    previous = next((o for o in olds.values() if o), None)
    rep.reason = _why(previous.get("parts") if previous else None, parts, force)
    record = {"name": sc.name, "key": key, "parts": parts}
    if sc.kind == "fewnerd":
        _rebuild_fewnerd(store, sc, out, record, rep, run, progress, stage)
    else:
        _rebuild_splits(store, sc, out, record, rep, run, progress, stage)
    rep.status = "rebuilt" if previous else "built"
    return rep


def _command(sc: Scenario) -> str:
    return f"builders regenerate --only {sc.name}"


def _rebuild_splits(
    store: Store,
    sc: Scenario,
    out: Path,
    record: dict[str, Any],
    rep: ScenarioReport,
    run: dict[str, str],
    progress: bool,
    stage: Callable[[str], None],
) -> None:
    from builders.hubfolder import atomic_write_text, configs_of, write_json
    from builders.splits import SplitConfig, build

    p = sc.params
    strategy = p["strategy"]
    old_builds = {f: _read_json(out / f / strategy / "build.json") for f in rep.folders}
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
        new = _read_json(path)
        new["scenario"] = record
        write_json(path, new)
        changes = _changes(old_builds[folder], new)
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
        builds = {c: _read_json(out / folder / c / "build.json") for c in configs_of(out / folder)}
        card = _render_card(folder, builds, sc, log)
        if card is not None:
            atomic_write_text(out / folder / "README.md", card)


def _changes(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, list[Any]]:
    """metric -> [before, after]: rows, mentions, labels, Familiarity macro and per benchmark."""

    def metrics(b: dict[str, Any] | None) -> dict[str, Any]:
        if not b:
            return {}
        s = b["subset"]
        m: dict[str, Any] = {
            "rows": int(s["sentences"]),
            "mentions": int(s["mentions"]),
            "labels": int(s["labels"]),
            "familiarity": round(float(s["familiarity"]["macro"]), 4),
        }
        for bench, v in sorted(s["familiarity"]["per_benchmark"].items()):
            m[f"familiarity {bench}"] = round(float(v), 4)
        return m

    a, b = metrics(old), metrics(new)
    return {k: [a.get(k), b.get(k)] for k in [*b, *(k for k in a if k not in b)]}


def _store_state(store: Store) -> list[list[str]]:
    rows = store.con.execute(
        "SELECT source, split, fingerprint FROM sources ORDER BY source, split"
    ).fetchall()
    return [list(r) for r in rows]


def _append_changelog(
    folder: Path,
    run: dict[str, str],
    config: str,
    changes: dict[str, list[Any]],
    note: str,
    extra: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Prepend (or merge into this run's) entry in `folder/changelog.json`; newest first."""
    from builders.hubfolder import write_json

    path = folder / CHANGELOG
    log = _with_entry(_read_json(path) or [], run, config, changes, note, extra)
    write_json(path, log)
    return log


def _with_entry(
    log: list[dict[str, Any]],
    run: dict[str, str],
    config: str,
    changes: dict[str, list[Any]],
    note: str,
    extra: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The changelog with this run's entry first (merged if the run already has one)."""
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


def _render_card(
    folder: str, builds: dict[str, Any], sc: Scenario, changelog: list[dict[str, Any]]
) -> str:
    """The full card, with the changelog."""
    from builders.cards import render_card
    from builders.sources import get_source

    spec = get_source(sc.source)
    return render_card(
        folder, builds, license=spec.license, source_origin=spec.origin, changelog=changelog
    )


def _rebuild_fewnerd(
    store: Store,
    sc: Scenario,
    out: Path,
    record: dict[str, Any],
    rep: ScenarioReport,
    run: dict[str, str],
    progress: bool,
    stage: Callable[[str], None],
) -> None:
    from builders.fewnerd import build_split, familiarity_summary
    from builders.fewnerd_export import write_split

    p = sc.params
    folder = out / rep.folders[0]
    old = _read_json(folder / "summary.json")
    log = _read_json(folder / CHANGELOG) or []
    stage(f"Few-NERD {p['mode']} split of {sc.stored}")
    built = build_split(store, sc.stored, p["mode"], p["assignment"], int(p["seed"]))
    fam = familiarity_summary(store, built, p["model"], k=int(p["k"])) if p["familiarity"] else None
    command = (
        f"builders fewnerd-splits --mode {p['mode']} --assignment {p['assignment']} "
        f"--seed {p['seed']} --source {sc.stored}"
    )

    def metrics(s: dict[str, Any] | None) -> dict[str, Any]:
        if not s:
            return {}
        m: dict[str, Any] = {}
        for part, v in s["parts"].items():
            m[f"{part} rows"] = v.get("sentences")
            m[f"{part} mentions"] = v.get("mentions")
            m[f"{part} labels"] = v.get("types")
        for part in ("dev", "test"):
            f = (s.get("familiarity") or {}).get(part)
            if f:
                m[f"{part} familiarity"] = round(float(f["mean"]), 4)
        return m

    new = {**built.summary(), **({"familiarity": fam} if fam is not None else {})}
    a, b = metrics(old), metrics(new)
    changes = {k: [a.get(k), b.get(k)] for k in [*b, *(k for k in a if k not in b)]}
    rep.changes[folder.name] = changes
    log = _with_entry(log, run, p["mode"], changes, note=f"{sc.name}: {rep.reason}")
    # The history and the scenario record go into the new folder before it is swapped in.
    write_split(
        built,
        out,
        fam,
        command=command,
        extra_json={CHANGELOG: log, SCENARIO_FILE: {"scenario": record}},
    )
