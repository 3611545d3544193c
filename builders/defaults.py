"""Every default and every fixed order of the toolkit, stated once.

The library, the command line and the scenarios file all take their defaults from here, so a
default changes in one place. Method parameters follow METHOD.md (the paper's choices).
"""

from __future__ import annotations

from collections.abc import Iterable

#: The embedding model: the paper's choice (all-mpnet-base-v2); all-MiniLM-L6-v2 is the fast one.
DEFAULT_MODEL = "all-mpnet-base-v2"
#: Embedding runtimes and precisions (`builders.shift.runtime`); torch fp32 is the reference.
BACKENDS = ("torch", "onnx", "openvino")
PRECISIONS = ("fp32", "fp16", "bf16")
DEFAULT_BACKEND = "torch"
DEFAULT_PRECISION = "fp32"
#: Familiarity keeps the first K (repeated) similarities, weighted `WEIGHTING`.
K = 1000
WEIGHTINGS = ("zipf", "linear", "unweighted")
WEIGHTING = "zipf"
#: Softmax temperature of the entropy score.
TEMPERATURE = 0.01
#: Seed of the bootstrap CI, Few-NERD picks and samplers.
SEED = 0

#: Label scores, entropy first: the default strategy and a repo folder's default config.
STRATEGIES = ("entropy", "max")
DEFAULT_STRATEGY = STRATEGIES[0]
#: Label-shift levels, easy to hard.
LEVELS = ("low", "medium", "high")

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
