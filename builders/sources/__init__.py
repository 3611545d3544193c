"""The registry of sources: one place that maps a source name to its reader and metadata.

`spec` describes a source (`SourceSpec`), `planning` decides what an ingest reads (`ReadPlan`,
`check_split`), `table` lists the known sources (`SOURCES`, `get_source`). Readers live one
format per module in this package (see `base.py` for the contract) and are imported lazily, so
listing sources never imports `datasets` or parses anything.
"""

from builders.sources.planning import (
    ReadPlan,
    check_split,
    is_hub_id,
    parse_options,
    reader_options,
)
from builders.sources.spec import Kind, LabelKind, SourceSpec
from builders.sources.table import (
    NAME_CREDITS,
    SOURCES,
    get_source,
    source_profiles,
)

__all__ = [
    "NAME_CREDITS",
    "SOURCES",
    "Kind",
    "LabelKind",
    "ReadPlan",
    "SourceSpec",
    "check_split",
    "get_source",
    "is_hub_id",
    "parse_options",
    "reader_options",
    "source_profiles",
]
