"""Label-shift toolkit for zero-shot NER: loaders, splitter, Familiarity and publisher."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
