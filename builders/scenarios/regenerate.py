"""Regenerating what the project publishes: scenarios -> repo folders, reusing what is current.

The inputs are read first (`builders.scenarios.inputs`); a scenario is rebuilt
(`builders.scenarios.rebuild`) only when no folder records its key (`scenario_key`).
`--publish` pushes the folders this run built or rebuilt.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from builders import __version__
from builders.defaults import DEFAULT_BACKEND, DEFAULT_PRECISION
from builders.errors import BuildersError, InvalidValue, shown_on, surface
from builders.hub.changelog import run_version
from builders.hub.outdir import OutLock
from builders.labels import union_labels
from builders.names import valid_tag
from builders.scenarios.book import Scenario, ScenarioKeys
from builders.scenarios.inputs import Inputs, _Unavailable, inputs_now, stored_at, take_inputs
from builders.scenarios.rebuild import key_of, rebuild_fewnerd, rebuild_splits, recorded
from builders.scenarios.report import ScenarioReport
from builders.shift.benchmarks import EvalSet, ingest_local, resolve
from builders.shift.specs import EmbeddingSpec
from builders.splits.strategies import strategy
from builders.store import Store

# ---------------------------------------------------------------------------- keys
#: Parameters left out of a key at their default, so that scenarios built before they
#: existed keep their keys (the default torch fp32 is what those were built with).
_UNKEYED_DEFAULTS = {"backend": DEFAULT_BACKEND, "precision": DEFAULT_PRECISION}


def scenario_key(store: Store, sc: Scenario) -> tuple[str, dict[str, Any]]:
    """Hash of what determines the scenario's output; also returns its parts (for reasons)."""
    parts: dict[str, Any] = {
        "kind": sc.kind,
        "fingerprints": {split: fp for _, split, fp in store.fingerprints(sc.stored)},
        "params": {k: v for k, v in sc.params.items() if _UNKEYED_DEFAULTS.get(k, object()) != v},
        "toolkit_version": __version__,
    }
    revisions = stored_at(store, sc.stored)
    if revisions:  # a Hub dataset: its commits, so that a new one is named (`_why`)
        parts["revisions"] = revisions
    if sc.kind == "splits":  # the bound as it applies (a strategy's default, resolved)
        share = sc.params.get("max_label_share")
        share = strategy(sc.params["strategy"]).label_share if share is None else share
        parts["params"]["max_label_share"] = None if share is None or share >= 1 else share
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
        stored = {s.name: s.sentences for s in evalsets if s.kind == "store" and s.sentences}
        if stored:  # a stored source evaluated against: its data, leakage or not
            fps = {src: dict((sp, fp) for _, sp, fp in store.fingerprints(src)) for src, _ in
                   stored.values()}  # fmt: skip
            parts["benchmark_sources"] = {n: fps[src].get(sp) for n, (src, sp) in stored.items()}
        if sc.params.get("leakage") or sc.params.get("decontaminate"):
            parts["benchmark_fingerprints"] = _sentence_fingerprints(store, evalsets)
    models = _models(sc)
    if models:
        runtime = EmbeddingSpec(backend=sc.params["backend"], precision=sc.params["precision"])
        parts["models"] = [model_part(runtime.with_model(m)) for m in models]
    return key_of(parts), parts


def _models(sc: Scenario) -> list[str]:
    """The models a scenario embeds with: its model, then its check models."""
    p = sc.params
    if sc.kind == "fewnerd":
        return [p["model"]] if p["familiarity"] else []
    check = p.get("check_model")
    return [p["model"], *([check] if isinstance(check, str) else list(check or []))]


def model_part(spec: EmbeddingSpec) -> dict[str, Any]:
    """A model as a key sees it: canonical name, weights' hash, and the runtime that will
    embed with it (`auto` as `auto.expected_backend` knows it; None until checked once)."""
    from builders.shift.auto import expected_backend
    from builders.shift.models import canonical_name, resolve_model, weights_fingerprint

    model, backend, precision = spec.model, spec.backend, spec.precision
    name = canonical_name(model)
    try:
        folder = Path(resolve_model(model).path_or_name)
    except BuildersError:  # not on this machine: a scenario may still be reused (`_one`)
        folder = None
    weights = weights_fingerprint(folder) if folder is not None and folder.is_dir() else None
    runtime = backend if backend != "auto" else None
    if runtime is None and weights is not None:
        runtime = expected_backend(name, weights, precision)
    return {"name": name, "weights": weights, "runtime": runtime, "precision": precision}


