"""What `builders familiarity` and `builders leakage` compute, each from one request: a
stored corpus's Familiarity with the benchmarks (and, optionally, its leakage), or its leakage
alone.

    request = FamiliarityRequest("pilener-sample", benchmarks="crossner-ai,mit-movie")
    found = survey(store, request)            # the store only read (its label vectors cached)
    found.report.union_macro, found.to_dict()
    found = leakage_survey(store, LeakageRequest("pilener-sample"))
    found.scan.report(), found.scan.pairs_table()
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from builders.defaults import FAMILIAR_SIM, NGRAM
from builders.shift.benchmarks import resolve, stored_sources
from builders.shift.embedder import Embedder
from builders.shift.leakage import scan
from builders.shift.report import LabelTable, measure
from builders.shift.specs import EmbeddingSpec, MetricSpec

if TYPE_CHECKING:
    from builders.shift.benchmarks import EvalSet
    from builders.shift.leakage import LeakageScan
    from builders.shift.report import FamiliarityReport
    from builders.store import Store


@dataclass(frozen=True)
class FamiliarityRequest:
    """What to measure: the corpus, the benchmarks (`--benchmarks` syntax, `--label-map`,
    `keep_misc`), how labels are embedded and how Familiarity is read; `leakage` adds the
    leakage scan with `ngram`-grams."""

    source: str
    benchmarks: str = "all"
    label_map: str | None = None
    keep_misc: bool = False
    leakage: bool = False
    ngram: int = NGRAM
    embedding: EmbeddingSpec = EmbeddingSpec()
    metric: MetricSpec = MetricSpec()

    def settings(self) -> dict[str, Any]:
        """model, k, weighting, backend (as asked), precision: what the JSON result names."""
        emb, metric = self.embedding, self.metric
        return {
            "model": emb.model,
            "k": metric.k,
            "weighting": metric.weighting,
            "requested_backend": emb.backend,
            "precision": emb.precision,
        }


@dataclass(frozen=True)
class LeakageRequest:
    """What to scan: the corpus, the benchmarks (`--benchmarks` syntax, `--label-map`), the
    n-gram length, and the similarity (under `embedding`) at which a seen mention's training
    label is familiar."""

    source: str
    benchmarks: str = "all"
    label_map: str | None = None
    ngram: int = NGRAM
    threshold: float = FAMILIAR_SIM
    embedding: EmbeddingSpec = EmbeddingSpec()


@dataclass
class LeakageSurvey:
    """A leakage request's answer: the benchmarks as resolved and the scan."""

    request: LeakageRequest
    evalsets: list[EvalSet]
    scan: LeakageScan


def leakage_survey(
    store: Store,
    request: LeakageRequest,
    *,
    on_note: Callable[[str], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> LeakageSurvey:
    """Scan `request.source` for the request's benchmarks' sentences and mentions (writing
    only a benchmark ingested from its local copy, and label vectors); `on_note` hears what was
    done, `on_warning` what the figures rest on (a benchmark read by an older reader)."""
    sets = resolve(request.benchmarks, store=store, mapping=request.label_map)
    _warn_older(store, sets, on_warning)
    found = scan(
        store,
        request.source,
        sets,
        n=request.ngram,
        embedding=request.embedding,
        threshold=request.threshold,
        on_note=on_note,
    )
    return LeakageSurvey(request, sets, found)


def _warn_older(
    store: Store, evalsets: list[EvalSet], on_warning: Callable[[str], None] | None
) -> None:
    for src in stored_sources(evalsets):
        for text in store.older_read_notes(src):
            (on_warning or (lambda s: None))(text)


@dataclass
class FamiliaritySurvey:
    """A request's answer: the benchmarks as resolved, the corpus's label table, its report
    and (when asked) its leakage figures (`LeakageReport.to_dict()`)."""

    request: FamiliarityRequest
    evalsets: list[EvalSet]
    table: LabelTable
    report: FamiliarityReport
    leakage: dict[str, Any] | None
    #: The runtime that embedded the labels (`auto` resolved: torch, onnx or openvino).
    runtime: str

    def to_dict(self) -> dict[str, Any]:
        """The `familiarity --json` result (without the authors' reference figures)."""
        return {
            "source": self.request.source,
            **self.request.settings(),
            "backend": self.runtime,
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
    """Measure `request.source` against the request's benchmarks, as `leakage_survey` reads
    and writes; `embedder` (of the request's spec) embeds instead of a new one."""
    # one model load for the metric and the leakage scan
    emb = embedder or Embedder.of(request.embedding)
    evalsets = resolve(
        request.benchmarks,
        store=store,
        keep_misc=request.keep_misc,
        mapping=request.label_map,
        protocol=request.metric.protocol,
    )
    _warn_older(store, evalsets, on_warning)
    table = LabelTable.load(store, request.source, request.metric.protocol)
    report = measure(
        store,
        table,
        {s.name: s.labels for s in evalsets},
        embedding=emb,
        metric=request.metric,
        progress=progress,
    )
    leak = None
    if request.leakage:
        found = scan(
            store,
            request.source,
            evalsets,
            n=request.ngram,
            embedding=emb,
            on_note=on_note,
            texts=False,
        )
        leak = found.report().to_dict()
    return FamiliaritySurvey(request, evalsets, table, report, leak, emb.backend)
