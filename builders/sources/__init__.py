"""The registry of sources: a source name -> its reader and metadata. `spec` describes a source
(`SourceSpec`), `planning` decides what an ingest reads (`ReadPlan`, `check_split`), `table`
lists them (`SOURCES`, read by `get_source`). Readers, one format per module here (`base.py`:
the contract), are imported lazily: listing sources never imports `datasets`.
"""

from builders.errors import UnknownNameError
from builders.sources.planning import ReadPlan, check_split, parse_options, reader_options
from builders.sources.spec import Kind, LabelKind, SourceSpec
from builders.sources.table import NAME_CREDITS, SOURCES, source_profiles

__all__ = [
    "NAME_CREDITS",
    "SOURCES",
    "Kind",
    "LabelKind",
    "ReadPlan",
    "SourceSpec",
    "check_split",
    "get_source",
    "parse_options",
    "reader_options",
    "source_profiles",
]


def get_source(name: str) -> SourceSpec:
    """The registered source `name`, or an UnknownNameError naming the valid ones."""
    if name not in SOURCES:
        raise UnknownNameError("source", name, list(SOURCES))
    return SOURCES[name]
