"""Ingest a named source from `--path`s, its local copy (`$LABELSHIFT_DATA`), or its Hub origin.

`plan_ingest` decides what to read (`SourceSpec.plan`) without touching a store, so that a
command can refuse bad arguments before it creates a store file; `ingest` writes that plan
through `writer.prepare_source`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from builders.sources import ReadPlan, SourceSpec, get_source
from builders.store.db import Store
from builders.store.writer import IngestResult, prepare_source

Paths = str | Path | Sequence[str | Path] | None


def plan_ingest(
    source: str,
    path: Paths = None,
    *,
    split: str | None = None,
    options: dict[str, Any] | None = None,
    label_map: Mapping[str, str] | None = None,
    revision: str | None = None,
) -> tuple[SourceSpec, ReadPlan]:
    """The source's spec and what an ingest of it would read (validated options and label
    map included; a Hub dataset at `revision`, resolved to its commit)."""
    spec = get_source(source)
    return spec, spec.plan(path, split, options, label_map, revision)


def ingest(
    store: Store,
    source: str,
    path: Paths = None,
    *,
    split: str | None = None,
    name: str | None = None,
    replace: bool = False,
    append: bool = False,
    options: dict[str, Any] | None = None,
    label_map: Mapping[str, str] | None = None,
    revision: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> IngestResult:
    """Read a source into the store in one transaction (a no-op when nothing changed): the
    arguments of `plan_ingest` and `writer.prepare_source`; `label_map` (raw tag -> label) is
    read before the packaged table (METHOD.md section 6)."""
    spec, plan = plan_ingest(
        source, path, split=split, options=options, label_map=label_map, revision=revision
    )
    return prepare_source(
        store,
        spec,
        plan,
        name=name,
        replace=replace,
        append=append,
        progress=progress,
    ).write()
