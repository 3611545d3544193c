"""Familiarity from plain Python lists, mirroring the authors' `compute_metric`: no store to set up.

    from builders import familiarity_of

    report = familiarity_of(
        ["person", "person", "location", "programming language"],   # one label per mention
        {"crossner-ai": ["person", "program language", "algorithm"]},
        model="all-MiniLM-L6-v2",
    )
    report.union_macro, report.per_benchmark["crossner-ai"].familiarity, report.to_dict()

The report is the `FamiliarityReport` that `builders familiarity` prints, computed the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path

from builders.defaults import (
    DEFAULT_BACKEND,
    DEFAULT_MODEL,
    DEFAULT_PRECISION,
    SEED,
    WEIGHTING,
    K,
)
from builders.errors import InvalidValue
from builders.labels import normalise_label
from builders.shift.embedder import Embedder, canonical_name
from builders.shift.report import FamiliarityReport, LabelTable, measure
from builders.shift.specs import EmbeddingSpec, MetricSpec
from builders.store import Store

#: The benchmark name a plain list of evaluation labels is reported under.
EVALUATION = "evaluation"


def familiarity_of(
    train: Mapping[str, int] | Sequence[str],
    evaluation: Mapping[str, Sequence[str]] | Sequence[str],
    *,
    model: str = DEFAULT_MODEL,
    k: int = K,
    weighting: str = WEIGHTING,
    seed: int = SEED,
    cache: Store | str | Path | None = None,
    progress: bool = False,
    backend: str = DEFAULT_BACKEND,
    precision: str = DEFAULT_PRECISION,
) -> FamiliarityReport:
    """Familiarity of training labels against evaluation labels (METHOD.md section 2).

    Args:
        train: label -> mention count, or one label per mention (as `compute_metric` takes them).
        evaluation: benchmark name -> its labels, or one list (reported as `evaluation`).
        model, backend, precision: how labels are embedded (`EmbeddingSpec`).
        k, weighting, seed: how Familiarity is read (`MetricSpec`).
        cache: a store to cache label embeddings in as well (a path, created if missing, or an
            open `Store`); None: in memory. The per-user embedding cache serves every call:
            a second call on the same labels embeds nothing (`report.embedded.new == 0`).

    Labels are compared normalised, as everywhere.
    """
    metric = MetricSpec(k=k, weighting=weighting, seed=seed)  # checked before any reading
    embedding = EmbeddingSpec(canonical_name(model), backend, precision)
    table = LabelTable.from_counts(_train_counts(train))
    sets = _evaluation_sets(evaluation)

    emb = Embedder.of(embedding)
    if isinstance(cache, Store):
        opened: AbstractContextManager[Store] = nullcontext(cache)
    else:
        opened = Store(":memory:" if cache is None else cache)
    with opened as store:
        report = measure(store, table, sets, embedding=emb, metric=metric, progress=progress)
    return replace(report, embedded=emb.last_stats)


def _train_counts(train: Mapping[str, int] | Sequence[str]) -> Counter[str]:
    if isinstance(train, str):
        raise InvalidValue("train is one string: give a list of labels or label -> count")
    counts: Counter[str] = Counter()
    items = train.items() if isinstance(train, Mapping) else ((lab, 1) for lab in train)
    for label, n in items:
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InvalidValue(f"count of training label {label!r} is not an integer >= 0: {n!r}")
        counts[_label(label, "training")] += n
    if not +counts:
        raise InvalidValue("no training label has a mention: Familiarity is undefined")
    return +counts


def _evaluation_sets(
    evaluation: Mapping[str, Sequence[str]] | Sequence[str],
) -> dict[str, tuple[str, ...]]:
    if isinstance(evaluation, str):
        raise InvalidValue("evaluation is one string: give a list of labels or name -> labels")
    named = evaluation if isinstance(evaluation, Mapping) else {EVALUATION: evaluation}
    out = {}
    for name, labels in named.items():
        if isinstance(labels, str):
            raise InvalidValue(f"the labels of {name!r} are one string: give a list")
        out[str(name)] = tuple(dict.fromkeys(_label(z, "evaluation") for z in labels))
        if not out[str(name)]:
            raise InvalidValue(f"benchmark {name!r} has no labels")
    if not out:
        raise InvalidValue("no evaluation labels given")
    return out


def _label(raw: object, what: str) -> str:
    if not isinstance(raw, str) or not normalise_label(raw):
        raise InvalidValue(f"{what} label {raw!r} is not a non-empty string")
    return normalise_label(raw)
