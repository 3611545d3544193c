"""Ingest a named source from `--path`, its local copy (`$LABELSHIFT_DATA`), or its Hub origin.

Where to read and with which reader is the registry's decision (`SourceSpec.plan`); writing
is `builders.store.writer`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from builders.sources import get_source
from builders.store.db import Store
from builders.store.writer import IngestResult, write_source


def ingest(
    store: Store,
    source: str,
    path: str | Path | None = None,
    *,
    split: str | None = None,
    name: str | None = None,
    replace: bool = False,
    options: dict[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
) -> IngestResult:
    """Read a source into the store in one transaction; a no-op when nothing changed."""
    spec = get_source(source)
    plan = spec.plan(path, split, options)
    return write_source(store, spec, plan, name=name, replace=replace, progress=progress)
