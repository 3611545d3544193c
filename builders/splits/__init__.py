"""The splitter: low / medium / high label-shift subsets of a training corpus."""

from builders.splits.pipeline import SplitConfig, build

__all__ = ["SplitConfig", "build"]