def _sentence_fingerprints(store: Store, evalsets: list[EvalSet]) -> dict[str, str | None]:
    """The fingerprint of each benchmark's evaluation sentences (a packaged one ingested from
    its local copy first, as the leakage scan would); None if unavailable."""
    out: dict[str, str | None] = {}
    for s in evalsets:
        if s.sentences is not None:
            src, split = s.sentences
            if not store.has_source(src):
                ingest_local(store, src)
            out[s.name] = next((fp for _, sp, fp in store.fingerprints(src) if sp == split), None)
    return out


def _why(old: dict[str, Any] | None, new: dict[str, Any], force: bool) -> str:
    if old is None:
        return "first build"
    reasons = []
    was, now = old.get("revisions") or {}, new.get("revisions") or {}
    revised = _differ(was, now)
    changed = [s for s in _differ(old.get("fingerprints"), new["fingerprints"]) if s not in revised]
    if changed:
        reasons.append(f"source changed ({', '.join(changed)})")
    for split in revised:  # another commit of a Hub dataset
        a, b = (str(x.get(split))[:12] if x.get(split) else "-" for x in (was, now))
        reasons.append(f"Hub revision {a} -> {b} ({split})")
    if old.get("params") != new["params"]:
        keys = sorted(k for k in new["params"] if old.get("params", {}).get(k) != new["params"][k])
        reasons.append(f"parameters changed ({', '.join(keys)})")
    if old.get("eval_labels") != new.get("eval_labels"):
        reasons.append("benchmark label sets changed")
    if old.get("benchmark_fingerprints") != new.get("benchmark_fingerprints"):
        reasons.append("benchmark sentences changed")
    moved = _differ(old.get("benchmark_sources"), new.get("benchmark_sources"))
    if moved:
        reasons.append(f"benchmark changed ({', '.join(moved)})")
    reasons += _model_reasons(old.get("models"), new.get("models"))
    if old.get("toolkit_version") != new["toolkit_version"]:
        reasons.append(f"toolkit {old.get('toolkit_version')} -> {new['toolkit_version']}")
    if not reasons:
        reasons.append("forced" if force else "output missing or incomplete")
    return "; ".join(reasons)


def _differ(was: Mapping[str, Any] | None, now: Mapping[str, Any] | None) -> list[str]:
    """The keys whose values differ between two mappings (None: empty), sorted."""
    was, now = was or {}, now or {}
    return sorted(k for k in {*was, *now} if was.get(k) != now.get(k))


def _model_reasons(old: list[dict[str, Any]] | None, new: list[dict[str, Any]] | None) -> list[str]:
    """Why a scenario's models make it rebuild: another model, weights or runtime."""
    if old == new or new is None:
        return []
    if old is None:
        return ["its models' weights and runtime not yet recorded"]
    out = []
    for a, b in zip(old, new, strict=False):
        if a.get("name") != b.get("name"):
            continue  # the `model` parameter changed: said with the parameters
        if a.get("weights") != b.get("weights"):
            out.append(f"model {b['name']} weights {a.get('weights')} -> {b.get('weights')}")
        if a.get("runtime") != b.get("runtime"):
            out.append(f"model {b['name']} runtime {a.get('runtime')} -> {b.get('runtime')}")
    return out


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
    allow_shrink: Collection[str] = (),
) -> list[ScenarioReport]:
    """Read the scenarios' inputs again where they changed, rebuild the scenarios whose key
    changed, reuse the rest, report per scenario; then push what was rebuilt if asked.
    `allow_shrink`: the stored sources whose input may shrink this time."""
    if tag is not None:
        valid_tag(tag)  # it names the changelog entries: before anything is read or built
    out = Path(out)
    stage = on_stage or (lambda s: None)
    picked = _selected(scenarios, only)
    reports = []
    with OutLock(out, "builders regenerate"):
        inputs = take_inputs(
            store,
            scenarios,
            picked,
            explicit=bool(only),
            stage=stage,
            allow_shrink=allow_shrink,
        )
        run = _run_id(store, picked, tag)
        for sc in picked:
            stage(f"scenario {sc.name}")
            reports.append(
                _one(store, sc, out, force, inputs, run=run, progress=progress, stage=stage)
            )
        if publish_org:  # under the lock: it records what it pushed in `out`
            _publish(picked, reports, out, publish_org, tag, publish_kwargs)
    return reports


