"""Validated rows on their way into the store: `Validator` checks every example the same way
whatever its reader and verbalises its labels (METHOD.md section 6); `Buffers` holds the rows
column by column and flushes them to DuckDB as Arrow tables (no row-by-row INSERTs).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from builders.deferred import duckdb, pa
from builders.errors import SourceFormatError, opt
from builders.labels import natural_keys, normalise_label, table_label
from builders.sources import SourceSpec
from builders.sources.base import Example, ReadReport, Unit, counted

BATCH = 50_000
#: How many raw -> label pairs a note names before it says how many more there are.
SHOWN = 8
#: Report counts of distinct labels: each is the whole split's (an append recounts it over
#: the stored labels and the new ones, `Validator.seed`), never a sum over its reads.
WHOLE_SPLIT = ("labels_mapped", "labels_verbalised")
#: The notes `Validator.account` writes about the whole split's labels (replaced on append).
_WHOLE_SPLIT_NOTE = re.compile(
    r"[\d,]+ (labels? verbalised by the (label map|packaged table)|tags? not in the "
    r"packaged table, kept as written)"
)


def whole_split_note(text: str) -> bool:
    """A note about the whole split's labels, which an append's account replaces."""
    return _WHOLE_SPLIT_NOTE.match(text) is not None


class Validator:
    """Checks and buffers examples; `counts` and `per_input` say what was read."""

    def __init__(self, spec: SourceSpec, buf: Buffers, mapping: Mapping[str, str] | None = None):
        """`mapping`: the normalised label map (`labels.label_map`), read before the table."""
        self.spec, self.buf = spec, buf
        self.mapping = dict(mapping or {})
        self.labels: dict[str, tuple[str, str | None]] = {}
        #: where each raw label is first: its input (or the stored inputs), line, record
        self.first: dict[str, tuple[Unit | str, int | None, int | None]] = {}
        self.counts: Counter[str] = Counter()
        self.per_input: Counter[Unit] = Counter()

    def label(self, unit: Unit, ex: Example, raw: str) -> tuple[str, str | None]:
        mapped = self.labels.get(raw)
        if mapped is None:
            try:
                mapped = self.spec.map_label(raw, self.mapping)
            except ValueError as exc:  # e.g. a Few-NERD tag outside its types, read through hf
                raise SourceFormatError(unit, ex.line, str(exc), raw, record=ex.record) from exc
            if not mapped[0]:
                raise SourceFormatError(unit, ex.line, "empty label", raw, record=ex.record)
            self.labels[raw] = mapped
            self.first[raw] = (unit, ex.line, ex.record)
        return mapped

    def seed(self, con: duckdb.DuckDBPyConnection, where: str) -> None:
        """Know the raw labels the split already holds (an append): `account` and `settle` then
        judge the whole split, as one read of all its inputs would. `where`: the stored
        inputs, named in an error about one of those labels."""
        union = " UNION ALL ".join(
            f"SELECT raw_label, label FROM {t} WHERE source = ? AND split = ?"
            for t in ("mentions", "negatives", "negative_spans")
        )
        rows = con.execute(
            f"SELECT raw_label, any_value(label) FROM ({union}) GROUP BY 1 ORDER BY 1",
            [self.buf.source, self.buf.split] * 3,
        ).fetchall()
        for raw, stored in rows:  # as stored (settled), so that settle changes only what moves
            if raw not in self.labels:
                self.labels[raw] = (stored, self.spec.map_label(raw, self.mapping)[1])
                self.first[raw] = (where, None, None)

    def account(self, report: ReadReport, con: duckdb.DuckDBPyConnection) -> None:
        """Settle the table's natural-language keys by the split's evidence (`settle`), then
        count and name in `report` the labels the label map and the packaged table changed,
        and the tags the table does not hold (METHOD.md section 6)."""
        if self.spec.label_fn:  # Few-NERD's types go by their own table
            return
        self.settle(con)
        mapped, table, unknown = {}, {}, []
        for raw, (label, _) in self.labels.items():
            key = normalise_label(raw)
            if key in self.mapping:
                mapped[raw] = label
            elif label != key:
                table[raw] = label
            elif table_label(raw) is None:
                unknown.append(key)
        for key, what, changed in (
            ("labels_mapped", "by the label map", mapped),
            ("labels_verbalised", "by the packaged table", table),
        ):
            if changed:
                report.add(key, len(changed))
                report.note(
                    f"{counted(len(changed), 'label')} verbalised {what}: {_pairs(changed)}"
                )
        if unknown and self.spec.labels == "tags":
            report.note(
                f"{counted(len(unknown), 'tag')} not in the packaged table, kept as written "
                f"(normalised): {_listed(sorted(unknown))}; --label-map FILE verbalises them"
            )

    def settle(self, con: duckdb.DuckDBPyConnection) -> None:
        """A natural-language key of the table (`organisation`) is the benchmark tag when
        another label of the split is a tag the table verbalises (`misc`, `PER`): its stored
        rows are relabelled. A tag source with no such tag and labels of natural language
        (`field of study`) is ambiguous: refused, naming `--label-map`."""
        tags = [r for r in self.labels if self._table_tag(r)]
        text = sorted(r for r in self.labels if " " in r.strip())
        for raw, (label, coarse) in list(self.labels.items()):
            key = normalise_label(raw)
            tag = table_label(raw)
            if key in self.mapping or key.replace(" ", "_") not in natural_keys() or tag is None:
                continue
            if self.spec.labels == "tags" and text and not tags:
                unit, line, record = self.first[raw]
                raise SourceFormatError(
                    unit,
                    line,
                    f"{key!r} is a benchmark tag (verbalised {tag!r}) and a natural-language "
                    f"label like this input's others ({_listed(text, 3)}): say which with "
                    f"{opt('label_map', 'FILE')} ({key} = {tag!r}, or {key} = {key!r})",
                    raw,
                    record=record,
                )
            if tags and label != tag:
                self.labels[raw] = (tag, coarse)
                self.buf.relabel(con, raw, tag)

    def _table_tag(self, raw: str) -> bool:
        """A tag the table verbalises, other than its natural-language keys (`PER`, `misc`)."""
        key = normalise_label(raw)
        if key in self.mapping or key.replace(" ", "_") in natural_keys():
            return False
        return table_label(raw) not in (None, key)

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

    def relabel(self, con: duckdb.DuckDBPyConnection, raw: str, label: str) -> None:
        """Give every stored row of this split with the raw label `raw` the label `label`."""
        for table in ("mentions", "negatives", "negative_spans"):
            con.execute(
                f"UPDATE {table} SET label = ? WHERE source = ? AND split = ? AND raw_label = ?",
                [label, self.source, self.split, raw],
            )

    def flush(self, con: duckdb.DuckDBPyConnection) -> None:
        if not self.s_idx:
            return
        tokens = pa.ListArray.from_arrays(
            pa.array(self.s_off, pa.int32()), pa.array(self.s_flat, pa.string())
        )
        sid = duckdb.FunctionExpression(
            "concat",
            duckdb.ConstantExpression(f"{self.source}/{self.split}/"),
            duckdb.ColumnExpression("idx"),
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
        exprs = [duckdb.ConstantExpression(self.source), duckdb.ConstantExpression(self.split)]
        exprs += [duckdb.ColumnExpression(c) if isinstance(c, str) else c for c in select]
        con.from_arrow(pa.table(columns)).select(*exprs).insert_into(table)


def _arrow(columns: dict[str, list]) -> dict[str, pa.Array]:
    """Int columns as int32 and text as string, whatever the (possibly empty) lists hold."""
    ints = {"idx", "start", "stop"}
    return {k: pa.array(v, pa.int32() if k in ints else pa.string()) for k, v in columns.items()}


def _pairs(changed: dict[str, str]) -> str:
    """`PER -> person, LOC -> location`, at most SHOWN pairs, in raw-label order."""
    return _listed([f"{raw} -> {label}" for raw, label in sorted(changed.items())])


def _listed(items: list[str], shown: int = SHOWN) -> str:
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f" and {more:,} more" if more > 0 else "")
