"""Writing a source into the span store: fingerprints, one transaction, Arrow batches.

`write_source` reads every split of a read plan (`SourceSpec.plan`) through its reader,
validates spans and labels the same way for every reader, and writes sentences, mentions and
negatives in batches of Arrow tables inside ONE transaction: all splits land or nothing
changes. A split whose fingerprint (input bytes + reader version + options) is unchanged is
not read again.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from builders.defaults import split_rank
from builders.errors import SourceFormatError
from builders.sources import ReadPlan, SourceSpec
from builders.sources.base import Example, ReadReport, Unit
from builders.store.db import Store, one

BATCH = 50_000


@dataclass
class SplitResult:
    split: str
    files: list[str]
    status: str  # "ingested" | "unchanged"
    sentences: int
    mentions: int
    negatives: int
    types: int
    report: dict[str, Any] = field(default_factory=dict)


@dataclass
class IngestResult:
    source: str
    kind: str
    status: str  # "ingested" | "unchanged"
    splits: list[SplitResult]
    types: int = 0

    @property
    def sentences(self) -> int:
        return sum(s.sentences for s in self.splits)

    @property
    def mentions(self) -> int:
        return sum(s.mentions for s in self.splits)

    @property
    def negatives(self) -> int:
        return sum(s.negatives for s in self.splits)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "kind": self.kind,
            "status": self.status,
            "sentences": self.sentences,
            "mentions": self.mentions,
            "negatives": self.negatives,
            "types": self.types,
            "splits": {
                s.split: {
                    "status": s.status,
                    "files": s.files,
                    "sentences": s.sentences,
                    "mentions": s.mentions,
                    "negatives": s.negatives,
                    "types": s.types,
                    "report": s.report,
                }
                for s in self.splits
            },
        }


def fingerprint(spec: SourceSpec, plan: ReadPlan, units: list[Unit]) -> str:
    """Hash of the input (file bytes; a local dataset's file bytes; a Hub dataset's id, config
    and split), the reader and its version, and the options that shape the output."""
    h = hashlib.sha256()
    h.update(f"{plan.module}\0{spec.loader_version}\0".encode())
    h.update(json.dumps(_jsonable(dict(plan.options)), sort_keys=True).encode())
    for unit in units:
        h.update(b"\0" + unit.name.encode() + b"\0")
        for path in [unit] if isinstance(unit, Path) else unit.files:
            h.update(b"\0" + path.name.encode() + b"\0")
            with open(path, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
    return h.hexdigest()


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def write_source(
    store: Store,
    spec: SourceSpec,
    plan: ReadPlan,
    *,
    name: str | None = None,
    replace: bool = False,
    progress: Callable[[int], None] | None = None,
) -> IngestResult:
    """Ingest the splits of a read plan (`SourceSpec.plan`) in one transaction.

    Args:
        spec: the registered source (kind, label mapping).
        plan: the reader, its units per split and its options.
        name: the name to store it under (default: the source name).
        replace: re-read even when the fingerprint is unchanged.
        progress: called with the number of examples read since the last call.
    """
    source = name or spec.name
    stored = set(store.fingerprints(source))
    todo: list[tuple[str, list[Unit], str]] = []
    unchanged: list[str] = []
    for split, units in sorted(plan.units.items()):
        fp = fingerprint(spec, plan, units)
        if not replace and (source, split, fp) in stored:
            unchanged.append(split)
        else:
            todo.append((split, units, fp))
    results: dict[str, SplitResult] = {}
    if todo:
        with store.transaction():
            for split, units, fp in todo:
                results[split] = _write_split(store, spec, plan, source, split, units, fp, progress)
    for split in unchanged:
        results[split] = _split_counts(store, source, split, plan.units[split], "unchanged")
    return IngestResult(
        source=source,
        kind=spec.kind,
        status="ingested" if todo else "unchanged",
        splits=[results[s] for s in sorted(results, key=split_rank)],
        types=store.count_types(source),
    )


def _write_split(
    store: Store,
    spec: SourceSpec,
    plan: ReadPlan,
    source: str,
    split: str,
    units: list[Unit],
    fp: str,
    progress: Callable[[int], None] | None,
) -> SplitResult:
    """Replace one split: read, validate and buffer every example, then record the split."""
    con = store.con
    for table in ("sentences", "mentions", "negatives", "sources"):
        con.execute(f"DELETE FROM {table} WHERE source = ? AND split = ?", [source, split])
    report = ReadReport()
    read = spec.reader(plan.module)
    stream = ((u, ex) for u in units for ex in read(u, report, **plan.options))
    buf = _Buffers(source, split)
    counts = _Validator(spec, buf).run(stream, con, progress)
    if counts[0] == 0:
        raise SourceFormatError(
            units[0] if units else source, None, "empty input: no sentences found"
        )
    rep = {"counts": dict(sorted(report.counts.items())), "notes": report.notes}
    con.execute(
        "INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            source,
            split,
            spec.kind,
            plan.origin,
            fp,
            spec.loader_version,
            json.dumps(_jsonable(dict(plan.user_options)), sort_keys=True),
            _dt.datetime.now(_dt.UTC).replace(tzinfo=None),
            *counts,
            json.dumps(rep, sort_keys=True),
        ],
    )
    return SplitResult(
        split, [str(u) for u in units], "ingested", *counts, store.count_types(source, split), rep
    )


class _Validator:
    """Checks every example the same way for every reader (tokens, span bounds, labels),
    maps raw labels through the source's spec, and buffers the rows."""

    def __init__(self, spec: SourceSpec, buf: _Buffers):
        self.spec, self.buf = spec, buf
        self.labels: dict[str, tuple[str, str | None]] = {}

    def label(self, unit: Unit, line: int, raw: str) -> tuple[str, str | None]:
        mapped = self.labels.get(raw)
        if mapped is None:
            mapped = self.spec.map_label(raw)
            if not mapped[0]:
                raise SourceFormatError(unit, line, "empty label", raw)
            self.labels[raw] = mapped
        return mapped

    def run(
        self,
        stream: Iterable[tuple[Unit, Example]],
        con: duckdb.DuckDBPyConnection,
        progress: Callable[[int], None] | None,
    ) -> tuple[int, int, int]:
        """Buffer every example; return (sentences, mentions, negatives)."""
        buf = self.buf
        n_sent = n_ment = n_neg = 0
        for unit, ex in stream:
            if not ex.tokens:
                raise SourceFormatError(unit, ex.line, "sentence has no tokens")
            n = len(ex.tokens)
            buf.sentence(n_sent, ex.tokens, ex.raw_id)
            for start, stop, raw in ex.spans:
                if not (0 <= start < stop <= n):
                    raise SourceFormatError(
                        unit,
                        ex.line,
                        f"span outside its sentence of {n} tokens (start, stop exclusive)",
                        (start, stop, raw),
                    )
                label, coarse = self.label(unit, ex.line, raw)
                buf.mention(n_sent, start, stop, label, raw, coarse)
                n_ment += 1
            for raw in ex.negatives:
                buf.negative(n_sent, self.label(unit, ex.line, raw)[0], raw)
                n_neg += 1
            n_sent += 1
            if len(buf) >= BATCH:
                buf.flush(con)
                if progress:
                    progress(BATCH)
        if progress:
            progress(len(buf))
        buf.flush(con)
        return n_sent, n_ment, n_neg


