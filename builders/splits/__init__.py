"""The splitter: low / medium / high label-shift subsets of a training corpus.

`SplitConfig` and `build` load on first use, so that `builders.splits.strategies` (the
strategies' names, which the CLI's options list) imports nothing heavy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from builders.splits.config import SplitConfig
    from builders.splits.pipeline import build

__all__ = ["SplitConfig", "build"]
_WHERE = {"SplitConfig": "builders.splits.config", "build": "builders.splits.pipeline"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_WHERE[name]), name)
