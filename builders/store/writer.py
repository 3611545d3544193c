"""Writing a source into the span store: fingerprints, what to do per split, one transaction.

`prepare_source` decides what to do with each split of a read plan; `SourceWrite.write` reads,
validates (`batches.Validator`) and writes every split in ONE transaction: all land or none.
A split with nothing stored, or whose files changed (bytes, reader version, options or label
map), is read; the same input is kept; a different one is refused unless `replace` or
`append` (new inputs added, a changed one refused). With `exact` (a scenario's `ingest =
"replace"`) a split gone from the input is removed, and a split removed whole or a source
falling by more than half is refused (`shrink.ShrinkGuard`). The decision is made again under
the write lock: another process may have written the source since.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
from builders.store.shrink import ShrinkGuard, listing


def _fixes() -> dict[str, str]:
    """How a refusal names `replace`, `append` and `name` (`regenerate` names scenario keys)."""
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
    h.update(_json(plan.options).encode())
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


def _json(options: Mapping[str, Any]) -> str:
    """Options as JSON, keys sorted; what JSON has no type for as its text."""
    return json.dumps(dict(options), sort_keys=True, default=str)


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
    """What an ingest of a read plan writes, decided and checked against what is stored,
    nothing written (`SourceWrite.write` writes it): a caller writing several sources checks
    them all before it writes any (`regenerate`). `name`: stored under (default the source's
    name); `replace` (even an unchanged input), `append`, `exact`, `allow_shrink` (with
    `exact`, accept what `ShrinkGuard` refuses): the module docstring; `fixes`: how
    the caller spells the fixes its refusals name (keys `replace`, `append`, `name`,
    `shrink`); `progress`: called with the examples read since the last call. A refusal
    known before reading is raised here.
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
    guard = ShrinkGuard(source, fix["shrink"]) if exact and not allow_shrink else None
    return SourceWrite(
        store, spec, plan, source, inputs, replace, append, exact, fix, guard, progress
    )


