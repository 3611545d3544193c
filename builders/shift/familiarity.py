"""Familiarity of evaluation labels with a training corpus, in closed form (METHOD.md section 2).

Also here: the VB-Score style summary of per-label values (mean, sigma, VB_alpha, bootstrap CI)
and the exact-overlap share.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from builders.deferred import np
from builders.errors import InvalidValue

WEIGHTINGS = ("zipf", "linear", "unweighted")


def familiarity(
    sims: np.ndarray,
    counts: np.ndarray,
    k: int = 1000,
    weighting: str = "zipf",
    labels: Sequence[str] | None = None,
) -> np.ndarray:
    """F(z) of every evaluation label, shape (Z,) float64.

    Args:
        sims: shape (Z, D), sim(z, d); negative values are clipped to 0.
        counts: shape (D,), integer support counts c_d >= 0; labels with c_d == 0 are ignored.
        k, weighting: K and `zipf`, `linear` or `unweighted` (divided by K, not N).
        labels: the D training label texts, which break ties in s_d (else the column index);
            the tie order fixes only the summation order.

    Raises:
        ValueError: on k < 1, an unknown weighting, mismatched shapes, negative, non-integer or
            all-zero counts, or NaN similarities.
    """
    s, c, tie = _checked(sims, counts, k, weighting, labels)
    keep = c > 0
    cols = None if keep.all() else np.flatnonzero(keep)
    if cols is not None:
        c, tie = c[cols], tie[cols]
    out = np.empty(s.shape[0], dtype=np.float64)
    for lo, hi in row_chunks(s.shape[0], s.shape[1]):
        out[lo:hi] = closed_form(_clipped(s[lo:hi], cols), c, tie, k, weighting)
    return out


#: Elements (evaluation labels x training labels) that `closed_form` works on at once: its
#: temporaries take about 100 bytes an element (~50 MB), whatever the number of labels. Rows
#: are computed independently, so the chunking changes no bit.
CHUNK_ELEMENTS = 1 << 19


def row_chunks(n_rows: int, n_cols: int) -> list[tuple[int, int]]:
    """(start, stop) of consecutive row blocks of at most `CHUNK_ELEMENTS` elements (at least
    one row each)."""
    step = max(1, CHUNK_ELEMENTS // max(n_cols, 1))
    return [(lo, min(lo + step, n_rows)) for lo in range(0, n_rows, step)]


def closed_form(
    s: np.ndarray, c: np.ndarray, tie: np.ndarray, k: int, weighting: str
) -> np.ndarray:
    """`familiarity` on checked inputs (sims in [0, 1], positive int64 counts, `tie` each
    label's tie-break rank), for callers that evaluate many label sets of one matrix."""
    w = cumulative_weights(k, weighting)
    n_kept = int(min(k, int(c.sum())))
    norm = float(k) if weighting == "unweighted" else w[n_kept]
    out = np.empty(s.shape[0], dtype=np.float64)
    for lo, hi in row_chunks(s.shape[0], s.shape[1]):
        out[lo:hi] = _weighted_sums(s[lo:hi], c, tie, k, w) / norm
    return out


def _weighted_sums(
    s: np.ndarray, c: np.ndarray, tie: np.ndarray, k: int, w: np.ndarray
) -> np.ndarray:
    """Each row's sum of weighted kept values (the closed form before normalising)."""
    n_labels = s.shape[1]

    # Every label holds >= 1 position, so only a row's top min(K, D) labels can reach the first
    # K positions. Partition once, then sort just those candidates.
    kk = min(k, n_labels)
    if kk == n_labels:
        idx = np.broadcast_to(np.arange(n_labels), s.shape)
    else:
        idx = np.argpartition(s, n_labels - kk, axis=1)[:, n_labels - kk :]
    cand = np.take_along_axis(s, idx, axis=1)
    v_k = cand.min(axis=1)  # the kk-th largest value of each row, in the input dtype

    # Labels strictly above v_k are placed one by one, in (-s, tie) order. All labels equal to
    # v_k (possibly many more than the candidates, e.g. clipped zeros) form one block whose
    # contribution v_k * (W(end) - W(start)) does not depend on their order.
    strict = cand > v_k[:, None]
    vals = cand.astype(np.float64)
    order = np.lexsort((tie[idx], -vals), axis=-1)
    idx = np.take_along_axis(idx, order, axis=1)
    vals = np.take_along_axis(vals, order, axis=1)
    strict = np.take_along_axis(strict, order, axis=1)

    placed = np.where(strict, c[idx], 0)
    end = np.cumsum(placed, axis=1)
    start = end - placed
    contrib = (vals * (w[np.minimum(end, k)] - w[np.minimum(start, k)])).sum(axis=1)

    n_strict = end[:, -1]
    n_tied = ((s == v_k[:, None]) @ c.astype(np.float64)).astype(np.int64)
    first = np.minimum(n_strict, k)
    last = np.minimum(n_strict + n_tied, k)
    contrib += v_k.astype(np.float64) * (w[last] - w[first])
    return contrib


def familiarity_reference(
    sims: np.ndarray,
    counts: np.ndarray,
    k: int = 1000,
    weighting: str = "zipf",
    labels: Sequence[str] | None = None,
) -> np.ndarray:
    """Literal Familiarity (every s_d repeated c_d times, sorted, K kept): `familiarity`'s
    baseline in tests and `scripts/bench_familiarity.py`; slow on large corpora."""
    s, c, tie = _checked(sims, counts, k, weighting, labels)
    s = _clipped(s)
    keep = c > 0
    s, c, tie = s[:, keep], c[keep], tie[keep]
    out = np.zeros(s.shape[0], dtype=np.float64)
    for i, row in enumerate(s):
        row = row.astype(np.float64)
        order = np.lexsort((tie, -row))
        values = np.repeat(row[order], c[order])[:k]
        pos = np.arange(1, values.size + 1, dtype=np.float64)
        if weighting == "unweighted":
            out[i] = values.sum() / k
            continue
        weights = 1.0 / pos if weighting == "zipf" else (k - pos + 1) / k
        out[i] = (values * weights).sum() / weights.sum()
    return out


def _clipped(s: np.ndarray, cols: np.ndarray | None = None) -> np.ndarray:
    """sims (or a block of their rows) refused if NaN, its columns `cols` (all: None) clipped
    below at 0, in a copy."""
    if np.isnan(s).any():
        raise InvalidValue("sims contains NaN")
    return np.maximum(s if cols is None else s[:, cols], 0)


def _checked(
    sims: np.ndarray,
    counts: np.ndarray,
    k: int,
    weighting: str,
    labels: Sequence[str] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sims as floats, int64 counts, tie-break ranks), checked but for the values of sims."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise InvalidValue(f"k must be an integer >= 1, got {k!r}")
    if weighting not in WEIGHTINGS:
        raise InvalidValue(f"unknown weighting {weighting!r}. Valid: {', '.join(WEIGHTINGS)}")
    s = np.asarray(sims)
    if s.ndim != 2:
        raise InvalidValue(f"sims must have shape (Z, D), got shape {s.shape}")
    if not np.issubdtype(s.dtype, np.floating):
        s = s.astype(np.float64)
    c = np.asarray(counts)
    if c.ndim != 1 or c.shape[0] != s.shape[1]:
        raise InvalidValue(
            f"counts must have shape (D,) = ({s.shape[1]},) to match sims {s.shape}, "
            f"got shape {c.shape}"
        )
    if not np.issubdtype(c.dtype, np.integer) and not np.array_equal(c, np.floor(c)):
        raise InvalidValue("counts must be integer-valued")
    c = c.astype(np.int64)
    if (c < 0).any():
        bad = int(np.flatnonzero(c < 0)[0])
        raise InvalidValue(f"counts must be >= 0, got {c[bad]} at index {bad}")
    if c.sum() == 0:
        raise InvalidValue("no training label has a positive count; Familiarity is undefined")
    return s, c, _tie_ranks(labels, s.shape[1])


def _tie_ranks(labels: Sequence[str] | None, n: int) -> np.ndarray:
    """Each label's place in text order (its index without labels): the tie-break."""
    if labels is None:
        return np.arange(n)
    if len(labels) != n:
        raise InvalidValue(f"labels must have length D = {n} to match sims, got {len(labels)}")
    text = np.asarray(list(labels), dtype=str)
    tie = np.empty(len(text), dtype=np.int64)
    tie[np.argsort(text, kind="stable")] = np.arange(len(text))
    return tie


def cumulative_weights(k: int, weighting: str) -> np.ndarray:
    """W[n] = sum of the weights of positions 1..n, for n = 0..K (W[0] = 0)."""
    n = np.arange(k + 1, dtype=np.float64)
    if weighting == "zipf":
        w = np.zeros(k + 1)
        np.cumsum(1.0 / n[1:], out=w[1:])
        return w
    if weighting == "linear":
        return (n * (k + 1) - n * (n + 1) / 2) / k
    return n


@dataclass(frozen=True)
class Summary:
    """VB-Score summary of per-label values: mean ES, population sigma, VB_alpha = ES -
    alpha * sigma by alpha, and the 95% bootstrap interval of the mean (METHOD.md section 2)."""

    mean: float
    std: float
    vb: dict[float, float] = field(hash=False)
    ci_low: float
    ci_high: float
    n: int
    n_boot: int
    seed: int

    def to_dict(self) -> dict[str, object]:
        """JSON-ready; VB keys become `vb_<alpha>` (e.g. `vb_0.5`)."""
        vb = {f"vb_{alpha:g}": value for alpha, value in self.vb.items()}
        return {
            "n": self.n,
            "mean": self.mean,
            "std": self.std,
            **vb,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "n_boot": self.n_boot,
            "seed": self.seed,
        }


def summarise(
    per_label: np.ndarray,
    alphas: Iterable[float] = (0.0, 0.5, 1.0),
    n_boot: int = 1000,
    seed: int = 0,
) -> Summary:
    """The `Summary` of per-label values; the CI is the 2.5 and 97.5 percentiles of `n_boot`
    seeded resample means. Values are sorted first, so their order changes no bit.

    Raises:
        ValueError: on an empty or non-1-D input, NaN values, or n_boot < 1.
    """
    x = np.asarray(per_label, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise InvalidValue(f"per_label must be a non-empty 1-D array, got shape {x.shape}")
    if np.isnan(x).any():
        raise InvalidValue("per_label contains NaN")
    if n_boot < 1:
        raise InvalidValue(f"n_boot must be >= 1, got {n_boot}")
    x = np.sort(x)
    mean = float(x.mean())
    std = float(x.std(ddof=0))
    vb = {float(a): mean - float(a) * std for a in alphas}
    lo, hi = np.percentile(bootstrap_means(x, n_boot, seed), [2.5, 97.5])
    return Summary(mean, std, vb, float(lo), float(hi), int(x.size), int(n_boot), int(seed))


def bootstrap_means(x: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """The means of `n_boot` resamples of `x`, drawn as one (n_boot, len(x)) draw of
    `default_rng(seed)` would be, in blocks of replicas (the stream is the same however cut)."""
    rng = np.random.default_rng(seed)
    reps = np.empty(n_boot, dtype=np.float64)
    for lo, hi in row_chunks(n_boot, x.size):
        reps[lo:hi] = x[rng.integers(0, x.size, size=(hi - lo, x.size))].mean(axis=1)
    return reps


def exact_overlap(eval_labels: Iterable[str], train_labels: Iterable[str]) -> float:
    """Share of distinct (normalised) evaluation labels that are training labels; ValueError
    when there are none."""
    evals = set(eval_labels)
    if not evals:
        raise InvalidValue("no evaluation labels; exact overlap is undefined")
    train = set(train_labels)
    return len(evals & train) / len(evals)
