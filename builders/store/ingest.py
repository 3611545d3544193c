"""Ingest a named source from `--path`, its default local copy, or its Hub origin."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from builders.defaults import canonical_split
from builders.errors import BuildersError
from builders.sources import SourceSpec, get_source
from builders.store.db import Store
from builders.store.writer import IngestResult, write_source


def resolve_input(spec: SourceSpec, path: str | Path | None) -> Path | str:
    """Where a source is read from: a local path, or a Hub dataset id (online users)."""
    if path is not None:
        if spec.name == "hf" and not Path(path).exists():
            return str(path)  # a Hub dataset id
        return Path(path)
    local = spec.default_path()
    if local is not None:
        return local
    if spec.origin:
        return spec.origin
    raise BuildersError(
        f"source {spec.name!r} has no default origin: give the files with --path "
        f"({spec.description})"
    )


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
    where = resolve_input(spec, path)
    options = dict(options or {})
    if isinstance(where, Path) and spec.name != "hf":
        files = spec.discover(where, split)
        return write_source(
            store,
            spec,
            files,
            name=name,
            options=options,
            replace=replace,
            origin=str(where),
            progress=progress,
        )
    # A Hugging Face dataset: a Hub id (online) or a local `save_to_disk` folder.
    from builders.sources import hf

    config = options.pop("config", None) or (spec.origin_config if where == spec.origin else None)
    splits = hf.available_splits(str(where), config, split=split)
    # A local dataset folder is fingerprinted by its files' bytes, so changed data re-ingests;
    # a Hub id by its options (a Hub revision change needs --replace).
    local = Path(str(where))
    stamp = sorted(p for p in local.rglob("*") if p.is_file()) if local.is_dir() else []
    files = {canonical_split(s): stamp for s in splits}
    by_canonical = {canonical_split(s): s for s in splits}

    def examples(split_name: str, _paths: list[Path], report: Any) -> Any:
        return hf.iter_examples(
            str(where), config, by_canonical[split_name], report, spec=spec, **options
        )

    return write_source(
        store,
        spec,
        files,
        name=name or (spec.name if spec.name != "hf" else None),
        options={"config": config, **options},
        replace=replace,
        origin=str(where) + (f"[{config}]" if config else ""),
        progress=progress,
        examples=examples,
    )
