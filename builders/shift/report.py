"""Label shift of a training label set against evaluation label sets: the one report shape.

    table = LabelTable.load(store, "pilener")                    labels + support counts
    m = similarity_matrix(store, embedder, table.labels, evals)  M[d, z], cached embeddings
    report = familiarity_report(m.T, table.mentions, table.labels, benchmarks, model=..., metric=...)

`FamiliarityReport` is what every part of the toolkit reports; its `to_dict()` is the JSON
shape of build.json, summary.json and `--json`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from builders.defaults import DEFAULT_PROTOCOL
from builders.deferred import np
from builders.errors import CannotBuild, InvalidValue
from builders.labels import paper_training_label, union_labels
from builders.shift.embedder import Embedder, cosine_clipped
from builders.shift.familiarity import exact_overlap, familiarity, row_chunks, summarise
from builders.shift.specs import EmbeddingSpec, MetricSpec

if TYPE_CHECKING:
    from builders.store import Store

#: Training labels listed per benchmark as the ones that make it familiar.
TOP_LABELS = 5


@dataclass
class LabelTable:
    """The training labels of a source with their support counts, sorted by label text;
    `members`: the stored labels a label stands for where the protocol spells them otherwise."""

    labels: list[str]
    mentions: np.ndarray
    members: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def load(cls, store: Store, source: str, protocol: str = DEFAULT_PROTOCOL) -> LabelTable:
        rows = store.label_mentions(source)
        if not rows:
            raise CannotBuild(f"source {source!r} has no mentions to score")
        if protocol == "paper":
            return cls._paper(rows, store.label_coarse(source))
        labels, mentions = zip(*rows, strict=True)
        return cls(list(labels), np.array(mentions, dtype=np.int64))

    @classmethod
    def _paper(cls, rows: list[tuple[str, int]], coarse: dict[str, str | None]) -> LabelTable:
        """Labels spelled as the authors' code spells them, counts summed per spelling."""
        merged: dict[str, int] = {}
        members: dict[str, list[str]] = {}
        for label, m in rows:
            key = paper_training_label(label, coarse.get(label))
            merged[key] = merged.get(key, 0) + m
            members.setdefault(key, []).append(label)
        keys = sorted(merged)
        return cls(
            keys,
            np.array([merged[k] for k in keys], dtype=np.int64),
            {k: v for k, v in members.items() if v != [k]},
        )

    def stored(self, labels: Sequence[str]) -> list[str]:
        """The stored labels behind `labels` (for the store's queries)."""
        return sorted({m for lab in labels for m in self.members.get(lab, [lab])})

    @classmethod
    def from_counts(cls, counts: Mapping[str, int]) -> LabelTable:
        """A table from label -> mention count (sentences unknown: counted as mentions)."""
        labels = sorted(counts)
        return cls(labels, np.array([counts[lab] for lab in labels], dtype=np.int64))


def similarity_matrix(
    store: Store,
    embedder: Embedder,
    train: Sequence[str],
    evals: Sequence[str],
    progress: bool = False,
    *,
    transposed: bool = False,
) -> tuple[np.ndarray, int]:
    """M[d, z] = max(cos, 0) for training labels d and evaluation labels z (float32; with
    `transposed`, M.T, the same bits), and how many labels had to be embedded. Equal texts
    have similarity exactly 1 (METHOD.md section 4).
    """
    emb = embedder
    vecs = emb.embed_cached(store, list(train) + list(evals), progress=progress)
    t, z = vecs[: len(train)], vecs[len(train) :]
    m = cosine_clipped(t, z, dtype=np.float32, transposed=transposed)
    del vecs, t, z
    set_exact_matches(m.T if transposed else m, train, evals)
    return m, emb.last_new


def set_exact_matches(m: np.ndarray, train: Sequence[str], evals: Sequence[str]) -> int:
    """Set M[d, z] = 1 wherever training label d is evaluation label z; returns how many."""
    where = {z: j for j, z in enumerate(evals)}
    hits = [(i, where[d]) for i, d in enumerate(train) if d in where]
    if hits:
        rows, cols = zip(*hits, strict=True)
        m[list(rows), list(cols)] = 1.0
    return len(hits)


@dataclass(frozen=True)
class TopLabel:
    """A training label close to a benchmark: its best similarity and its mentions."""

    label: str
    similarity: float
    mentions: int


@dataclass(frozen=True)
class BenchmarkFamiliarity:
    """One benchmark's share of a report."""

    familiarity: float
    summary: dict[str, Any]
    overlap: float
    labels: tuple[str, ...]
    top_training_labels: tuple[TopLabel, ...] = ()


