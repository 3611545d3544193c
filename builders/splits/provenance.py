"""Where a build came from: the source as it was read, the model, the toolkit, a recipe.

    build.json["provenance"] = provenance(store, cfg, cache_key)

The recipe is the ingest command(s) that put the source in a fresh store, as far as the inputs
can be named on another machine: the bundled sample needs no path, a copy under
`$LABELSHIFT_DATA` is named through it, a Hub dataset by its id and the commit it was read at
(`--revision`; each input records it too); any other file by the path it had here (its
fingerprint is recorded, so a copy can be checked).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

from builders import __version__
from builders.names import is_hub_id
from builders.shift.embedder import KEY_PARTS, canonical_name
from builders.sources import SOURCES, SourceSpec
from builders.splits.config import SplitConfig
from builders.store import Store
from builders.store.db import StoredSplit

TOOLKIT = "labelshift-builders"


def provenance(store: Store, cfg: SplitConfig, cache_key: str) -> dict[str, Any]:
    """The source's splits as stored (fingerprints, inputs, reader options), the model and
    the vectors' cache key (with the weights' hash), the toolkit version, and the recipe."""
    stored = store.stored_splits(cfg.source)
    specs = {s.spec for s in stored.values()}
    spec = SOURCES.get(next(iter(specs)) or "") if len(specs) == 1 else None
    spec = spec or SOURCES.get(cfg.source)
    hub = spec.origin if spec is not None else None
    from_hub = bool(hub) and all(s.origin.startswith(str(hub)) for s in stored.values())
    return {
        "toolkit": {"name": TOOLKIT, "version": __version__},
        "source": {
            "name": cfg.source,
            "spec": spec.name if spec else None,
            "kind": spec.kind if spec else None,
            "license": spec.license if spec else "unknown",
            "annotation": spec.annotation if spec else "unknown",
            "credits": list(spec.credits) if spec else [],
            "hub_dataset": spec.origin if spec else None,
            "read_from_hub": from_hub,
            "splits": {
                split: {
                    "fingerprint": s.fingerprint,
                    "origin": s.origin,
                    "inputs": s.inputs,
                    "reader_options": s.options,
                    "sentences": s.sentences,
                    "mentions": s.mentions,
                }
                for split, s in sorted(stored.items())
            },
        },
        "model": {
            "name": canonical_name(cfg.embedding.model),
            "backend": _ran(cache_key, cfg.embedding.backend),  # `auto`: the runtime it chose
            "requested_backend": cfg.embedding.backend,
            "precision": cfg.embedding.precision,
            "cache_key": cache_key,
        },
        "recipe": ingest_commands(cfg.source, spec, stored),
    }


def _ran(cache_key: str, asked: str) -> str:
    """The runtime that made the vectors: the backend part of their cache key
    (`Embedder.cache_key`: model|backend|precision|device|rows|weights)."""
    parts = cache_key.split("|")
    return parts[1] if len(parts) == KEY_PARTS else asked


def ingest_commands(
    source: str, spec: SourceSpec | None, stored: dict[str, StoredSplit]
) -> list[str]:
    """`builders ingest ...` lines that store the source again: one per set of reader options,
    naming every input read with them (the splits come from the file names, as they did)."""
    if spec is None:
        return [f"# {source}: read by a source this toolkit no longer registers"]
    groups: dict[str, list[str | None]] = {}  # reader options -> the inputs read with them
    commits: dict[str, set[str]] = {}  # and the Hub commits they were read at
    for _, s in sorted(stored.items()):
        key = json.dumps(s.options, sort_keys=True)
        groups.setdefault(key, []).extend(_portable(i["input"], spec) for i in s.inputs)
        commits.setdefault(key, set()).update(i["revision"] for i in s.inputs if "revision" in i)
    lines: list[str] = []
    for key, paths in groups.items():
        args = ["builders", "ingest", spec.name]
        for path in dict.fromkeys(paths):
            if path is not None:
                args += ["--path", path]
        if len(commits[key]) == 1:  # a Hub dataset, read at one commit
            args += ["--revision", *commits[key]]
        if source != spec.name:
            args += ["--name", source]
        for name, value in sorted(json.loads(key).items()):
            if name == "config" and value is None:
                continue
            shown = value if isinstance(value, str) else json.dumps(value)
            args += ["-o", f"{name}={shown}"]
        lines.append(" ".join(a if a.startswith("$") else shlex.quote(a) for a in args))
    return lines


def _portable(path: str, spec: SourceSpec) -> str | None:
    """How another machine names an input: None for the registry's own default (the bundled
    sample, the local copy, the Hub origin), `$LABELSHIFT_DATA/...` under that folder, a
    dataset split by its dataset (a Hub id), else its file or folder name: the builder's own
    folders mean nothing elsewhere (and a card carries no absolute path); build.json's
    fingerprints identify the file."""
    if not Path(path).exists():  # a dataset split `<dataset>[config]/<split>`, or a moved file
        dataset = re.sub(r"(\[[^\]]*\])?/[^/]+$", "", path)
        if dataset == spec.origin:
            return None
        if is_hub_id(dataset):
            path = dataset
    default = spec.default_path()
    if default is not None and Path(path) == default.resolve():
        return None
    root = os.environ.get("LABELSHIFT_DATA")
    if root:
        try:
            return "$LABELSHIFT_DATA/" + Path(path).relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    if is_hub_id(path) and not Path(path).exists():
        return path
    return Path(path).name or path
