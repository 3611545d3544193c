"""What `builders familiarity` computes, from one request: a stored corpus's Familiarity with
the benchmarks and, optionally, its leakage.

    request = FamiliarityRequest("pilener-sample", benchmarks="crossner-ai,mit-movie")
    found = survey(store, request)            # the store only read (its label vectors cached)
    found.report.union_macro, found.to_dict()
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from builders.defaults import (
    DEFAULT_BACKEND,
    DEFAULT_MODEL,
    DEFAULT_PRECISION,
    DEFAULT_PROTOCOL,
    NGRAM,
    SEED,
    WEIGHTING,
    K,
)
from builders.shift.benchmarks import resolve, stored_sources
from builders.shift.embedder import Embedder, canonical_name
from builders.shift.leakage import scan
from builders.shift.report import LabelTable, measure

if TYPE_CHECKING:
    from builders.shift.benchmarks import EvalSet
    from builders.shift.embedder import Embedder
    from builders.shift.report import FamiliarityReport, LabelTable
    from builders.store import Store


@dataclass(frozen=True)
class FamiliarityRequest:
    """What to measure: the corpus, the benchmarks (`--benchmarks` syntax), the model and the
    metric's options; `leakage` adds the leakage scan with `ngram`-grams."""

    source: str
    benchmarks: str = "all"
    label_map: str | None = None
    model: str = DEFAULT_MODEL
    protocol: str = DEFAULT_PROTOCOL
    k: int = K
    weighting: str = WEIGHTING
    keep_misc: bool = False
    seed: int = SEED
    leakage: bool = False
    ngram: int = NGRAM
    backend: str = DEFAULT_BACKEND
    precision: str = DEFAULT_PRECISION

    def metric(self) -> dict[str, Any]:
        """model, k, weighting, backend, precision: what the JSON result names."""
        keys = ("model", "k", "weighting", "backend", "precision")
        return {key: asdict(self)[key] for key in keys}


@dataclass
class FamiliaritySurvey:
    """A request's answer: the benchmarks as resolved, the corpus's label table, its
    Familiarity report and (when asked) its leakage figures (`LeakageReport.to_dict()`)."""

    request: FamiliarityRequest
    evalsets: list[EvalSet]
    table: LabelTable
    report: FamiliarityReport
    leakage: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        """The `familiarity --json` result (without the authors' reference figures)."""
        return {
            "source": self.request.source,
            **self.request.metric(),
            "labels": len(self.table.labels),
            "mentions": int(self.table.mentions.sum()),
            **self.report.to_dict(),
            "benchmarks": [s.describe() for s in self.evalsets],
            "leakage": self.leakage,
        }


def survey(
    store: Store,
    request: FamiliarityRequest,
    *,
    embedder: Embedder | None = None,
    on_note: Callable[[str], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
    progress: bool = False,
) -> FamiliaritySurvey:
    """Measure `request.source` (in the store) against the request's benchmarks.

    Reads the store; writes only what reading needs first (a packaged benchmark ingested from
    its local copy) and the label vectors it embeds (`Store.add_vectors`: held in memory by a
    shared store). `embedder` (one of the request's model, backend and precision) embeds
    instead of a new one; `on_note` hears what was done (a benchmark ingested) and
    `on_warning` what the figures rest on (a benchmark read by an older reader).
    """

    note = on_note or (lambda s: None)
    warn = on_warning or (lambda s: None)
    emb = embedder or Embedder(
        request.model, backend=request.backend, precision=request.precision
    )  # one model load for the metric and the leakage scan
    evalsets = resolve(
        request.benchmarks,
        store=store,
        keep_misc=request.keep_misc,
        mapping=request.label_map,
        protocol=request.protocol,
    )
    for src in stored_sources(evalsets):
        for text in store.older_read_notes(src):
            warn(text)
    table = LabelTable.load(store, request.source, request.protocol)
    metric = {**request.metric(), "model": canonical_name(request.model)}
    report = measure(
        store,
        table,
        {s.name: s.labels for s in evalsets},
        seed=request.seed,
        progress=progress,
        protocol=request.protocol,
        embedder=emb,
        **metric,
    )
    leak = _leakage(store, request, evalsets, emb, note) if request.leakage else None
    return FamiliaritySurvey(request, evalsets, table, report, leak)


def _leakage(
    store: Store,
    request: FamiliarityRequest,
    evalsets: list[EvalSet],
    emb: Embedder,
    note: Callable[[str], None],
) -> dict[str, Any]:

    found = scan(
        store,
        request.source,
        evalsets,
        n=request.ngram,
        model=request.model,
        on_note=note,
        backend=request.backend,
        precision=request.precision,
        texts=False,
        embedder=emb,
    )
    return found.report().to_dict()
