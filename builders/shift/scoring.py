"""Scoring training labels against evaluation labels, and quantile selection (METHOD.md section 3).

M has shape (D, Z) with M[d, z] = sim(d, z); each training label gets a `max` or `entropy`
score, and the label-shift levels are cut at quantiles of the scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from builders.defaults import PAPER_ENTROPY_EPSILON, SCORES, TIE_TOLERANCE
from builders.deferred import np
from builders.errors import InvalidValue

#: Default quantiles (low level, high level) per source profile and strategy, paper Appendix B.
QUANTILES: dict[str, dict[str, tuple[float, float]]] = {
    "pilener": {"max": (0.99, 0.05), "entropy": (0.01, 0.95)},
    "nuner": {"max": (0.995, 0.005), "entropy": (0.005, 0.995)},
}
#: Medium label shift, every source and strategy: q(0.495) <= score <= q(0.505).
MEDIUM_QUANTILES = (0.495, 0.505)
#: Sources with at least this many training labels use the NuNER profile, others PileNER.
NUNER_MIN_LABELS = 50_000

#: Which side of its quantile each level keeps: "ge" = score >= q, "le" = score <= q.
_SIDES = {
    "max": {"low": "ge", "high": "le"},
    "entropy": {"low": "le", "high": "ge"},
}


def max_scores(M: np.ndarray) -> np.ndarray:
    """m_d = max_z M[d, z]; shape (D,). High = close to some evaluation label."""
    m = _check_matrix(M)
    return m.max(axis=1).astype(np.float64)


def entropy_scores(
    M: np.ndarray, temperature: float = 0.01, chunk_rows: int = 16_384
) -> np.ndarray:
    """e_d = -sum_z p_dz ln p_dz with p_d = softmax_z(M[d] / T); shape (D,).

    A float64 log-softmax, `chunk_rows` rows at a time. Its normaliser is log1p of the mass
    outside the top label, so near-one-hot rows (e ~ 1e-19 at T = 0.01) keep their relative
    precision (a plain log of the sum rounds that mass away below about 1e-16).
    """
    m = _check_matrix(M)
    if not temperature > 0:
        raise InvalidValue(f"temperature must be > 0, got {temperature!r}")
    if chunk_rows < 1:
        raise InvalidValue(f"chunk_rows must be >= 1, got {chunk_rows}")
    out = np.empty(m.shape[0], dtype=np.float64)
    for lo in range(0, m.shape[0], chunk_rows):
        x = m[lo : lo + chunk_rows].astype(np.float64) / temperature
        top = x.argmax(axis=1)
        rows = np.arange(x.shape[0])
        x -= x[rows, top][:, None]
        ex = np.exp(x)
        ex[rows, top] = 0.0  # the mass outside the top label; the top label's own is 1
        logp = x - np.log1p(ex.sum(axis=1, keepdims=True))
        out[lo : lo + chunk_rows] = -(np.exp(logp) * logp).sum(axis=1)
    return out


def _check_matrix(M: np.ndarray) -> np.ndarray:
    m = np.asarray(M)
    if m.ndim != 2 or m.shape[1] == 0:
        raise InvalidValue(f"M must have shape (D, Z) with Z >= 1, got shape {m.shape}")
    if np.isnan(m).any():
        raise InvalidValue("M contains NaN")
    return m


@dataclass(frozen=True)
class LevelRule:
    """One level's cut: keep scores `side` the quantile(s); "between" keeps q0 <= s <= q1."""

    side: str
    quantiles: tuple[float, ...]