@dataclass(frozen=True)
class FamiliarityReport:
    """Familiarity of one training label set (with counts) against named evaluation label
    sets: the union macro and the paper figure (METHOD.md section 2), the union's `Summary`
    and exact overlap, and per benchmark and per label."""

    model: str
    k: int
    weighting: str
    union_macro: float
    paper_figure: float
    summary: dict[str, Any]
    overlap: float
    per_benchmark: dict[str, BenchmarkFamiliarity]
    per_label: dict[str, float] = field(default_factory=dict)
    protocol: str = DEFAULT_PROTOCOL
    #: What embedding the labels took (`embedder.CacheStats`: new, from the store's cache,
    #: from the user cache), where the caller recorded it; not part of `to_dict`.
    embedded: Any = field(default=None, compare=False)

    def _holders(self) -> dict[str, list[str]]:
        """Every evaluation label's benchmarks, in benchmark order."""
        out: dict[str, list[str]] = {}
        for name, rep in self.per_benchmark.items():
            for z in dict.fromkeys(rep.labels):
                out.setdefault(z, []).append(name)
        return out

    def to_dict(self) -> dict[str, Any]:
        holders = self._holders()
        return {
            "model": self.model,
            "k": self.k,
            "weighting": self.weighting,
            "protocol": self.protocol,
            "union_macro": self.union_macro,
            "paper_figure": self.paper_figure,
            "summary": self.summary,
            "overlap": self.overlap,
            "per_benchmark": {
                name: {
                    **asdict(b),
                    "labels": list(b.labels),
                    "top_training_labels": [asdict(t) for t in b.top_training_labels],
                }
                for name, b in self.per_benchmark.items()
            },
            "per_label": [
                {"label": z, "familiarity": f, "benchmarks": holders.get(z, [])}
                for z, f in self.per_label.items()
            ],
        }


def familiarity_report(
    sims_zd: np.ndarray,
    counts: np.ndarray,
    train_labels: Sequence[str],
    benchmarks: Mapping[str, Sequence[str]],
    *,
    model: str,
    metric: MetricSpec = MetricSpec(),
    top: int = TOP_LABELS,
) -> FamiliarityReport:
    """The report of sims (Z, D) for z in `union_labels(benchmarks)` and the D training
    labels with their `counts` (labels counted 0 are left out), read as `metric` says."""
    evals = union_labels(benchmarks)
    if sims_zd.shape[0] != len(evals):
        raise InvalidValue(f"sims have {sims_zd.shape[0]} rows for {len(evals)} labels")
    keep = np.flatnonzero(counts > 0)
    kept = [train_labels[int(i)] for i in keep]
    if not kept:
        raise CannotBuild("the label set is empty: nothing to compute Familiarity on")
    # `familiarity` leaves the labels counted 0 out block by block, in the same tie order.
    k, weighting, seed = metric.k, metric.weighting, metric.seed
    f = familiarity(sims_zd, counts, k=k, weighting=weighting, labels=train_labels)
    index = {z: i for i, z in enumerate(evals)}
    train_set = set(kept)
    per_bench = {}
    for name, labels in benchmarks.items():
        rows = np.array([index[z] for z in labels])
        bench = summarise(f[rows], seed=seed)  # its mean is over sorted values: order-free
        best = column_max(sims_zd, rows, keep)
        per_bench[name] = BenchmarkFamiliarity(
            familiarity=bench.mean,
            summary=bench.to_dict(),
            overlap=exact_overlap(labels, train_set),
            labels=tuple(labels),
            top_training_labels=_top_labels(best, counts[keep], kept, top),
        )
    laid_end_to_end = [f[index[z]] for labels in benchmarks.values() for z in labels]
    union = summarise(f, seed=seed)
    return FamiliarityReport(
        model=model,
        k=k,
        weighting=weighting,
        union_macro=union.mean,
        paper_figure=float(np.sort(laid_end_to_end).mean()),
        summary=union.to_dict(),
        overlap=exact_overlap(evals, train_set),
        per_benchmark=per_bench,
        per_label={z: float(v) for z, v in zip(evals, f, strict=True)},
        protocol=metric.protocol,
    )


def column_max(sims: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """max over `rows` of sims[rows][:, cols], shape (len(cols),), read a block of rows at a
    time (`familiarity.row_chunks`) instead of copying sims[rows]."""
    best = None
    for lo, hi in row_chunks(len(rows), sims.shape[1]):
        block = sims[rows[lo:hi]][:, cols].max(axis=0)
        best = block if best is None else np.maximum(best, block)
    if best is None:
        raise InvalidValue("a benchmark without labels has no closest training labels")
    return best


def _top_labels(
    best: np.ndarray, counts: np.ndarray, labels: list[str], top: int
) -> tuple[TopLabel, ...]:
    """The training labels that weigh most: closeness to the benchmark (`best`, each label's
    highest similarity to its labels) times log support."""
    order = np.lexsort((np.arange(best.size), -(best * np.log1p(counts))))[:top]
    return tuple(TopLabel(labels[i], float(best[i]), int(counts[i])) for i in order)


def measure(
    store: Store,
    table: LabelTable,
    benchmarks: Mapping[str, Sequence[str]],
    *,
    embedding: EmbeddingSpec | Embedder = EmbeddingSpec(),
    metric: MetricSpec = MetricSpec(),
    progress: bool = False,
) -> FamiliarityReport:
    """Embed (through the caches) and report: the whole walk for one label table."""
    emb = Embedder.of(embedding)
    sims_zd, _ = similarity_matrix(
        store, emb, table.labels, union_labels(benchmarks), progress, transposed=True
    )
    return familiarity_report(
        sims_zd, table.mentions, table.labels, benchmarks, model=emb.model_name, metric=metric
    )
