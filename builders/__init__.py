"""Label-shift toolkit for zero-shot NER: loaders, splitter, Familiarity and publisher.

`from builders import familiarity_of` is the plain-Python Familiarity entry point
(`builders.shift.api`), `from builders import evaluate, EvaluateRequest` scores a model's
predictions in context (`builders.evaluate`); they are imported on first use, so `import
builders` stays light.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["EvaluateRequest", "__version__", "evaluate", "familiarity_of"]


def __getattr__(name: str) -> Any:
    if name == "familiarity_of":
        from builders.shift.api import familiarity_of

        return familiarity_of
    if name in ("evaluate", "EvaluateRequest"):
        import builders.evaluate as found

        return getattr(found, name)
    raise AttributeError(f"module 'builders' has no attribute {name!r}")