@dataclass(frozen=True)
class SelectionRule:
    """Quantiles of the three label-shift levels of one strategy (which fixes each level's
    side); `profile` names the defaults' profile, "custom" after overrides."""

    strategy: str
    low: float
    high: float
    medium: tuple[float, float] = MEDIUM_QUANTILES
    profile: str = "custom"

    def __post_init__(self) -> None:
        _check_strategy(self.strategy)
        _check_quantile("low", self.low)
        _check_quantile("high", self.high)
        if len(self.medium) != 2:
            raise InvalidValue(f"medium must be (lower, upper) quantiles, got {self.medium!r}")
        _check_quantile("medium lower", self.medium[0])
        _check_quantile("medium upper", self.medium[1])
        if self.medium[0] > self.medium[1]:
            raise InvalidValue(
                f"medium lower quantile must be <= upper, got {self.medium[0]} > {self.medium[1]}"
            )

    def with_overrides(
        self,
        low: float | None = None,
        high: float | None = None,
        medium: tuple[float, float] | None = None,
    ) -> SelectionRule:
        """A copy with the given quantiles replaced (validated); profile becomes "custom"."""
        given = {"low": low, "high": high, "medium": None if medium is None else tuple(medium)}
        changes = {name: q for name, q in given.items() if q is not None}
        if not changes:
            return self
        return replace(self, profile="custom", **changes)  # type: ignore[arg-type]

    def levels(self) -> dict[str, LevelRule]:
        """Side and quantile(s) of each level, e.g. max low = LevelRule("ge", (0.99,))."""
        sides = _SIDES[self.strategy]
        return {
            "low": LevelRule(sides["low"], (self.low,)),
            "medium": LevelRule("between", tuple(self.medium)),
            "high": LevelRule(sides["high"], (self.high,)),
        }


def _check_strategy(strategy: str) -> None:
    if strategy not in SCORES:
        raise InvalidValue(f"unknown strategy {strategy!r}. Valid: {', '.join(SCORES)}")


def _check_quantile(name: str, q: float) -> None:
    if isinstance(q, bool) or not isinstance(q, int | float | np.floating) or not 0 <= q <= 1:
        raise InvalidValue(f"{name} quantile must be in [0, 1], got {q!r}")


def default_rule(profile: str, strategy: str) -> SelectionRule:
    """The paper's rule for a profile ("pilener" or "nuner") and a strategy."""
    if profile not in QUANTILES:
        raise InvalidValue(f"unknown profile {profile!r}. Valid: {', '.join(QUANTILES)}")
    _check_strategy(strategy)
    low, high = QUANTILES[profile][strategy]
    return SelectionRule(strategy, low, high, MEDIUM_QUANTILES, profile)


def profile_for(n_labels: int) -> str:
    """PileNER profile below `NUNER_MIN_LABELS` training labels, NuNER at or above."""
    if n_labels < 0:
        raise InvalidValue(f"n_labels must be >= 0, got {n_labels}")
    return "nuner" if n_labels >= NUNER_MIN_LABELS else "pilener"


@dataclass(frozen=True, eq=False)
class SelectionResult:
    """The training labels one level keeps (`mask`), and the cut that chose them: the
    quantiles asked for, the thresholds np.quantile gave, and `tied`, the labels kept because
    they tie (within the strategy's tolerance) with one the quantile rule keeps."""

    level: str
    side: str
    quantiles: tuple[float, ...]
    thresholds: tuple[float, ...]
    mask: np.ndarray
    tied: int = 0

    @property
    def indices(self) -> np.ndarray:
        return np.flatnonzero(self.mask)

    @property
    def count(self) -> int:
        return int(self.mask.sum())

    def to_dict(self) -> dict[str, object]:
        """The cut for a dataset card (no mask)."""
        return {
            "level": self.level,
            "side": self.side,
            "quantiles": list(self.quantiles),
            "thresholds": list(self.thresholds),
            "count": self.count,
            "tied": self.tied,
        }


def tolerance(strategy: str, value: float) -> float:
    """How far from `value` a score still ties with it (`defaults.TIE_TOLERANCE`)."""
    kind, tol = TIE_TOLERANCE[strategy]
    return tol if kind == "absolute" else tol * abs(value)


def _tie_extend(s: np.ndarray, mask: np.ndarray, strategy: str, side: str) -> np.ndarray:
    """The cut widened to every label within tolerance of its weakest kept score(s): the
    lowest for `ge`, the highest for `le`, both ends for `between`."""
    if not mask.any():
        return mask
    kept = s[mask]
    ends = {"ge": [kept.min()], "le": [kept.max()], "between": [kept.min(), kept.max()]}[side]
    out = mask.copy()
    for b in ends:
        out |= np.abs(s - b) <= tolerance(strategy, float(b))
    return out