@dataclass
class SourceWrite:
    """One source's ingest as `prepare_source` decided it; `write` does it in one transaction
    (inside the caller's, if one is open: a refusal of any source undoes them all)."""

    store: Store
    spec: SourceSpec
    plan: ReadPlan
    source: str
    inputs: dict[str, list[_Input]]
    replace: bool
    append: bool
    exact: bool
    fix: Mapping[str, str]
    guard: ShrinkGuard | None
    progress: Callable[[int], None] | None
    stored: dict[str, StoredSplit] = field(init=False)
    jobs: list[_Job] = field(init=False)
    unchanged: list[str] = field(init=False)
    dropped: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.stored = self.store.stored_splits(self.source)
        self.jobs, self.unchanged, self.dropped = self._look(self.stored)

    @property
    def pending(self) -> bool:
        return bool(self.jobs or self.dropped)

    def write(self) -> IngestResult:
        """Write what was decided, decided again under the write lock.

        Raises:
            BuildersError: the shrink guard's refusal once read (the transaction undone).
        """
        store, source, stored = self.store, self.source, self.stored
        jobs, unchanged, dropped = self.jobs, self.unchanged, self.dropped
        results: dict[str, SplitResult] = {}
        if self.pending:
            with store.transaction():
                stored = store.stored_splits(source)
                jobs, unchanged, dropped = self._look(stored)
                for job in jobs:
                    results[job.split] = self._write_split(job)
                if self.guard:  # raised inside the transaction: what was written is undone
                    sentences = {s: r.sentences for s, r in results.items()}
                    self.guard.after_reading(stored, sentences)
                for split in dropped:
                    _clear_split(store, source, split)
                    store.con.execute(
                        "DELETE FROM sources WHERE source = ? AND split = ?", [source, split]
                    )
        for split in unchanged:
            old = stored[split]
            files, types = [i["input"] for i in old.inputs], store.count_types(source, split)
            s, m, n, ns = _stored_counts(old)
            results[split] = SplitResult(split, files, "unchanged", s, m, n, ns, types, old.report)
        # `appended`: every split written was appended; `ingested`: a split written or dropped
        statuses = {r.status for r in results.values()} - {"unchanged"}
        wrote = jobs or dropped
        status = "appended" if statuses == {"appended"} else "ingested" if wrote else "unchanged"
        return IngestResult(
            source=source,
            kind=self.spec.kind,
            status=status,
            splits=[results[s] for s in sorted(results, key=split_rank)],
            types=store.count_types(source),
            notes=list(self.plan.notes)
            + [f"{source}/{s}: no longer in the input, removed from the store" for s in dropped],
        )

    def _look(self, stored: dict[str, StoredSplit]) -> tuple[list[_Job], list[str], list[str]]:
        """The jobs, the unchanged splits and (`exact`) the splits to drop, by what is stored
        now (`stored`). Refused: every split's reason, one a line; the shrink guard's refusal
        of what is known before reading."""
        jobs: list[_Job] = []
        unchanged: list[str] = []
        refusals: list[str] = []
        for split, inputs in self.inputs.items():
            verdict = self._decide(split, stored.get(split), inputs)
            if isinstance(verdict, str):
                refusals.append(verdict)
            elif verdict is None:
                unchanged.append(split)
            else:
                jobs.append(verdict)
        if refusals:
            raise IngestRefused("\n".join(refusals))
        dropped = sorted(set(stored) - set(self.inputs), key=split_rank) if self.exact else []
        if self.guard:
            planned = {j.split: [(i.key, i.fingerprint) for i in j.inputs] for j in jobs}
            self.guard.before_reading(stored, planned, unchanged, dropped)
        return jobs, unchanged, dropped

    def _decide(
        self, split: str, old: StoredSplit | None, inputs: list[_Input]
    ) -> _Job | str | None:
        """A job, None (unchanged) or the reason to refuse (see the module docstring)."""
        source, spec, plan, fix = self.source, self.spec, self.plan, self.fix
        if old is None or self.replace:
            return _Job(split, inputs, None)
        if self.append and old.loader_version not in (None, spec.loader_version):
            return (
                f"{source}/{split} was read by version {old.loader_version} of the {plan.module} "
                f"reader, which now reads differently (version {spec.loader_version}); {fix['append']} "
                f"would mix the two: re-read the split with {fix['replace']}"
            )
        if self.append:
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
            options = _json(plan.user_options)
            if json.loads(options) != old.options:
                return (
                    f"{source}/{split} was read with options {json.dumps(old.options, sort_keys=True)}"
                    f", not {options}: append with the same options, "
                    f"or re-read everything with {fix['replace']}"
                )
            return _Job(split, new, old)
        if old.fingerprint == combined([i.fingerprint for i in inputs]):
            return None
        if self.exact or [i["input"] for i in old.inputs] == [i.key for i in inputs]:
            return _Job(split, inputs, None)  # the same files changed, or the whole input: read
        return (
            f"{source}/{split} already holds {old.sentences:,} sentences and {old.mentions:,} "
            f"mentions from {_stored_names(old)}; this ingest reads {_names(inputs)}. "
            f"Pass {fix['replace']} to replace what is stored, {fix['append']} to add to it"
            + (f", or {fix['name']} to store it apart" if source == spec.name else "")
        )

    def _write_split(self, job: _Job) -> SplitResult:
        """Read, validate and write one split's inputs (after what it holds, when appending)."""
        store, spec, plan, source = self.store, self.spec, self.plan, self.source
        split, old = job.split, job.old
        if old is None:  # the split's `sources` row is replaced below (INSERT OR REPLACE)
            _clear_split(store, source, split)
        report = ReadReport()
        check = self._read_split(job, report)
        inputs = (old.inputs if old else []) + [
            _recorded(i, check.per_input[i.unit]) for i in job.inputs
        ]
        rep = _merged_report(old.report if old else None, report)
        counts = [check.counts[k] for k in _ROW_TABLES]
        if old:
            counts = [a + b for a, b in zip(counts, _stored_counts(old), strict=True)]
        # the split's `sources` row, in one statement, no DELETE first: DuckDB before 1.2
        # refuses a key deleted and inserted again in one transaction
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
                _json(plan.user_options),
                _dt.datetime.now(_dt.UTC).replace(tzinfo=None),
                *counts,
                json.dumps(rep, sort_keys=True),
                json.dumps(inputs),
                spec.name,
            ],
        )
        files = [i["input"] for i in inputs]
        status = "appended" if old else "ingested"
        s, m, n, ns = counts
        return SplitResult(split, files, status, s, m, n, ns, store.count_types(source, split), rep)

    def _read_split(self, job: _Job, report: ReadReport) -> Validator:
        """Stream the job's inputs through the reader and the validator into the store's
        tables; an input without a sentence is refused."""
        con, spec, plan = self.store.con, self.spec, self.plan
        read = spec.reader(plan.module)
        units = [i.unit for i in job.inputs]
        stream = ((u, ex) for u in units for ex in read(u, report, **plan.options))
        check = Validator(spec, Buffers(self.source, job.split), plan.label_map)
        if job.old:
            check.seed(con, _stored_names(job.old))
        check.run(stream, con, job.old.sentences if job.old else 0, self.progress)
        check.account(report, con)
        for unit in units:
            if not check.per_input[unit]:
                raise SourceFormatError(unit, None, "empty input: no sentences found")
        return check


def _names(inputs: list[_Input]) -> str:
    return listing([i.key for i in inputs], 4)


def _stored_names(old: StoredSplit) -> str:
    return listing([f"{i['input']} ({i['sentences']:,})" for i in old.inputs], 4)


# the tables that hold a split's rows, which are also what the validator counts
_ROW_TABLES = ("sentences", "mentions", "negatives", "negative_spans")


def _recorded(i: _Input, sentences: int) -> dict[str, Any]:
    """An input as `sources.inputs` lists it; a Hub dataset's with the commit read."""
    revision = getattr(i.unit, "revision", None)
    rec = {"input": i.key, "fingerprint": i.fingerprint, "sentences": sentences}
    return rec | ({"revision": revision} if revision else {})


def _clear_split(store: Store, source: str, split: str) -> None:
    """Delete the split's rows (not its `sources` row, which is replaced when it is written)."""
    for table in _ROW_TABLES:
        store.con.execute(f"DELETE FROM {table} WHERE source = ? AND split = ?", [source, split])


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
