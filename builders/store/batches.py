"""Validated rows on their way into the store: one check for every reader, Arrow batches.

`Validator` checks every example the same way whatever its reader (tokens, span bounds, labels),
maps raw labels through the source's spec and counts what each input gave; `Buffers` holds the
rows column by column and flushes them to DuckDB as Arrow tables (no row-by-row INSERTs).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

import duckdb
import pyarrow as pa
from duckdb import ColumnExpression, ConstantExpression, FunctionExpression

from builders.errors import SourceFormatError
from builders.sources import SourceSpec
from builders.sources.base import Example, Unit

BATCH = 50_000


class Validator:
    """Checks and buffers examples; `counts` and `per_input` say what was read."""

    def __init__(self, spec: SourceSpec, buf: Buffers):
        self.spec, self.buf = spec, buf
        self.labels: dict[str, tuple[str, str | None]] = {}
        self.counts: Counter[str] = Counter()
        self.per_input: Counter[Unit] = Counter()

    def label(self, unit: Unit, ex: Example, raw: str) -> tuple[str, str | None]:
        mapped = self.labels.get(raw)
        if mapped is None:
            try:
                mapped = self.spec.map_label(raw)
            except ValueError as exc:  # e.g. a Few-NERD tag outside its types, read through hf
                raise SourceFormatError(unit, ex.line, str(exc), raw, record=ex.record) from exc
            if not mapped[0]:
                raise SourceFormatError(unit, ex.line, "empty label", raw, record=ex.record)
            self.labels[raw] = mapped
        return mapped

    @staticmethod
    def outside(unit: Unit, ex: Example, span: tuple[int, int, str]) -> SourceFormatError:
        return SourceFormatError(
            unit,
            ex.line,
            f"span outside its sentence of {len(ex.tokens)} tokens (start, stop exclusive)",
            span,
            record=ex.record,
        )

    def run(
        self,
        stream: Iterable[tuple[Unit, Example]],
        con: duckdb.DuckDBPyConnection,
        first_idx: int,
        progress: Callable[[int], None] | None,
    ) -> None:
        """Buffer every example, numbering sentences from `first_idx`."""
        buf, idx = self.buf, first_idx
        n_ment = n_neg = n_nspan = 0
        unit: Unit | None = None
        unit_start = idx
        for u, ex in stream:
            if u != unit:  # count per input without a dict update per sentence
                if unit is not None:
                    self.per_input[unit] += idx - unit_start
                unit, unit_start = u, idx
            n = len(ex.tokens)
            if not n:
                raise SourceFormatError(u, ex.line, "sentence has no tokens", record=ex.record)
            buf.sentence(idx, ex.tokens, ex.raw_id)
            for start, stop, raw in ex.spans:
                if not (0 <= start < stop <= n):
                    raise self.outside(u, ex, (start, stop, raw))
                label, coarse = self.label(u, ex, raw)
                buf.mention(idx, start, stop, label, raw, coarse)
            n_ment += len(ex.spans)
            if ex.negatives:
                for raw in ex.negatives:
                    buf.negative(idx, self.label(u, ex, raw)[0], raw)
                n_neg += len(ex.negatives)
            if ex.negative_spans:
                for start, stop, raw in ex.negative_spans:
                    if not (0 <= start < stop <= n):
                        raise self.outside(u, ex, (start, stop, raw))
                    buf.negative_span(idx, start, stop, self.label(u, ex, raw)[0], raw)
                n_nspan += len(ex.negative_spans)
            idx += 1
            if len(buf) >= BATCH:
                buf.flush(con)
                if progress:
                    progress(BATCH)
        if unit is not None:
            self.per_input[unit] += idx - unit_start
        if progress:
            progress(len(buf))
        buf.flush(con)
        self.counts.update(
            sentences=idx - first_idx, mentions=n_ment, negatives=n_neg, negative_spans=n_nspan
        )


class Buffers:
    """Column buffers flushed to DuckDB as Arrow tables.

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
        self.m: dict[str, list] = {k: [] for k in ("idx", "start", "stop", "label", "raw", "co")}
        # the hot path (NuNER: 4.4M mentions) appends to these lists directly
        self._m_append = tuple(v.append for v in self.m.values())
        self.n: dict[str, list] = {k: [] for k in ("idx", "label", "raw")}
        self.ns: dict[str, list] = {k: [] for k in ("idx", "start", "stop", "label", "raw")}

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
        a_idx, a_start, a_stop, a_label, a_raw, a_co = self._m_append
        a_idx(idx)
        a_start(start)
        a_stop(stop)
        a_label(label)
        a_raw(raw)
        a_co(coarse)

    def negative(self, idx: int, label: str, raw: str) -> None:
        for key, value in zip(self.n, (idx, label, raw), strict=True):
            self.n[key].append(value)

    def negative_span(self, idx: int, start: int, stop: int, label: str, raw: str) -> None:
        for key, value in zip(self.ns, (idx, start, stop, label, raw), strict=True):
            self.ns[key].append(value)

    def flush(self, con: duckdb.DuckDBPyConnection) -> None:
        if not self.s_idx:
            return
        tokens = pa.ListArray.from_arrays(
            pa.array(self.s_off, pa.int32()), pa.array(self.s_flat, pa.string())
        )
        sid = FunctionExpression(
            "concat", ConstantExpression(f"{self.source}/{self.split}/"), ColumnExpression("idx")
        )
        columns = {
            "idx": pa.array(self.s_idx, pa.int32()),
            "tokens": tokens,
            "raw_id": pa.array(self.s_raw, pa.string()),
        }
        self._insert(con, "sentences", columns, "idx", sid, "tokens", "raw_id")
        self._insert(con, "mentions", _arrow(self.m), "idx", "start", "stop", "label", "raw", "co")
        self._insert(con, "negatives", _arrow(self.n), "idx", "label", "raw")
        self._insert(con, "negative_spans", _arrow(self.ns), "idx", "start", "stop", "label", "raw")
        self._reset()

    def _insert(
        self,
        con: duckdb.DuckDBPyConnection,
        table: str,
        columns: dict[str, pa.Array],
        *select: str | duckdb.Expression,
    ) -> None:
        """Insert one batch as (source, split, *select).

        Through a relation, not a registered view: a view's Arrow buffers stay alive until
        the ingest's one transaction commits (at 3x NuNER that doubled the peak memory).
        """
        if not len(columns["idx"]):
            return
        exprs = [ConstantExpression(self.source), ConstantExpression(self.split)]
        exprs += [ColumnExpression(c) if isinstance(c, str) else c for c in select]
        con.from_arrow(pa.table(columns)).select(*exprs).insert_into(table)


def _arrow(columns: dict[str, list]) -> dict[str, pa.Array]:
    """Int columns as int32 and text as string, whatever the (possibly empty) lists hold."""
    ints = {"idx", "start", "stop"}
    return {k: pa.array(v, pa.int32() if k in ints else pa.string()) for k, v in columns.items()}
