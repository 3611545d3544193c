"""The splitting strategies: one module each, behind one protocol (`base.Strategy`).

    strategy("familiarity").place(Group(store, cfg, table, benchmarks, m, stage, checks))

A strategy ranks the training labels, places the levels, validates the options it owns,
states the gap it promises, and describes its levels for the printed table and the plot.
Nothing outside its module branches on its name: adding one is a module here and a line in
`_REGISTRY`. Modules load on first use (the registry is read by `SplitConfig` at import time,
and a strategy's module imports the level machinery that imports `SplitConfig`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from builders.splits.strategies.base import Strategy

#: name -> (module under this package, the strategy object in it), entropy first: the
#: default strategy and a repo folder's default config.
_REGISTRY = {
    "entropy": ("quantile", "ENTROPY"),
    "max": ("quantile", "MAX"),
    "familiarity": ("familiarity", "FAMILIARITY"),
    "random": ("random", "RANDOM"),
}
#: Every strategy's name, in the registry's order.
NAMES = tuple(_REGISTRY)


def strategy(name: str) -> Strategy:
    """The strategy called `name` (its module imported on first use).

    Raises:
        KeyError: for a name not in the registry (`SplitConfig` refuses those first).
    """
    module, attr = _REGISTRY[name]
    found: Strategy = getattr(import_module(f"{__name__}.{module}"), attr)
    return found


def every() -> list[Strategy]:
    """Every registered strategy, in the registry's order."""
    return [strategy(name) for name in NAMES]
