"""Leakage beyond label names: benchmark sentences and mentions inside a training corpus.

    found = scan(store, "pilener", resolve("all", store=store), n=13, embedding=EmbeddingSpec(...))
    report = found.report()                      the whole corpus
    report = found.report(labels=selected)       a label subset (a sentence is in it when it has
                                                 a mention of a selected label)
    found.overlapping_training_ids()             what `--decontaminate` drops

The figures of METHOD.md section 7, per benchmark and over the union of the benchmarks'
sentences; every mention counts, `misc` ones included (their label is "else"). The SQL is the
store's (`builders.store.overlap`); this module adds the figures.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from builders.defaults import FAMILIAR_SIM, NGRAM
from builders.deferred import np, pa
from builders.errors import InvalidValue
from builders.shift.benchmarks import EvalSet, sentence_sources
from builders.shift.embedder import Embedder
from builders.shift.report import similarity_matrix
from builders.shift.scan_cache import ScanCache, scan_key
from builders.shift.specs import EmbeddingSpec

if TYPE_CHECKING:
    import polars as pl

    from builders.store import Store
    from builders.store.overlap import OverlapTables


@dataclass(frozen=True)
class LeakageReport:
    """Leakage of one training corpus (or subset) into the benchmarks' evaluation data: the
    figures (`_figures`) per benchmark and over their union, and why some were not scanned."""

    source: str
    n: int
    threshold: float
    model: str
    per_benchmark: dict[str, dict[str, Any]]
    union: dict[str, Any]
    not_scanned: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {("familiar_threshold" if k == "threshold" else k): v for k, v in vars(self).items()}


@dataclass
class LeakageScan:
    """What one scan of a corpus found; `report()` turns it into figures for any label subset."""

    source: str
    n: int
    threshold: float
    model: str
    sentences: pl.DataFrame  # benchmark, sentence_id, n_tokens
    pairs: pl.DataFrame  # see `OverlapTables.pairs`
    #: `OverlapTables.mentions` with each tag's eval_label
    mentions: pl.DataFrame
    #: `OverlapTables.surface_labels`: surface, label (the training labels of each surface)
    surface_labels: pl.DataFrame
    #: eval_label, label: the training labels (of `surface_labels`) familiar with each
    #: evaluation label (the label itself, or sim >= threshold)
    familiar: pl.DataFrame
    not_scanned: dict[str, str]

    def report(
        self, labels: Collection[str] | None = None, benchmarks: Sequence[str] | None = None
    ) -> LeakageReport:
        """Figures of the corpus, or of its subset of sentences with a mention of `labels`
        (only those mentions kept, as `build-splits` cuts), for all or some benchmarks."""
        import polars as pl

        sent, pairs, men = self._frames(labels, benchmarks)
        names = list(dict.fromkeys(sent["benchmark"].to_list()))
        per = {}
        for b in names:
            keep = pl.col("benchmark") == b
            per[b] = _figures(sent.filter(keep), pairs.filter(keep), men.filter(keep), self.n)
        union = _figures(
            sent.unique("sentence_id", keep="first", maintain_order=True),
            pairs.with_columns(benchmark=pl.lit("union")),
            men.unique(["sentence_id", "start", "stop", "label"], maintain_order=True),
            self.n,
        )
        skip = {k: v for k, v in self.not_scanned.items() if benchmarks is None or k in benchmarks}
        return LeakageReport(self.source, self.n, self.threshold, self.model, per, union, skip)

    def overlapping_training_ids(self, benchmarks: Sequence[str] | None = None) -> list[str]:
        """Training sentences with an exact or n-gram overlap (what decontamination drops)."""
        import polars as pl

        pairs = self.pairs
        if benchmarks is not None:
            pairs = pairs.filter(pl.col("benchmark").is_in(list(benchmarks)))
        return sorted(set(pairs["training_sentence_id"].to_list()))

    def _frames(
        self, labels: Collection[str] | None, benchmarks: Sequence[str] | None
    ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """The scan restricted to some benchmarks and to a training label subset."""
        import polars as pl

        sent, pairs, men = self.sentences, self.pairs, self.mentions
        if benchmarks is not None:
            keep = pl.col("benchmark").is_in(list(benchmarks))
            sent, pairs, men = sent.filter(keep), pairs.filter(keep), men.filter(keep)
        surfaces = self.surface_labels
        if labels is not None:
            chosen = list(labels)
            pairs = pairs.filter(
                pl.col("training_labels").list.eval(pl.element().is_in(chosen)).list.any()
            )
            kept = pl.DataFrame({"label": chosen}, schema={"label": pl.String})
            surfaces = surfaces.join(kept, on="label", how="semi")
        return sent, pairs, _seen(men, surfaces, self.familiar)

    def pairs_table(self) -> pa.Table:
        """The overlapping (benchmark sentence, training sentence) pairs, for inspection:
        whether they are equal, and how many of the benchmark sentence's n-grams they share
        (a scan made with `texts=True`)."""
        import polars as pl

        if "training_text" not in self.pairs.columns:
            raise InvalidValue("this scan kept no sentence texts: scan(..., texts=True)")
        return self.pairs.select(
            "benchmark",
            "benchmark_sentence_id",
            "training_sentence_id",
            "exact",
            pl.col("positions").list.len().alias("shared_ngrams"),
            "benchmark_text",
            "training_text",
        ).to_arrow()


def scan(
    store: Store,
    source: str,
    sets: Sequence[EvalSet],
    *,
    n: int = NGRAM,
    embedding: EmbeddingSpec | Embedder = EmbeddingSpec(),
    threshold: float = FAMILIAR_SIM,
    on_note: Callable[[str], None] | None = None,
    texts: bool = True,
) -> LeakageScan:
    """Scan `source` for the evaluation sentences and mentions of `sets`.

    `embedding` (a spec, or an `Embedder` a build shares) embeds the labels compared with
    `threshold`; `texts` keeps the overlapping pairs' sentences for `pairs_table`. A packaged
    benchmark missing from the store is ingested from its local copy (`$LABELSHIFT_DATA`)
    first; sets without sentences are listed in `not_scanned` with why.
    """
    import polars as pl

    if n < 1:
        raise InvalidValue(f"the n-gram length must be >= 1, got {n}")
    emb = Embedder.of(embedding)  # the model loads only if a familiar label is looked for
    model = emb.model_name  # a local folder's canonical name is no path
    store.require_source(source)
    rows, skipped = sentence_sources(store, sets, on_note or (lambda s: None))
    query = pa.table({k: pa.array([r[i] for r in rows], pa.string()) for i, k in enumerate(_QUERY)})
    tables = _overlap_tables(store, source, query, n, texts, on_note or (lambda s: None))
    sent, pairs, men, surfaces = (
        pl.DataFrame(t)
        for t in (tables.sentences, tables.pairs, tables.mentions, tables.surface_labels)
    )
    men = _eval_labels(men, {s.name: s for s in sets})
    familiar = _familiar_pairs(store, emb, surfaces, men, threshold)
    return LeakageScan(source, n, threshold, model, sent, pairs, men, surfaces, familiar, skipped)


def _overlap_tables(
    store: Store, source: str, query: pa.Table, n: int, texts: bool, note: Callable[[str], None]
) -> OverlapTables:
    """The scan's tables: from the scan cache when the corpus and the benchmarks' splits are
    the ones a cached scan read (`builders.shift.scan_cache`), else scanned (and cached)."""

    inputs = store.scan_inputs(source, query)
    cache = ScanCache.default() if inputs is not None else None
    if cache is None or inputs is None:
        return store.overlap_tables(source, query, n, texts=texts)
    description = {**inputs, "n": n, "texts": texts}
    key = scan_key(description)
    tables = cache.get(key)
    if tables is not None:
        note(f"leakage: {source} unchanged since its last scan: read from {cache.root / key}")
        return tables
    tables = store.overlap_tables(source, query, n, texts=texts)
    cache.put(key, description, tables)
    return tables


_QUERY = ("benchmark", "source", "split")


#: Training labels compared with the evaluation labels at a time in `_familiar_pairs`: bounds
#: the vectors held (100 MB of 384-d float32 vectors).
LABEL_CHUNK = 65_536


def _familiar_pairs(
    store: Store,
    emb: Embedder,
    surfaces: pl.DataFrame,
    men: pl.DataFrame,
    threshold: float,
) -> pl.DataFrame:
    """(eval_label, label): each evaluation label with itself and the seen surfaces' training
    labels with sim >= threshold to it, `LABEL_CHUNK` training labels at a time."""
    import polars as pl

    train = surfaces["label"].unique().sort()
    evals = men["eval_label"].unique().sort()
    pairs = [(z, z) for z in evals]
    if len(train):
        for first in range(0, len(train), LABEL_CHUNK):
            part = train.slice(first, LABEL_CHUNK)
            m, _ = similarity_matrix(store, emb, part.to_list(), evals.to_list())
            rows, cols = np.nonzero(m >= threshold)  # (training labels, eval labels)
            pairs += zip(evals.gather(cols).to_list(), part.gather(rows).to_list(), strict=True)
    return pl.DataFrame(
        pairs, schema={"eval_label": pl.String, "label": pl.String}, orient="row"
    ).unique(maintain_order=True)


def _seen(men: pl.DataFrame, surfaces: pl.DataFrame, familiar: pl.DataFrame) -> pl.DataFrame:
    """The mentions with `seen` (their surface carries one of `surfaces`' labels) and
    `familiar` (one of those is familiar with the mention's eval_label)."""
    import polars as pl

    seen = surfaces.select("surface").unique().with_columns(seen=pl.lit(True))
    fam = (
        surfaces.join(familiar, on="label")
        .select("surface", "eval_label")
        .unique()
        .with_columns(familiar=pl.lit(True))
    )
    return (
        men.join(seen, on="surface", how="left", maintain_order="left")
        .join(fam, on=["surface", "eval_label"], how="left", maintain_order="left")
        .with_columns(pl.col("seen", "familiar").fill_null(False))
    )


def _eval_labels(men: pl.DataFrame, sets: dict[str, EvalSet]) -> pl.DataFrame:
    """Each mention's tag as its benchmark's evaluation label (`EvalSet.label_of`)."""
    import polars as pl

    keys = men.select("benchmark", "raw_label", "label").unique(maintain_order=True)
    keys = keys.with_columns(
        eval_label=pl.Series(
            [sets[b].label_of(r, s) for b, r, s in keys.iter_rows()], dtype=pl.String
        )
    )
    return men.join(keys, on=["benchmark", "raw_label", "label"], how="left", maintain_order="left")


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _figures(sent: pl.DataFrame, pairs: pl.DataFrame, men: pl.DataFrame, n: int) -> dict[str, Any]:
    """One benchmark's (or the union's) figures, in this order."""
    import polars as pl

    found = pairs.group_by("benchmark_sentence_id").agg(
        exact=pl.col("exact").any(),
        found=pl.col("positions").explode().drop_nulls().n_unique(),
    )
    per = sent.join(
        found, left_on="sentence_id", right_on="benchmark_sentence_id", how="left"
    ).with_columns(pl.col("exact").fill_null(False), pl.col("found").fill_null(0))
    eligible = per.filter(pl.col("n_tokens") >= n)
    hit = eligible.filter(pl.col("found") > 0)
    containment = hit["found"] / (hit["n_tokens"] - n + 1)
    seen, fam = int(men["seen"].sum()), int(men["familiar"].sum())
    exact = int(per["exact"].sum())
    return {
        "sentences": per.height,
        "exact_sentences": exact,
        "exact_share": _share(exact, per.height),
        "ngram_eligible_sentences": eligible.height,
        "ngram_sentences": hit.height,
        "ngram_share": _share(hit.height, eligible.height),
        "containment_mean": float(containment.mean()) if hit.height else None,  # type: ignore[arg-type]
        "containment_max": float(containment.max()) if hit.height else None,  # type: ignore[arg-type]
        "mentions": men.height,
        "seen_mentions": seen,
        "seen_share": _share(seen, men.height),
        "unseen_mentions": men.height - seen,
        "seen_familiar_mentions": fam,
        "seen_familiar_share": _share(fam, seen),
        "training_sentences_exact": pairs.filter("exact")["training_sentence_id"].n_unique(),
        "training_sentences_overlapping": pairs["training_sentence_id"].n_unique(),
    }