def _split_counts(
    store: Store, source: str, split: str, units: list[Unit], status: str
) -> SplitResult:
    row = one(
        store.con.execute(
            "SELECT n_sentences, n_mentions, n_negatives, report FROM sources "
            "WHERE source = ? AND split = ?",
            [source, split],
        )
    )
    return SplitResult(
        split,
        [str(u) for u in units],
        status,
        int(row[0]),
        int(row[1]),
        int(row[2]),
        store.count_types(source, split),
        json.loads(row[3]),
    )


class _Buffers:
    """Column buffers flushed to DuckDB as Arrow tables (no row-by-row INSERTs).

    Token lists are kept flat with offsets (building a list array from nested Python lists
    costs several times more); source, split and sentence ids are filled in by SQL.
    """

    def __init__(self, source: str, split: str):
        self.source, self.split = source, split
        self._reset()

    def _reset(self) -> None:
        self.s_idx: list[int] = []
        self.s_off: list[int] = [0]
        self.s_flat: list[str] = []
        self.s_raw: list[str | None] = []
        self.m_idx: list[int] = []
        self.m_start: list[int] = []
        self.m_stop: list[int] = []
        self.m_label: list[str] = []
        self.m_raw: list[str] = []
        self.m_coarse: list[str | None] = []
        self.n_idx: list[int] = []
        self.n_label: list[str] = []
        self.n_raw: list[str] = []

    def __len__(self) -> int:
        return len(self.s_idx)

    def sentence(self, idx: int, tokens: list[str], raw_id: str | None) -> None:
        self.s_idx.append(idx)
        self.s_flat.extend(tokens)
        self.s_off.append(len(self.s_flat))
        self.s_raw.append(raw_id)

    def mention(
        self, idx: int, start: int, stop: int, label: str, raw: str, coarse: str | None
    ) -> None:
        self.m_idx.append(idx)
        self.m_start.append(start)
        self.m_stop.append(stop)
        self.m_label.append(label)
        self.m_raw.append(raw)
        self.m_coarse.append(coarse)

    def negative(self, idx: int, label: str, raw: str) -> None:
        self.n_idx.append(idx)
        self.n_label.append(label)
        self.n_raw.append(raw)

    def flush(self, con: duckdb.DuckDBPyConnection) -> None:
        if not self.s_idx:
            return
        key = [self.source, self.split]
        tokens = pa.ListArray.from_arrays(
            pa.array(self.s_off, pa.int32()), pa.array(self.s_flat, pa.string())
        )
        sents = pa.table(
            {
                "idx": pa.array(self.s_idx, pa.int32()),
                "tokens": tokens,
                "raw_id": pa.array(self.s_raw, pa.string()),
            }
        )
        con.register("_batch_sentences", sents)
        con.execute(
            "INSERT INTO sentences SELECT $1, $2, idx, $1 || '/' || $2 || '/' || idx, tokens, "
            "raw_id FROM _batch_sentences",
            key,
        )
        con.unregister("_batch_sentences")
        if self.m_idx:
            ments = pa.table(
                {
                    "idx": pa.array(self.m_idx, pa.int32()),
                    "start": pa.array(self.m_start, pa.int32()),
                    "stop": pa.array(self.m_stop, pa.int32()),
                    "label": pa.array(self.m_label, pa.string()),
                    "raw_label": pa.array(self.m_raw, pa.string()),
                    "coarse": pa.array(self.m_coarse, pa.string()),
                }
            )
            con.register("_batch_mentions", ments)
            con.execute(
                "INSERT INTO mentions SELECT $1, $2, idx, start, stop, label, raw_label, coarse "
                "FROM _batch_mentions",
                key,
            )
            con.unregister("_batch_mentions")
        if self.n_idx:
            negs = pa.table(
                {
                    "idx": pa.array(self.n_idx, pa.int32()),
                    "label": pa.array(self.n_label, pa.string()),
                    "raw_label": pa.array(self.n_raw, pa.string()),
                }
            )
            con.register("_batch_negatives", negs)
            con.execute(
                "INSERT INTO negatives SELECT $1, $2, idx, label, raw_label FROM _batch_negatives",
                key,
            )
            con.unregister("_batch_negatives")
        self._reset()
