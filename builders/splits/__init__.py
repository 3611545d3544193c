"""The splitter: low / medium / high label-shift subsets of a training corpus.

`EmbeddingSpec` and `MetricSpec` (`builders.shift.specs`) are here too: a `SplitConfig` holds
one of each."""

from builders.shift.specs import EmbeddingSpec, MetricSpec
from builders.splits.pipeline import SplitConfig, build

__all__ = ["EmbeddingSpec", "MetricSpec", "SplitConfig", "build"]
