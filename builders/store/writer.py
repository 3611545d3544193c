"""Writing a source into the span store: fingerprints, one transaction, Arrow batches.

`write_source` reads every split of a source through its reader (or a given example stream),
validates spans and labels the same way for every reader, and writes sentences, mentions and
negatives in batches of Arrow tables inside ONE transaction: all splits land or nothing
changes. A split whose fingerprint (input bytes + loader version + options) is unchanged is
not read again.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from builders.defaults import split_rank
from builders.errors import SourceFormatError
from builders.sources import SourceSpec
from builders.sources.base import Example, ReadReport
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


def fingerprint(spec: SourceSpec, files: list[Path], options: dict[str, Any]) -> str:
    """Hash of the input bytes, the loader version and the options that shape the output."""
    h = hashlib.sha256()
    h.update(f"{spec.module}\0{spec.loader_version}\0".encode())
    h.update(json.dumps(_jsonable({**spec.options, **options}), sort_keys=True).encode())
    for path in files:
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
    files: dict[str, list[Path]],
    *,
    name: str | None = None,
    options: dict[str, Any] | None = None,
    replace: bool = False,
    origin: str | None = None,
    progress: Callable[[int], None] | None = None,
    examples: Callable[[str, list[Path], ReadReport], Iterable[tuple[Path, Example]]] | None = None,
) -> IngestResult:
    """Ingest the given split files of a source in one transaction.

    Args:
        spec: the registered source.
        files: split -> files, as `SourceSpec.discover` returns.
        name: the name to store it under (default: the source name).
        options: reader options beyond the spec's own (e.g. `repair=True`).
        replace: re-read even when the fingerprint is unchanged.
        origin: where the data came from (path or Hub id), recorded in `sources`.
        progress: called with the number of examples read since the last call.
        examples: alternative example producer (used by the `hf` source).
    """
    source = name or spec.name
    options = dict(options or {})
    reader_opts = {**spec.options, **options}
    plans: list[tuple[str, list[Path], str]] = []
    unchanged: list[str] = []
    for split, paths in sorted(files.items()):
        fp = (
            fingerprint(spec, paths, options)
            if paths
            else "hub:" + json.dumps(_jsonable(reader_opts), sort_keys=True)
        )
        old = one(
            store.con.execute(
                "SELECT fingerprint FROM sources WHERE source = ? AND split = ?",
                [source, split],
            )
        )
        if old is not None and old[0] == fp and not replace:
            unchanged.append(split)
        else:
            plans.append((split, paths, fp))

    results: dict[str, SplitResult] = {}
    if plans:
        with store.transaction():
            for split, paths, fp in plans:
                report = ReadReport()
                if examples is not None:
                    stream = examples(split, paths, report)
                else:
                    stream = _read_files(spec, paths, report, reader_opts)
                results[split] = _write_split(
                    store, spec, source, split, paths, fp, stream, report, origin, options, progress
                )
    for split in unchanged:
        results[split] = _split_counts(store, source, split, files[split], "unchanged")
    ordered = [results[s] for s in sorted(results, key=split_rank)]
    types = one(
        store.con.execute("SELECT count(DISTINCT label) FROM mentions WHERE source = ?", [source])
    )[0]
    return IngestResult(
        source=source,
        kind=spec.kind,
        status="ingested" if plans else "unchanged",
        splits=ordered,
        types=int(types),
    )


def _read_files(
    spec: SourceSpec, paths: list[Path], report: ReadReport, opts: dict[str, Any]
) -> Iterator[tuple[Path, Example]]:
    read = spec.reader()
    for path in paths:
        for ex in read(path, report, **opts):
            yield path, ex


def _write_split(
    store: Store,
    spec: SourceSpec,
    source: str,
    split: str,
    paths: list[Path],
    fp: str,
    stream: Iterable[tuple[Path, Example]],
    report: ReadReport,
    origin: str | None,
    options: dict[str, Any],
    progress: Callable[[int], None] | None,
) -> SplitResult:
    con = store.con
    for table in ("sentences", "mentions", "negatives", "sources"):
        con.execute(f"DELETE FROM {table} WHERE source = ? AND split = ?", [source, split])
    label_cache: dict[str, tuple[str, str | None]] = {}
    buf = _Buffers(source, split)
    n_sent = n_ment = n_neg = 0
    last_path: Path | None = None
    for path, ex in stream:
        last_path = path
        if not ex.tokens:
            raise SourceFormatError(path, ex.line, "sentence has no tokens")
        n = len(ex.tokens)
        idx = n_sent
        buf.sentence(idx, ex.tokens, ex.raw_id)
        for start, stop, raw in ex.spans:
            if not (0 <= start < stop <= n):
                raise SourceFormatError(
                    path,
                    ex.line,
                    f"span outside its sentence of {n} tokens (start, stop exclusive)",
                    (start, stop, raw),
                )
            mapped = label_cache.get(raw)
            if mapped is None:
                mapped = spec.map_label(raw)
                if not mapped[0]:
                    raise SourceFormatError(path, ex.line, "empty label", raw)
                label_cache[raw] = mapped
            buf.mention(idx, start, stop, mapped[0], raw, mapped[1])
            n_ment += 1
        for raw in ex.negatives:
            mapped = label_cache.get(raw) or spec.map_label(raw)
            if not mapped[0]:
                raise SourceFormatError(path, ex.line, "empty label", raw)
            label_cache[raw] = mapped
            buf.negative(idx, mapped[0], raw)
            n_neg += 1
        n_sent += 1
        if len(buf) >= BATCH:
            buf.flush(con)
            if progress:
                progress(BATCH)
    if n_sent == 0:
        where = last_path or (paths[0] if paths else Path(source))
        raise SourceFormatError(where, None, "empty input: no sentences found")
    if progress:
        progress(len(buf))
    buf.flush(con)
    types = one(
        con.execute(
            "SELECT count(DISTINCT label) FROM mentions WHERE source = ? AND split = ?",
            [source, split],
        )
    )[0]
    rep = {"counts": dict(sorted(report.counts.items())), "notes": report.notes}
    con.execute(
        "INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            source,
            split,
            spec.kind,
            origin or ",".join(str(p) for p in paths) or spec.origin,
            fp,
            spec.loader_version,
            json.dumps(_jsonable(options), sort_keys=True),
            _dt.datetime.now(_dt.UTC).replace(tzinfo=None),
            n_sent,
            n_ment,
            n_neg,
            json.dumps(rep, sort_keys=True),
        ],
    )
    return SplitResult(
        split, [str(p) for p in paths], "ingested", n_sent, n_ment, n_neg, int(types), rep
    )


def _split_counts(
    store: Store, source: str, split: str, paths: list[Path], status: str
) -> SplitResult:
    row = one(
        store.con.execute(
            "SELECT n_sentences, n_mentions, n_negatives, report FROM sources "
            "WHERE source = ? AND split = ?",
            [source, split],
        )
    )
    types = one(
        store.con.execute(
            "SELECT count(DISTINCT label) FROM mentions WHERE source = ? AND split = ?",
            [source, split],
        )
    )[0]
    return SplitResult(
        split,
        [str(p) for p in paths],
        status,
        int(row[0]),
        int(row[1]),
        int(row[2]),
        int(types),
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
