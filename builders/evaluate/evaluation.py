"""One model's evaluation: its predictions scored, each label's F1 set beside the training
data's Familiarity (METHOD.md section 9).

    request = EvaluateRequest(("preds/",), training="out/demo/pilener-sample-low-shift")
    found = evaluate(store, request)
    found.macro_f1, found.points(), found.views(), found.to_dict()
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from builders.deferred import np
from builders.evaluate.context import Context, Training, label_context, training, views
from builders.evaluate.scoring import BenchmarkScore, prediction_files, score_files
from builders.labels import MISC_LABEL
from builders.shift.specs import EmbeddingSpec, MetricSpec

if TYPE_CHECKING:
    from builders.shift.embedder import Embedder
    from builders.store import Store


@dataclass(frozen=True)
class EvaluateRequest:
    """What to evaluate: prediction files or folders (`NAME=FILE` names a file's benchmark),
    the training data to set them beside (a stored source, a level folder and its `config`,
    or a label-count file; None: scores alone), how `else` is scored, how labels are
    embedded and how Familiarity is read."""

    predictions: tuple[str, ...]
    training: str | None = None
    config: str | None = None
    misc: str = "keep"
    embedding: EmbeddingSpec = EmbeddingSpec()
    metric: MetricSpec = MetricSpec()


@dataclass
class Evaluation:
    """A request's answer: each benchmark's score, and with training data its context."""

    request: EvaluateRequest
    scores: list[BenchmarkScore]
    train: Training | None = None
    context: Context | None = None
    _points: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def macro_f1(self) -> float | None:
        """The mean of the benchmarks' micro F1 (the paper's headline); None where a score
        table gave per-label F1 alone."""
        f1 = [s.f1 for s in self.scores]
        return None if None in f1 else float(np.mean(f1))  # type: ignore[arg-type]

    def points(self) -> list[dict[str, Any]]:
        """One row per (benchmark, label): its score and, with training data, its context."""
        if not self._points:
            for s in self.scores:
                for lab in s.labels:
                    row = {"benchmark": s.name, **lab.to_dict()}
                    if self.context is not None and self.train is not None:
                        row |= self.context.of(self.train.table, lab.label)
                    self._points.append(row)
        return self._points

    def views(self) -> dict[str, Any] | None:
        return None if self.context is None else views(self.points(), self.request.metric.seed)

    def familiarity(self, benchmark: str | None = None) -> float | None:
        """The training data's Familiarity with one scored benchmark, or over their union."""
        if self.context is None:
            return None
        rep = self.context.report
        if benchmark is None:
            return rep.union_macro
        found = rep.per_benchmark.get(benchmark)  # None: a benchmark of `else` alone
        return None if found is None else found.familiarity

    def to_dict(self) -> dict[str, Any]:
        req, ctx = self.request, self.context
        out: dict[str, Any] = {"misc": req.misc, "macro_f1": self.macro_f1}
        if ctx is not None and self.train is not None:
            out |= {
                "training": self.train.describe(),
                "model": ctx.report.model, "runtime": ctx.runtime,
                "requested_backend": req.embedding.backend, "precision": req.embedding.precision,
                "k": req.metric.k, "weighting": req.metric.weighting,
                "familiarity": ctx.report.union_macro,
            }  # fmt: skip
        out["benchmarks"] = [
            {**s.to_dict(), "familiarity": self.familiarity(s.name)} for s in self.scores
        ]
        for s in out["benchmarks"]:
            del s["labels"]
        return out | {"labels": self.points(), "views": self.views()}


def evaluate(
    store: Store,
    request: EvaluateRequest,
    *,
    embedder: Embedder | None = None,
    on_note: Callable[[str], None] | None = None,
    progress: bool = False,
) -> Evaluation:
    """Score the request's predictions against the stored benchmarks and, with training data,
    put every label's F1 in its context. Reads the store; writes only what reading needs (a
    benchmark ingested from its local copy, new label vectors)."""
    scores = score_files(store, prediction_files(request.predictions), request.misc, on_note)
    if request.training is None:
        return Evaluation(request, scores)
    train = training(store, request.training, request.config)
    sets = {s.name: [z.label for z in s.labels if z.label != MISC_LABEL] for s in scores}
    ctx = label_context(
        store, train, {k: v for k, v in sets.items() if v}, embedder or request.embedding,
        request.metric, progress,
    )  # fmt: skip
    return Evaluation(request, scores, train, ctx)
