"""A scenario's input, read before anything is built: once per stored source, as its scenario
says (docs/DESIGN.md, "Scenarios and their inputs": who owns an input, replace or append, the
shrink guard, a Hub dataset's revision).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builders.errors import (
    BuildersError,
    HubUnreachable,
    InputError,
    InvalidValue,
    ScenarioError,
)
from builders.labels import ZERO_SHOT, benchmarks, label_map
from builders.names import is_hub_id
from builders.scenarios.book import Scenario
from builders.shift.benchmarks import read_label_map
from builders.sources import SOURCES, get_source
from builders.sources.hf import hub_revision, is_commit
from builders.sources.planning import ReadPlan
from builders.store import Store
from builders.store.ingest import plan_ingest
from builders.store.writer import IngestResult, SourceWrite, prepare_source, unit_key


@dataclass
class Taken:
    """What reading one stored source's input did: `status` ingested | appended | unchanged |
    stored (the store's copy, its input not at hand) | unavailable; `why` says why not read."""

    status: str
    why: str = ""
    notes: list[str] = field(default_factory=list)
    base: Path | None = None  # the input's folder: file names are given relative to it
    #: A Hub dataset's revision: True asked of the Hub, False not (unreachable); None: files.
    checked: bool | None = None


def _entries(sc: Scenario) -> list[str]:
    """A splits scenario's benchmark entries as `resolve` reads them (`NAME=` dropped,
    stripped), label files (`file:`) left out."""
    if sc.kind != "splits":
        return []
    entries = (item.split("=", 1)[-1].strip() for item in sc.params["benchmarks"])
    return [e for e in entries if not e.startswith("file:")]


def benchmark_sources(sc: Scenario, owned: Collection[str]) -> list[str]:
    """The stored sources among `owned` that a scenario evaluates against (`med`,
    `med:test`, `NAME=med:test`); a packaged benchmark's name wins, as in `resolve`."""
    found = (e.partition(":")[0] for e in _entries(sc))
    return list(dict.fromkeys(s for s in found if s in owned and s not in benchmarks()))


def local_benchmarks(sc: Scenario, owned: Collection[str]) -> list[str]:
    """The registered benchmark sources a scenario reads from the store and no scenario owns:
    a packaged benchmark's test sentences where leakage is measured or removed, and a
    stored-source entry naming one (`mit-movie:test`)."""
    sentences = bool(sc.params.get("leakage") or sc.params.get("decontaminate"))
    found: list[str] = []
    for entry in _entries(sc):
        if entry == "all" or entry in benchmarks():
            found += (list(ZERO_SHOT) if entry == "all" else [entry]) if sentences else []
        else:
            found.append(entry.partition(":")[0])
    return [
        n
        for n in dict.fromkeys(found)
        if n not in owned and (spec := SOURCES.get(n)) is not None and spec.kind == "benchmark"
    ]


@dataclass
class Inputs:
    """What `take_inputs` read: stored source -> what reading it did (or why it could not),
    and the sources scenarios own (the others read here are benchmarks' local copies)."""

    taken: dict[str, Taken | _Unavailable]
    owned: set[str]

    def evaluated(self, sc: Scenario) -> list[str]:
        """The sources read this run that `sc` evaluates against, owned ones first."""
        names = benchmark_sources(sc, self.owned) + local_benchmarks(sc, self.owned)
        return [n for n in dict.fromkeys(names) if n in self.taken and n != sc.stored]


def take_inputs(
    store: Store,
    book: list[Scenario],
    picked: list[Scenario],
    *,
    explicit: bool,
    stage: Callable[[str], None],
    allow_shrink: Collection[str] = (),
) -> Inputs:
    """Read the input of each stored source the picked scenarios build from or evaluate
    against, once, as its first scenario in the book says; then the local copies of the
    benchmarks they read that no scenario owns (`take_benchmark`). `allow_shrink`: the
    stored sources whose input may shrink this time (each one this run reads)."""
    owners: dict[str, Scenario] = {}
    for sc in book:
        owners.setdefault(sc.stored, sc)
    needed = [sc.stored for sc in picked]
    for sc in picked:
        needed += benchmark_sources(sc, owners)
    needed = list(dict.fromkeys(needed))
    local = list(dict.fromkeys(n for sc in picked for n in local_benchmarks(sc, owners)))
    _check_shrink_names(allow_shrink, needed + local)
    taken: dict[str, Taken | _Unavailable | _Pending] = {}
    for name in needed:
        owner = owners[name]
        try:
            where, why = available(store, owner)
            stage(f"input of {name}")
            taken[name] = take(store, owner, where, why, allow_shrink=name in allow_shrink)
        except _Unavailable as exc:
            if explicit and any(sc.stored == name for sc in picked):
                raise
            taken[name] = exc
    for name in local:
        found = take_benchmark(store, name, allow_shrink=name in allow_shrink, stage=stage)
        if found is not None:
            taken[name] = found
    return Inputs(write_all(store, taken, stage), set(owners))


def write_all(
    store: Store, taken: dict[str, Taken | _Unavailable | _Pending], stage: Callable[[str], None]
) -> dict[str, Taken | _Unavailable]:
    """Write the inputs that changed, every source's in one transaction once all are decided
    and checked (`take`), so that one run writes every source's input or none."""
    pending = {n: t for n, t in taken.items() if isinstance(t, _Pending)}
    busy = [n for n, t in pending.items() if t.write.pending]
    done: dict[str, IngestResult] = {}
    with store.transaction() if busy else nullcontext():
        for name in busy:
            stage(f"reading {name}")
            done[name] = pending[name].write.write()
    return {
        n: t.finish(done.get(n) or t.write.write()) if isinstance(t, _Pending) else t
        for n, t in taken.items()
    }


@dataclass
class _Pending:
    """A source's input decided and checked against the store (`writer.prepare_source`), to be
    written with the others (`write_all`); `finish` says what reading it did."""

    write: SourceWrite
    finish: Callable[[IngestResult], Taken]


def take_benchmark(
    store: Store, name: str, *, allow_shrink: bool, stage: Callable[[str], None]
) -> Taken | _Pending | None:
    """A registered benchmark no scenario owns, read from its local copy ($LABELSHIFT_DATA)
    as a `replace` scenario reads its `path`, for `write_all`; a stored copy read from other
    files is kept (a note says so); without a local copy, None."""
    local = get_source(name).default_path()
    if local is None:
        return None
    stored = store.stored_splits(name)
    root = local.resolve()
    if stored and not all(
        Path(i["input"]).is_relative_to(root) for s in stored.values() for i in s.inputs
    ):
        note = (
            f"{name}: the store's copy was read from other files than its local copy "
            f"({local}), which is not read: `builders ingest {name} --replace` reads it"
        )
        return Taken("stored", notes=[note], base=local if local.is_dir() else local.parent)
    stage(f"benchmark {name} ({local})")
    fixes = {"shrink": shrink_fix(name)}
    prepared = prepare_source(
        store, *plan_ingest(name, local), exact=True, allow_shrink=allow_shrink, fixes=fixes
    )

    def finish(res: IngestResult) -> Taken:
        taken = Taken(res.status, base=local if local.is_dir() else local.parent)
        taken.notes += [n for n in res.notes if "no longer in the input" in n]
        return taken

    return _Pending(prepared, finish)


def _check_shrink_names(names: Collection[str], read: list[str]) -> None:
    """Each source `--allow-shrink` names is one this run reads (a typo accepts nothing)."""
    for name in names:
        if name not in read:
            raise InvalidValue(
                f"--allow-shrink {name}: this run reads no stored source {name!r} (it reads "
                f"{', '.join(read) or 'none'}): name one of them"
            )


def shrink_fix(name: str) -> str:
    """How a shrink refusal names its fix: regenerate's own option, for that source."""
    return (
        f"run regenerate again with `--allow-shrink {name}` "
        f"(from Python: `regenerate(..., allow_shrink=[{name!r}])`)"
    )


def take(
    store: Store,
    sc: Scenario,
    where: str | Path | None,
    why: str,
    *,
    allow_shrink: bool = False,
) -> Taken | _Pending:
    """One scenario's input as its `ingest` key says, decided and checked (the shrink guard
    too, unless `allow_shrink`), for `write_all` to write."""
    mapping = read_label_map(sc.ingest_label_map) if sc.ingest_label_map else None
    base = Path(where) if isinstance(where, Path) else None
    base = base if base is None or base.is_dir() else base.parent
    if sc.revision is not None and not isinstance(where, str):
        raise ScenarioError(
            f"scenario {sc.name!r}: `revision` pins a Hub dataset's commit, and its input is "
            f"{'the copy in the store' if where is None else where}, not a Hub dataset id: "
            "remove `revision`, or give the dataset's id as `path`"
        )
    if where is None and store.has_source(sc.stored):
        check_stored_map(store, sc, mapping)
        return Taken("stored", why, base=base)
    commit = hub_commit(store, sc, where) if isinstance(where, str) else None
    if isinstance(commit, Taken):
        return commit
    fixes = {
        "replace": f'`ingest = "replace"` in scenario {sc.name!r}',
        "append": f'`ingest = "append"` in scenario {sc.name!r}',
        "name": f"`store_as` in scenario {sc.name!r}",
        "shrink": shrink_fix(sc.stored),
    }
    spec, plan = plan_ingest(
        sc.source, where, options=dict(sc.options), label_map=mapping, revision=commit
    )
    prepared = prepare_source(
        store,
        spec,
        plan,
        name=sc.stored,
        exact=sc.ingest == "replace",
        append=sc.ingest == "append",
        allow_shrink=allow_shrink,
        fixes=fixes,
    )

    def finish(res: IngestResult) -> Taken:
        taken = Taken(res.status, why, base=base, checked=True if commit else None)
        taken.notes += [n for n in res.notes if "no longer in the input" in n]
        if sc.ingest == "append" and where is not None:
            taken.notes += _kept_by_append(store, sc, plan, base)
        return taken

    return _Pending(prepared, finish)


def _kept_by_append(store: Store, sc: Scenario, plan: ReadPlan, base: Path | None) -> list[str]:
    """Notes on the stored inputs no longer under `path`, which `ingest = "append"` keeps."""
    now = {unit_key(u) for units in plan.units.values() for u in units}
    notes = []
    for split, stored in sorted(store.stored_splits(sc.stored).items()):
        gone = [i["input"] for i in stored.inputs if i["input"] not in now]
        if gone:
            names = ", ".join(input_name(g, base) for g in gone)
            notes.append(
                f"{sc.stored}/{split}: {len(gone):,} input(s) no longer under `path` "
                f'kept in the store ({names}): `ingest = "append"` keeps what it read; '
                f'set `ingest = "replace"` in scenario {sc.name!r} to drop them'
            )
    return notes


def stored_at(store: Store, name: str) -> dict[str, str]:
    """Per split of a stored source, the Hub commit(s) its inputs were read at (`, `-joined)."""
    out = {}
    for split, s in sorted(store.stored_splits(name).items()):
        commits = sorted({i["revision"] for i in s.inputs if i.get("revision")})
        if commits:
            out[split] = ", ".join(commits)
    return out


def hub_commit(store: Store, sc: Scenario, dataset: str) -> str | Taken:
    """The commit the Hub names now for a scenario's `revision` (default the main branch).
    Offline, the stored copy is used and said so where it is the pinned commit or nothing is
    pinned; a source not stored is `_Unavailable`; another pinned commit is refused."""
    try:
        return hub_revision(dataset, sc.revision)
    except HubUnreachable as exc:
        had = sorted({c for cs in stored_at(store, sc.stored).values() for c in cs.split(", ")})
        if not store.has_source(sc.stored):
            raise _Unavailable(
                f"scenario {sc.name!r}: {exc}, and {sc.stored!r} is not in the store yet: "
                "run regenerate where the Hub can be reached"
            ) from exc
        shown = ", ".join(c[:12] for c in had) or "not recorded"
        if is_commit(sc.revision) and had == [sc.revision]:
            why = f"pinned revision {shown}, the one stored; the Hub was not asked"
            return Taken("stored", why, checked=False)
        if is_commit(sc.revision):
            raise HubUnreachable(
                f"scenario {sc.name!r}: `revision` pins {dataset} at {sc.revision}, the store "
                f"holds it at {shown}, and {exc}: run regenerate where the Hub can be reached, "
                "or set `revision` to the commit stored"
            ) from exc
        note = (
            f"{sc.stored}: {exc}; whether {dataset} has a new revision is not known, and the "
            f"store's copy (revision {shown}) is used: run regenerate online to check it"
        )
        return Taken("stored", "Hub revision not checked: offline", notes=[note], checked=False)


def input_name(key: str, base: Path | None) -> str:
    """How a changelog names an input: its path under the scenario's `path`, else its file
    name, else (a Hub dataset split) as stored; never an absolute path."""
    p = Path(key)
    if base is not None and p.is_relative_to(base.resolve()):
        return p.relative_to(base.resolve()).as_posix()
    return p.name if p.is_absolute() else key


def inputs_now(store: Store, names: list[str], taken: Mapping[str, Any]) -> dict[str, Any]:
    """What each stored source holds now, per split (its inputs, sentences and mentions), for
    the scenario's record: the next rebuild says what changed."""
    out: dict[str, Any] = {}
    for name in names:
        t = taken.get(name)
        base = t.base if isinstance(t, Taken) else None
        out[name] = {
            split: {
                "inputs": [
                    {
                        "input": input_name(i["input"], base),
                        "fingerprint": i["fingerprint"],
                        "sentences": i["sentences"],
                        **({"revision": i["revision"]} if i.get("revision") else {}),
                    }
                    for i in s.inputs
                ],
                "sentences": s.sentences,
                "mentions": s.mentions,
            }
            for split, s in sorted(store.stored_splits(name).items())
        }
    return out


def available(store: Store, sc: Scenario) -> tuple[str | Path | None, str]:
    """Where to ingest from (None: use the stored copy), or raise with why it is unavailable."""
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
        f"Give its files with `path = ...` in the scenarios file, or set LABELSHIFT_DATA"
    )


class _Unavailable(BuildersError):
    pass


def check_stored_map(store: Store, sc: Scenario, mapping: dict[str, str] | None) -> None:
    """A source used from the store (its input not at hand) was read with the scenario's
    `ingest_label_map`, else its labels are not the ones the scenario asks for."""
    want = dict(sorted(label_map(mapping or {}).items()))
    for split, stored in sorted(store.stored_splits(sc.stored).items()):
        if (stored.options or {}).get("label_map", {}) != want:
            raise InputError(
                f"scenario {sc.name!r}: {sc.stored}/{split} is in the store read with another "
                f"label map than ingest_label_map ({sc.ingest_label_map or 'none'}), and its "
                "input is not at hand to read again: give its files with `path = ...` in the "
                "scenario, or set its `ingest_label_map` to the map it was read with"
            )