def _selected(scenarios: list[Scenario], only: list[str] | None) -> list[Scenario]:
    """The scenarios named in `only` (all when empty), in the book's order."""
    if not only:
        return scenarios
    known = {s.name for s in scenarios}
    missing = [n for n in only if n not in known]
    if missing:
        raise InvalidValue(f"unknown scenario {missing[0]!r}. Valid: {', '.join(sorted(known))}")
    return [s for s in scenarios if s.name in only]


def _run_id(store: Store, scenarios: list[Scenario], tag: str | None) -> dict[str, str]:
    """The run's changelog version and id: a hash of the scenarios as asked and the store's
    fingerprints, so that entries of one run merge and the same run gives the same bytes."""
    version = run_version(tag)
    asked = sorted((s.name, s.to_dict()) for s in scenarios)  # its parameters too: a run
    ident = json.dumps([version, asked, store.fingerprints()], default=str, sort_keys=True)
    return {"version": version, "id": hashlib.sha256(ident.encode()).hexdigest()[:12]}


# ---------------------------------------------------------------------------- publish
#: In `out`: per org, per folder, the keys of the scenarios whose builds were last pushed there.
PUBLISHED = ".labelshift-published.json"


def _publish(
    scenarios: list[Scenario],
    reports: list[ScenarioReport],
    out: Path,
    publish_org: str,
    tag: str | None,
    publish_kwargs: dict[str, Any] | None,
) -> None:
    """Push the published scenarios' folders built or rebuilt since their last push to
    `publish_org`, each once, its newest changelog entry as the message; recorded on the
    reports and (not for a dry run) in `out/.labelshift-published.json`."""
    from builders.hub.folder import read_json, write_json
    from builders.hub.publish import PublishError, plan_publishes, publish

    record = read_json(out / PUBLISHED) or {}
    last = record.get(publish_org) or {}
    keys: dict[str, dict[str, str | None]] = {}  # folder -> scenario -> key, as built now
    for sc, rep in zip(scenarios, reports, strict=True):
        if rep.status != "skipped" and sc.publish:
            for f in rep.folders:
                keys.setdefault(f, {})[sc.name] = rep.key
    built = {rep.name for rep in reports if rep.status in ("built", "rebuilt")}
    folders = [
        f
        for f, now in keys.items()
        if any(name in built or (last.get(f) or {}).get(name) != key for name, key in now.items())
    ]
    if not folders:
        return
    plans = plan_publishes([out / f for f in folders], publish_org, tag=tag)
    messages = {p.repo_id: _message(p.folder, tag) for p in plans}
    dry = bool((publish_kwargs or {}).get("dry_run"))

    def pushed_to(repos: list[str]) -> None:
        """Note which builds of each pushed folder `publish_org` has, and keep tag names."""
        if dry:
            return
        mine = dict(last)
        for repo in repos:
            folder = repo.split("/", 1)[1]
            mine[folder] = {**(mine.get(folder) or {}), **keys.get(folder, {})}
        write_json(out / PUBLISHED, {**record, publish_org: mine})
        _keep_names(out, plans, repos)

    try:
        results = publish(plans, tag=tag, messages=messages, **(publish_kwargs or {}))
    except PublishError as exc:
        pushed_to(exc.published)
        raise
    pushed_to([r.repo_id for r in results])
    pushed = {}
    for plan, r in zip(plans, results, strict=False):
        paths = [f["path"] for f in plan.to_dict()["files"]]
        pushed[r.repo_id] = {**r.to_dict(), "paths": paths, "message": messages[r.repo_id]}
    for rep in reports:
        rep.published = [
            pushed[f"{publish_org}/{f}"] for f in rep.folders if f"{publish_org}/{f}" in pushed
        ]


def _message(folder: Path, tag: str | None) -> str:
    """A push's commit message: the folder's newest changelog entry, as a push tagged `tag`
    names it (built untagged: the tag)."""
    from builders.hub.changelog import CHANGELOG, commit_message, named_by
    from builders.hub.folder import read_json

    return commit_message(folder.name, named_by(read_json(folder / CHANGELOG) or [], tag))


