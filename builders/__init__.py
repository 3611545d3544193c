"""Label-shift toolkit for zero-shot NER: loaders, splitter, Familiarity and publisher.

`from builders import familiarity_of` is the plain-Python Familiarity entry point
(`builders.shift.api`); it is imported on first use, so `import builders` stays light.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "familiarity_of"]


def __getattr__(name: str) -> Any:
    if name == "familiarity_of":
        from builders.shift.api import familiarity_of

        return familiarity_of
    raise AttributeError(f"module 'builders' has no attribute {name!r}")