def select(
    scores: np.ndarray, strategy: str, rule: SelectionRule | None = None
) -> dict[str, SelectionResult]:
    """Cut the training labels into low / medium / high label-shift sets by score quantiles
    (`SelectionRule.levels`; default: the paper's rule for `profile_for(len(scores))`), each
    cut keeping its tie groups whole (`_tie_extend`).

    Raises:
        ValueError: on an unknown strategy, a rule for another strategy, or empty, non-1-D or
            NaN scores.
    """
    _check_strategy(strategy)
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or s.size == 0:
        raise InvalidValue(f"scores must be a non-empty 1-D array, got shape {s.shape}")
    if np.isnan(s).any():
        raise InvalidValue("scores contains NaN")
    if rule is None:
        rule = default_rule(profile_for(s.size), strategy)
    elif rule.strategy != strategy:
        raise InvalidValue(f"rule is for strategy {rule.strategy!r}, not {strategy!r}")
    out: dict[str, SelectionResult] = {}
    for level, lr in rule.levels().items():
        t, mask, wide = _cut(s, lr, strategy)
        tied = int(wide.sum() - mask.sum())
        out[level] = SelectionResult(level, lr.side, lr.quantiles, t, wide, tied)
    return out


def _cut(
    s: np.ndarray, lr: LevelRule, strategy: str
) -> tuple[tuple[float, ...], np.ndarray, np.ndarray]:
    """One level's quantile thresholds, the quantile rule's mask, and that mask widened to
    whole tie groups."""
    t = tuple(float(v) for v in np.quantile(s, lr.quantiles, method="linear"))
    if lr.side == "ge":
        mask = s >= t[0]
    elif lr.side == "le":
        mask = s <= t[0]
    else:
        mask = (s >= t[0]) & (s <= t[1])
    return t, mask, _tie_extend(s, mask, strategy, lr.side)


# ------------------------------------------------------------------ the paper's protocol
def paper_scores(
    M: np.ndarray, groups: Sequence[np.ndarray], strategy: str, temperature: float
) -> np.ndarray:
    """Scores per (training label, benchmark), shape (D, B), as the authors' code has them
    (METHOD.md section 3: their entropy in float32 with a 1e-10 epsilon)."""
    m = _check_matrix(M)
    _check_strategy(strategy)
    out = np.empty((m.shape[0], len(groups)), dtype=np.float64)
    eps, t = np.float32(PAPER_ENTROPY_EPSILON), np.float32(temperature)
    for b, cols in enumerate(groups):
        sims = m[:, cols].astype(np.float32)
        if strategy == "max":
            out[:, b] = sims.max(axis=1)
            continue
        x = sims / t
        x -= x.max(axis=1, keepdims=True)
        p = np.exp(x)
        p /= p.sum(axis=1, keepdims=True)
        out[:, b] = -(p * np.log(p + eps)).sum(axis=1, dtype=np.float32)
    return out


def select_pooled(
    rows: np.ndarray, strategy: str, rule: SelectionRule
) -> dict[str, SelectionResult]:
    """The authors' selection: thresholds over every (label, benchmark) score pooled, a label
    in a level if it qualifies for any benchmark; tie groups kept whole as in `select`."""
    r = np.asarray(rows, dtype=np.float64)
    if r.ndim != 2 or r.size == 0 or np.isnan(r).any():
        raise InvalidValue(f"rows must be a non-empty (D, B) array without NaN, got {r.shape}")
    flat = r.ravel()
    out: dict[str, SelectionResult] = {}
    for level, lr in rule.levels().items():
        t, hit, wide = _cut(flat, lr, strategy)
        paper = hit.reshape(r.shape).any(axis=1)
        mask = np.asarray(wide.reshape(r.shape).any(axis=1))
        tied = int(mask.sum() - paper.sum())
        out[level] = SelectionResult(level, lr.side, lr.quantiles, t, mask, tied)
    return out
