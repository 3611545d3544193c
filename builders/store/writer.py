"""Writing a source into the span store: fingerprints, what to do per split, one transaction.

`prepare_source` decides what to do with each split of a read plan (`SourceSpec.plan`), and
its `SourceWrite.write` reads each split to write through its reader, validates spans and
labels the same way for every reader (`batches.Validator`), and writes sentences, mentions
and negatives in Arrow batches inside ONE transaction: all splits land or nothing changes.

Per split, by what the store already holds there:

- nothing: the split is written;
- the same input (fingerprint: input bytes + reader version + options + label map): nothing
  is read;
- the same files, changed (new bytes, options or label map): the split is read again;
- a different input: the ingest stops, naming what is stored and the two choices, `replace`
  (the new input replaces the split) and `append` (the new inputs are added after the stored
  ones; inputs already stored unchanged are skipped, a changed one is refused).

With `exact` (the plan is the whole input: a scenario's `ingest = "replace"`) a split the input
no longer has is removed, and the input may shrink; but not silently, since a folder copied
in part would shrink a published dataset: a split removed whole, or a source whose sentences
fall by more than half, is refused (`allow_shrink` accepts it). What can be known before
reading (splits gone, inputs removed while the rest is unchanged) is refused before reading;
the rest once read, inside the transaction, which is then undone.

What to do is decided again under the write lock before anything is written: on a shared
store (`Store(shared=True)`, read-only between writes) another process may have written the
source since the first look (two builds ingesting one missing benchmark, two appends).
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builders.defaults import split_rank
from builders.errors import ConflictingOptions, IngestRefused, SourceFormatError, opt
from builders.names import check_name
from builders.sources import ReadPlan, SourceSpec
from builders.sources.base import DatasetSplit, FileGroup, ReadReport, Unit
from builders.store.batches import WHOLE_SPLIT, Buffers, Validator, whole_split_note
from builders.store.db import Store, StoredSplit
from builders.store.results import IngestResult, SplitResult
from builders.store.shrink import ShrinkGuard


def _fixes() -> dict[str, str]:
    """How a refusal names `replace`, `append` and `name` where the ingest was asked for
    (`prepare_source`'s `fixes` may name them otherwise: `regenerate` names scenario keys)."""
    return {
        "replace": opt("replace", True),
        "append": opt("append", True),
        "name": opt("name", "NAME"),
        "shrink": "pass allow_shrink=True",  # only `regenerate` reads a whole input (exact)
    }


@dataclass(frozen=True)
class _Input:
    unit: Unit
    key: str  # what identifies the input: its resolved path, or the Hub dataset split
    fingerprint: str


@dataclass
class _Job:
    split: str
    inputs: list[_Input]  # what to read
    old: StoredSplit | None  # set when appending to it


def unit_key(unit: Unit) -> str:
    """The identity of an input: a file's resolved path, a dataset split's name (a local
    dataset by its resolved folder)."""
    if isinstance(unit, Path):
        return str(unit.resolve())
    if isinstance(unit, FileGroup):  # `folder/NAME.{txt,ann}`
        return str(FileGroup(tuple(f.resolve() for f in unit.files)))
    if Path(unit.dataset).exists():
        return str(DatasetSplit(str(Path(unit.dataset).resolve()), unit.config, unit.split))
    return str(unit)


def unit_fingerprint(spec: SourceSpec, plan: ReadPlan, unit: Unit) -> str:
    """Hash of one input (file bytes and name; every file of a `FileGroup`; a local dataset's
    file bytes; a Hub dataset's id, config, split and commit: another revision is another
    input), the reader and its version, the options and the label map."""
    h = hashlib.sha256()
    h.update(f"{plan.module}\0{spec.loader_version}\0".encode())
    h.update(json.dumps(_jsonable(dict(plan.options)), sort_keys=True).encode())
    if plan.label_map:  # without one, a fingerprint is what it was before label maps
        h.update(b"\0label_map\0" + json.dumps(dict(plan.label_map), sort_keys=True).encode())
    if isinstance(unit, Path):
        files, name = [unit], unit.name
    elif isinstance(unit, FileGroup):
        files, name = list(unit.files), unit.name
    else:
        files = list(unit.files)
        local = Path(unit.dataset).exists()
        name = f"{unit.config}/{unit.split}" if local else str(unit)
        if unit.revision and not local:  # without one, as before revisions were recorded
            name += f"@{unit.revision}"
    h.update(b"\0" + name.encode() + b"\0")
    for path in files:
        h.update(b"\0" + path.name.encode() + b"\0")
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()


def combined(fingerprints: list[str]) -> str:
    """A split's fingerprint: its inputs' fingerprints, in reading order."""
    return hashlib.sha256("\0".join(fingerprints).encode()).hexdigest()


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def prepare_source(
    store: Store,
    spec: SourceSpec,
    plan: ReadPlan,
    *,
    name: str | None = None,
    replace: bool = False,
    append: bool = False,
    exact: bool = False,
    allow_shrink: bool = False,
    fixes: Mapping[str, str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> SourceWrite:
    """What an ingest of a read plan (`SourceSpec.plan`) writes, decided and checked against
    what is stored, nothing written (`SourceWrite.write` writes it in one transaction): a
    caller writing several sources checks them all before it writes any (`regenerate`).

    Args:
        spec: the registered source (kind, label mapping).
        plan: the reader, its units per split and its options.
        name: the name to store it under (default: the source name).
        replace: replace what a split holds, even an unchanged input.
        append: add the plan's new inputs to what a split holds.
        exact: the plan is the source's whole input (a scenario's `ingest = "replace"`): a
            split whose input differs is read again, an unchanged one is kept, and a stored
            split the plan does not name is removed, in the same transaction.
        allow_shrink: with `exact`, accept a split removed whole or a source that falls by
            more than half of its sentences (refused otherwise: `ShrinkGuard`).
        fixes: how the caller spells the fixes its refusals name (keys `replace`, `append`,
            `name`, `shrink`; default the ingest's, as the surface in force names them:
            `replace=True` from Python, `--replace` on the command line).
        progress: called with the number of examples read since the last call.

    Raises:
        BuildersError: a split holds a different input and neither `replace` nor `append` is
            set; or `append` meets a changed input or other options; or (`exact`) the input
            shrinks past the guard, as far as is known before reading.
    """
    fix = {**_fixes(), **(fixes or {})}
    if replace and append:
        raise ConflictingOptions(
            f"{fix['replace']} and {fix['append']} exclude each other: choose one"
        )
    source = check_name(name or spec.name, "source name", f"pass {fix['name']}")
    inputs = {
        split: [_Input(u, unit_key(u), unit_fingerprint(spec, plan, u)) for u in plan.units[split]]
        for split in sorted(plan.units, key=split_rank)
    }
    mode = True if replace else "exact" if exact else False
    decide = functools.partial(_decide_all, source, inputs, plan, mode, append, spec, fix)
    guard = ShrinkGuard(source, fix["shrink"]) if exact and not allow_shrink else None
    look = functools.partial(_look, decide, set(inputs), exact, guard)
    stored = store.stored_splits(source)
    return SourceWrite(store, spec, plan, source, look, guard, progress, stored, *look(stored))


@dataclass
class SourceWrite:
    """One source's ingest as `prepare_source` decided it: `pending` when it has a split to
    write or drop; `write` does it in one transaction (inside the caller's, if one is open:
    then a refusal of any source undoes them all)."""

    store: Store
    spec: SourceSpec
    plan: ReadPlan
    source: str
    look: Callable[[dict[str, StoredSplit]], tuple[list[_Job], list[str], list[str]]]
    guard: ShrinkGuard | None
    progress: Callable[[int], None] | None
    stored: dict[str, StoredSplit]
    jobs: list[_Job]
    unchanged: list[str]
    dropped: list[str]

    @property
    def pending(self) -> bool:
        return bool(self.jobs or self.dropped)

    def write(self) -> IngestResult:
        """Write what was decided, decided again under the write lock (another run may have
        written the source since: the same benchmark ingested by two builds, two appends).

        Raises:
            BuildersError: the shrink guard's refusal once read (the transaction undone).
        """
        store, source, stored = self.store, self.source, self.stored
        jobs, unchanged, dropped = self.jobs, self.unchanged, self.dropped
        results: dict[str, SplitResult] = {}
        if self.pending:
            with store.transaction():
                stored = store.stored_splits(source)
                jobs, unchanged, dropped = self.look(stored)
                for job in jobs:
                    results[job.split] = _write_split(
                        store, self.spec, self.plan, source, job, self.progress
                    )
                if self.guard:  # raised inside the transaction: what was written is undone
                    sentences = {s: r.sentences for s, r in results.items()}
                    self.guard.after_reading(stored, sentences)
                for split in dropped:
                    _clear_split(store, source, split)
                    store.con.execute(
                        "DELETE FROM sources WHERE source = ? AND split = ?", [source, split]
                    )
        for split in unchanged:
            results[split] = _result(store, source, split, stored[split], "unchanged")
        return _ingest_result(store, self.spec, self.plan, source, results, bool(jobs), dropped)


def _ingest_result(
    store: Store,
    spec: SourceSpec,
    plan: ReadPlan,
    source: str,
    results: dict[str, SplitResult],
    wrote: bool,
    dropped: list[str],
) -> IngestResult:
    """What an ingest did: `appended` (every split written was appended), `ingested` (a
    split written or dropped) or `unchanged`, with each split's result and the notes."""
    statuses = {r.status for r in results.values()} - {"unchanged"}
    status = (
        "appended" if statuses == {"appended"} else "ingested" if wrote or dropped else "unchanged"
    )
    return IngestResult(
        source=source,
        kind=spec.kind,
        status=status,
        splits=[results[s] for s in sorted(results, key=split_rank)],
        types=store.count_types(source),
        notes=list(plan.notes)
        + [f"{source}/{s}: no longer in the input, removed from the store" for s in dropped],
    )


def _look(
    decide: Callable[[dict[str, StoredSplit]], tuple[list[_Job], list[str]]],
    planned: set[str],
    exact: bool,
    guard: ShrinkGuard | None,
    stored: dict[str, StoredSplit],
) -> tuple[list[_Job], list[str], list[str]]:
    """The jobs, the unchanged splits and (`exact`) the splits to drop, by what is stored
    now; the shrink guard's refusal of what is known before reading."""
    jobs, unchanged = decide(stored)
    dropped = sorted(set(stored) - planned, key=split_rank) if exact else []
    if guard:
        guard.before_reading(stored, _planned(jobs), unchanged, dropped)
    return jobs, unchanged, dropped


def _decide_all(
    source: str,
    inputs: dict[str, list[_Input]],
    plan: ReadPlan,
    replace: bool | str,  # True, "exact" (`prepare_source`'s exact) or False
    append: bool,
    spec: SourceSpec,
    fix: Mapping[str, str],
    stored: dict[str, StoredSplit],
) -> tuple[list[_Job], list[str]]:
    """The jobs and the unchanged splits, by `stored` (the source's splits as they are now).

    Raises:
        BuildersError: every split's reason to refuse, one a line.
    """
    jobs: list[_Job] = []
    unchanged: list[str] = []
    refusals: list[str] = []
    for split, split_inputs in inputs.items():
        verdict = _decide(
            source, split, stored.get(split), split_inputs, plan, replace, append, spec, fix
        )
        if isinstance(verdict, str):
            refusals.append(verdict)
        elif verdict is None:
            unchanged.append(split)
        else:
            jobs.append(verdict)
    if refusals:
        raise IngestRefused("\n".join(refusals))
    return jobs, unchanged


def _decide(
    source: str,
    split: str,
    old: StoredSplit | None,
    inputs: list[_Input],
    plan: ReadPlan,
    replace: bool | str,
    append: bool,
    spec: SourceSpec,
    fix: Mapping[str, str],
) -> _Job | str | None:
    """A job, None (unchanged) or the reason to refuse (see the module docstring)."""
    if old is None or replace is True:
        return _Job(split, inputs, None)
    if append and old.loader_version not in (None, spec.loader_version):
        return (
            f"{source}/{split} was read by version {old.loader_version} of the {plan.module} "
            f"reader, which now reads differently (version {spec.loader_version}); {fix['append']} "
            f"would mix the two: re-read the split with {fix['replace']}"
        )
    if append:
        stored = {i["input"]: i["fingerprint"] for i in old.inputs}
        changed = [i for i in inputs if i.key in stored and stored[i.key] != i.fingerprint]
        if changed:
            return (
                f"{source}/{split}: {_names(changed)} changed since it was stored; {fix['append']} "
                f"only adds new inputs: re-read the split with {fix['replace']}"
            )
        new = [i for i in inputs if i.key not in stored]
        if not new:
            return None
        options = _jsonable(dict(plan.user_options))
        if options != old.options:
            return (
                f"{source}/{split} was read with options {json.dumps(old.options, sort_keys=True)}"
                f", not {json.dumps(options, sort_keys=True)}: append with the same options, "
                f"or re-read everything with {fix['replace']}"
            )
        return _Job(split, new, old)
    if old.fingerprint == combined([i.fingerprint for i in inputs]):
        return None
    if replace == "exact" or [i["input"] for i in old.inputs] == [i.key for i in inputs]:
        return _Job(split, inputs, None)  # the same files changed, or the whole input: read
    return (
        f"{source}/{split} already holds {old.sentences:,} sentences and {old.mentions:,} "
        f"mentions from {_stored_names(old)}; this ingest reads {_names(inputs)}. "
        f"Pass {fix['replace']} to replace what is stored, {fix['append']} to add to it"
        + (f", or {fix['name']} to store it apart" if source == spec.name else "")
    )


def _planned(jobs: list[_Job]) -> dict[str, list[tuple[str, str]]]:
    """Each job's split and the inputs it reads, as (input, fingerprint)."""
    return {j.split: [(i.key, i.fingerprint) for i in j.inputs] for j in jobs}


def _names(inputs: list[_Input]) -> str:
    return _listing([i.key for i in inputs])


def _stored_names(old: StoredSplit) -> str:
    return _listing([f"{i['input']} ({i['sentences']:,})" for i in old.inputs])


def _listing(names: list[str], shown: int = 4) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


# the tables that hold a split's rows, which are also what the validator counts
_ROW_TABLES = ("sentences", "mentions", "negatives", "negative_spans")


def _write_split(
    store: Store,
    spec: SourceSpec,
    plan: ReadPlan,
    source: str,
    job: _Job,
    progress: Callable[[int], None] | None,
) -> SplitResult:
    """Read, validate and write one split's inputs (after what it holds, when appending)."""
    split, old = job.split, job.old
    if old is None:  # the split's `sources` row is replaced below (INSERT OR REPLACE)
        _clear_split(store, source, split)
    report = ReadReport()
    check = _read_split(store, spec, plan, source, job, report, progress)
    inputs = (old.inputs if old else []) + [
        _recorded(i, check.per_input[i.unit]) for i in job.inputs
    ]
    rep = _merged_report(old.report if old else None, report)
    counts = [check.counts[k] for k in _ROW_TABLES]
    if old:
        counts = [a + b for a, b in zip(counts, _stored_counts(old), strict=True)]
    _record_split(store, spec, plan, source, job, inputs, counts, rep)
    return SplitResult(
        split,
        [i["input"] for i in inputs],
        "appended" if old else "ingested",
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        store.count_types(source, split),
        rep,
    )


def _recorded(i: _Input, sentences: int) -> dict[str, Any]:
    """An input as `sources.inputs` lists it; a Hub dataset's with the commit read."""
    revision = getattr(i.unit, "revision", None)
    rec = {"input": i.key, "fingerprint": i.fingerprint, "sentences": sentences}
    return rec | ({"revision": revision} if revision else {})


def _clear_split(store: Store, source: str, split: str) -> None:
    """Delete the split's rows (not its `sources` row, which is replaced when it is written)."""
    for table in _ROW_TABLES:
        store.con.execute(f"DELETE FROM {table} WHERE source = ? AND split = ?", [source, split])


def _read_split(
    store: Store,
    spec: SourceSpec,
    plan: ReadPlan,
    source: str,
    job: _Job,
    report: ReadReport,
    progress: Callable[[int], None] | None,
) -> Validator:
    """Stream the job's inputs through the reader and the validator into the store's tables;
    an input without a sentence is refused."""
    read = spec.reader(plan.module)
    units = [i.unit for i in job.inputs]
    stream = ((u, ex) for u in units for ex in read(u, report, **plan.options))
    check = Validator(spec, Buffers(source, job.split), plan.label_map)
    if job.old:
        check.seed(store.con, _stored_names(job.old))
    check.run(stream, store.con, job.old.sentences if job.old else 0, progress)
    check.account(report, store.con)
    for unit in units:
        if not check.per_input[unit]:
            raise SourceFormatError(unit, None, "empty input: no sentences found")
    return check


def _record_split(
    store: Store,
    spec: SourceSpec,
    plan: ReadPlan,
    source: str,
    job: _Job,
    inputs: list[dict[str, Any]],
    counts: list[int],
    rep: dict[str, Any],
) -> None:
    """Write the split's `sources` row: its origin, fingerprint, options, counts and report."""
    split, old = job.split, job.old
    # one statement, no DELETE first: DuckDB before 1.2 refuses a key deleted and inserted
    # again in one transaction
    store.con.execute(
        "INSERT OR REPLACE INTO sources (source, split, kind, origin, fingerprint, loader_version, options, "
        "ingested_at, n_sentences, n_mentions, n_negatives, n_negative_spans, report, inputs, "
        "spec) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            source,
            split,
            spec.kind,
            plan.origin if old is None else f"{old.origin}, {plan.origin}",
            combined([i["fingerprint"] for i in inputs]),
            spec.loader_version,
            json.dumps(_jsonable(dict(plan.user_options)), sort_keys=True),
            _dt.datetime.now(_dt.UTC).replace(tzinfo=None),
            *counts,
            json.dumps(rep, sort_keys=True),
            json.dumps(inputs),
            spec.name,
        ],
    )


def _stored_counts(old: StoredSplit) -> list[int]:
    return [old.sentences, old.mentions, old.negatives, old.negative_spans]


def _merged_report(old: dict[str, Any] | None, new: ReadReport) -> dict[str, Any]:
    counts = dict(new.counts)
    notes = list(new.notes)
    if old:  # the whole split's label counts and notes are the new read's (`seed`)
        for key, n in old.get("counts", {}).items():
            if key not in WHOLE_SPLIT:
                counts[key] = counts.get(key, 0) + n
        kept = [n for n in old.get("notes", []) if not whole_split_note(n)]
        notes = kept + [n for n in notes if n not in kept]
    return {"counts": dict(sorted(counts.items())), "notes": notes}


def _result(store: Store, source: str, split: str, old: StoredSplit, status: str) -> SplitResult:
    return SplitResult(
        split,
        [i["input"] for i in old.inputs],
        status,
        old.sentences,
        old.mentions,
        old.negatives,
        old.negative_spans,
        store.count_types(source, split),
        old.report,
    )
