"""Every default and every fixed order of the toolkit, stated once.

The library, the command line and the scenarios file all take their defaults from here, so a
default changes in one place. Method parameters follow METHOD.md (the paper's choices).
"""

from __future__ import annotations

from collections.abc import Iterable

#: The store a command opens without --db, and the variable that moves it.
DEFAULT_DB = "labelshift.duckdb"
DB_ENV = "LABELSHIFT_DB"
#: Few-NERD splits: INTRA / INTER, and how INTER's fine types are given to its parts.
FEWNERD_MODES = ("intra", "inter")
FEWNERD_ASSIGNMENTS = ("official", "random")

#: The embedding model: the paper's choice (all-mpnet-base-v2); all-MiniLM-L6-v2 is the fast one.
DEFAULT_MODEL = "all-mpnet-base-v2"
#: Embedding runtimes and precisions (`builders.shift.runtime`); torch fp32 is the reference.
#: `auto` runs the fastest installed runtime whose vectors equal torch's (`builders.shift.auto`).
BACKENDS = ("auto", "torch", "onnx", "openvino")
PRECISIONS = ("fp32", "fp16", "bf16")
DEFAULT_BACKEND = "auto"
DEFAULT_PRECISION = "fp32"
#: Familiarity keeps the first K (repeated) similarities, weighted `WEIGHTING`.
K = 1000
WEIGHTINGS = ("zipf", "linear", "unweighted")
WEIGHTING = "zipf"
#: Softmax temperature of the entropy score.
TEMPERATURE = 0.01
#: Seed of the bootstrap CI, Few-NERD picks and samplers.
SEED = 0
#: Leakage (METHOD.md section 7): the n-gram length, and the similarity at which a seen
#: mention's training label counts as familiar with its benchmark label.
NGRAM = 13
FAMILIAR_SIM = 0.8

#: How label sets, label spellings, the headline figure and the splits are computed:
#: `ours` (METHOD.md's definitions) or `paper` (the Familiarity authors' code; METHOD.md
#: sections 2, 3 and 6).
PROTOCOLS = ("ours", "paper")
DEFAULT_PROTOCOL = PROTOCOLS[0]
#: The paper protocol's entropy: -sum p ln(p + 1e-10), in float32, as the authors computed it.
PAPER_ENTROPY_EPSILON = 1e-10

#: The default strategy (`builders.splits.strategies` registers every one). `entropy` and
#: `max` are the paper's label scores (`SCORES`), cut at quantiles.
SCORES = ("entropy", "max")
#: Each score's name and symbol (a card's cut rule `e ≥ q(0.9)`, a plot's axis).
SCORE_SYMBOLS = {"entropy": ("entropy", "e"), "max": ("max similarity", "m")}
DEFAULT_STRATEGY = "entropy"
#: `familiarity` levels: the smallest Familiarity gap between consecutive levels, and how
#: close a level must come to a Familiarity it is asked for (`--targets`).
MIN_GAP = 0.05
TARGET_TOLERANCE = 0.02
#: Label-shift levels, easy to hard.
LEVELS = ("low", "medium", "high")
#: Scores closer than this are tied (what float32 similarities resolve, METHOD.md section 4):
#: max scores within an absolute 1e-6, entropies within a relative 1e-3. A cut keeps a tie
#: group whole.
TIE_TOLERANCE = {"max": ("absolute", 1e-6), "entropy": ("relative", 1e-3)}
#: The smallest level a build accepts: fewer labels make a level's Familiarity the similarity
#: of one or two labels, fewer mentions leave too little to train on (see docs/DESIGN.md).
MIN_LEVEL_LABELS = 3
MIN_LEVEL_MENTIONS = 100
#: Size-matched levels: `none` (the quantile cuts as they fall), or the same number of
#: `mentions` or `labels` in every level.
MATCH_MODES = ("none", "mentions", "labels")

#: Canonical split names, in order; files and Hub splits named otherwise map onto them.
SPLITS = ("train", "dev", "test")
SPLIT_ALIASES = {
    "train": "train",
    "training": "train",
    "dev": "dev",
    "valid": "dev",
    "validation": "dev",
    "test": "test",
    "testing": "test",
}
#: What a split is called in a published dataset (`datasets` says `validation`).
HUB_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


def canonical_split(name: str) -> str:
    """`validation`/`valid` -> `dev`; other names lower-cased (unknown names stay as they are)."""
    return SPLIT_ALIASES.get(name.lower(), name.lower())


def hub_split(name: str) -> str:
    """The published name of a split: `dev` -> `validation`."""
    return HUB_SPLITS.get(canonical_split(name), name)


def split_rank(split: str) -> tuple[int, str]:
    """Sort key of splits: train, dev, test, then any other name alphabetically."""
    canon = canonical_split(split)
    return (SPLITS.index(canon) if canon in SPLITS else len(SPLITS), split)


def config_order(names: Iterable[str]) -> list[str]:
    """Configs of a repo folder in their published order: the default strategy first."""
    return sorted(names, key=lambda n: (n != DEFAULT_STRATEGY, n))