def _keep_names(out: Path, plans: list[Any], repos: list[str]) -> None:
    """Write back each pushed folder's changelog whose newest entry the push's tag named, and
    its card, so that the next rebuild and push keep that name."""
    from builders.files import atomic_write_text
    from builders.hub.changelog import CHANGELOG
    from builders.hub.readme import CARD, folder_card, load_path

    for plan in plans:
        if plan.repo_id in repos and plan.changelog is not None:
            folder = out / plan.folder.name
            atomic_write_text(folder / CHANGELOG, plan.changelog)
            card = folder_card(folder, folder.name, load_path(folder, None))
            atomic_write_text(folder / CARD, card)


# ---------------------------------------------------------------------------- one scenario
@contextmanager
def _in_scenario_words(sc: Scenario) -> Iterator[None]:
    """A refusal inside names the scenario and its keys, not build-splits' options."""
    try:
        with shown_on(ScenarioKeys(sc, surface())):
            yield
    except BuildersError as exc:
        raise exc.reworded(f"scenario {sc.name!r}: {exc}") from exc.__cause__


def _one(
    store: Store,
    sc: Scenario,
    out: Path,
    force: bool,
    inputs: Inputs,
    *,
    run: dict[str, str],
    progress: bool,
    stage: Callable[[str], None],
) -> ScenarioReport:
    rep = ScenarioReport(sc.name, "skipped", folders=sc.folders())
    mine = inputs.taken[sc.stored]
    if isinstance(mine, _Unavailable):
        rep.reason = str(mine)
        return rep
    rep.ingest = mine.status
    benches = inputs.evaluated(sc)
    for name in [sc.stored, *benches]:
        t = inputs.taken[name]
        rep.notes += t.notes if not isinstance(t, _Unavailable) else [str(t)]
        commits = stored_at(store, name)
        if commits or getattr(t, "checked", None) is not None:
            rep.revisions[name] = {"splits": commits, "checked": bool(getattr(t, "checked", 0))}
    with _in_scenario_words(sc):  # its settings checked first (a backend's precision)
        key, parts = scenario_key(store, sc)
    olds = {f: recorded(out, sc, f) for f in rep.folders}
    previous = next((o for o in olds.values() if o), None)
    was = ((previous or {}).get("parts") or {}).get("models") or []
    for m, w in zip(parts.get("models") or [], was, strict=False):
        if m["weights"] is None and w.get("name") == m["name"]:  # not here to hash: as built
            m["weights"] = w.get("weights")
            rep.notes.append(f"model {m['name']}: not found here; its weights taken as built")
        if m["runtime"] is None and (w.get("name"), w.get("weights")) == (m["name"], m["weights"]):
            m["runtime"] = w.get("runtime")  # not checked on this machine yet: as it ran
    key = key_of(parts)
    rep.key = key
    rep.models = parts.get("models") or []
    if not force and all(o is not None and o.get("key") == key for o in olds.values()):
        rep.status = "reused"
        rep.reason = "unchanged" + (f" ({mine.why})" if mine.why else "")
        return rep
    rep.reason = _why(previous.get("parts") if previous else None, parts, force)
    held = inputs_now(store, [sc.stored, *benches], inputs.taken)
    if previous is not None and "inputs" in previous:
        rep.inputs, rep.notes = _input_changes(previous["inputs"], held, sc.stored, rep.notes)
    record = {"name": sc.name, "key": key, "parts": parts, "inputs": held}
    with _in_scenario_words(sc):
        rebuild = rebuild_fewnerd if sc.kind == "fewnerd" else rebuild_splits
        rebuild(store, sc, out, record, rep, run, progress, stage)
    rep.status = "rebuilt" if previous else "built"
    return rep


def _input_changes(
    was: Mapping[str, Any], held: dict[str, Any], own: str, notes: list[str]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """What changed in the inputs since the record `was`, and the notes with one per source
    it lacks (recorded now; that alone is no change for the changelog)."""
    from builders.hub.changelog import input_changes

    new = [n for n in held if n not in was]
    said = [
        f"{n}: {'' if n == own else 'benchmark '}inputs recorded (not in the earlier record)"
        for n in new
    ]
    return input_changes(was, {n: v for n, v in held.items() if n in was}), notes + said
