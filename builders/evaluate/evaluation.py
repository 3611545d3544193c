"""One model's evaluation: its predictions scored, each label's F1 set beside the training
data's Familiarity (METHOD.md section 9): `evaluate(store, EvaluateRequest(...))`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
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
    """What to evaluate; without `training` (`config`: of a level folder), scores alone."""

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

    @cached_property
    def benchmark_f1(self) -> dict[str, float | None]:
        return {s.name: s.f1 for s in self.scores}

    @property
    def macro_f1(self) -> float | None:
        """The mean of the benchmarks' micro F1 (the paper's headline), over those that have one."""
        f1 = [f for f in self.benchmark_f1.values() if f is not None]
        return float(np.mean(f1)) if f1 else None

    def notes(self) -> list[str]:
        """What to keep in mind: every file's notes, and benchmarks left out of the macro."""
        out = [n for s in self.scores for n in s.notes]
        part = [
            f"{s.name} {s.scored:,} of {s.sentences:,}"
            for s in self.scores
            if (s.scored or 0) < (s.sentences or 0)
        ]
        if part:
            out.append(f"test sets predicted in part ({', '.join(part)} sentences): their scores are "
                       "of the sentences predicted, as GLiNER's evaluate scores the sentences it is given")  # fmt: skip
        left = [name for name, f in self.benchmark_f1.items() if f is None]
        if left and self.macro_f1 is not None:
            out.append(f"macro F1 over {len(self.scores) - len(left)} benchmarks: "
                       f"{', '.join(left)} have no micro F1 (a table of F1 alone, or no label left)")  # fmt: skip
        return out

    @cached_property
    def points(self) -> list[dict[str, Any]]:
        """One row per (benchmark, label): its score and, with training data, its context."""
        names = {lab.label for s in self.scores for lab in s.labels}
        ctx = self.context.labels(self.train.table, names) if self.context and self.train else {}
        return [
            {"benchmark": s.name, **lab.to_dict(), **ctx.get(lab.label, {})}
            for s in self.scores
            for lab in s.labels
        ]

    @cached_property
    def views(self) -> dict[str, Any] | None:
        return self.pooled(self.points)

    def pooled(self, points: list[dict[str, Any]]) -> dict[str, Any] | None:
        """The views of other points (each label's F1 averaged over seeds)."""
        return None if self.context is None else views(points, self.request.metric.seed)

    def familiarity(self, benchmark: str | None = None) -> float | None:
        """The training data's Familiarity with one benchmark (over its labels), or over the
        union of the benchmarks' labels."""
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
                "model": ctx.report.model, "backend": ctx.runtime,
                "requested_backend": req.embedding.backend, "precision": req.embedding.precision,
                "k": req.metric.k, "weighting": req.metric.weighting,
                "familiarity": ctx.report.union_macro, "seen_share": ctx.report.overlap,
            }  # fmt: skip
        out["benchmarks"] = [
            {**{k: v for k, v in s.to_dict().items() if k != "labels"},
             "familiarity": self.familiarity(s.name)}
            for s in self.scores
        ]  # fmt: skip
        return out | {"labels": self.points, "views": self.views, "notes": self.notes()}


def evaluate(
    store: Store,
    request: EvaluateRequest,
    *,
    embedder: Embedder | None = None,
    on_note: Callable[[str], None] | None = None,
    progress: bool = False,
) -> Evaluation:
    """Score the request's predictions against the stored benchmarks and, with training data,
    put every label's F1 in its context."""
    scores = score_files(store, prediction_files(request.predictions), request.misc, on_note)
    if request.training is None:
        return Evaluation(request, scores)
    train = training(store, request.training, request.config)
    sets = {s.name: [z for z in s.benchmark_labels if z != MISC_LABEL] for s in scores}
    ctx = label_context(
        store, train, {k: v for k, v in sets.items() if v}, embedder or request.embedding,
        request.metric, progress,
    )  # fmt: skip
    return Evaluation(request, scores, train, ctx)
