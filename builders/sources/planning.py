"""Read planning: which reader reads which units of a source, with its options validated, its
label map and notes (`plan`, called as `SourceSpec.plan`); the reader's options; the split
names a user may give (`check_split`)."""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from builders.defaults import SPLIT_ALIASES
from builders.errors import (
    BuildersError,
    ConflictingOptions,
    InputError,
    InvalidValue,
    UnknownNameError,
    opt,
)
from builders.labels import label_map
from builders.names import is_hub_id
from builders.sources.base import Unit
from builders.sources.inputs import assign, expand, pair
from builders.sources.options import ReaderOptions

if TYPE_CHECKING:
    from builders.sources.spec import SourceSpec


def frozen(d: Mapping | None = None) -> Mapping:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class ReadPlan:
    """What an ingest reads: the reader module, its units per (canonical) split, the reader's
    options (fixed and the user's), the user's own options (recorded in the store, the label
    map among them), where it all comes from, notes, and the label map."""

    module: str
    units: Mapping[str, list[Unit]]
    options: Mapping[str, object]
    user_options: Mapping[str, object]
    origin: str
    notes: tuple[str, ...] = ()
    label_map: Mapping[str, str] = field(default_factory=frozen)


def plan(
    spec: SourceSpec,
    path: str | Path | Sequence[str | Path] | None = None,
    split: str | None = None,
    options: Mapping[str, object] | None = None,
    labels: Mapping[str, str] | None = None,
    revision: str | None = None,
) -> ReadPlan:
    """What to read: the reader, its units per split, its validated options, the label map
    (`labels`: raw tag -> label, read before the packaged table), and notes. `path`: local
    files, folders or globs (`inputs.py`), or a Hub id (read by `hf`, as is a `save_to_disk`
    folder or any path of the `hf` source); without it, the source's local copy, else its Hub
    origin. A Hub dataset is read at `revision` (default its main branch), resolved here.
    """
    if labels and spec.label_fn:
        raise ConflictingOptions(
            f"source {spec.name!r} names its types by its own table (Few-NERD's "
            f"coarse-fine types): {opt('label_map')} does not apply to it"
        )
    mapping = label_map(labels or {})
    plan = _read_plan(spec, path, split, dict(options or {}), revision)
    if not mapping:
        return plan
    recorded = {**plan.user_options, "label_map": dict(sorted(mapping.items()))}
    return dataclasses.replace(plan, user_options=recorded, label_map=mapping)


def _read_plan(
    spec: SourceSpec,
    path: str | Path | Sequence[str | Path] | None,
    split: str | None,
    user: dict,
    revision: str | None = None,
) -> ReadPlan:
    """The reader, its units and options for `path` (see `plan`)."""
    split = check_split(split) if split is not None else None
    given = [path] if isinstance(path, (str, Path)) else list(path or [])
    said: list[str] = []
    if not given:
        local = spec.default_path()
        if local is None:
            return _origin_plan(spec, split, user, revision)
        given = [local]
        said = [f"{local.name}: {spec.local_note}"] if spec.local_note else []
    first = str(given[0])
    if (
        spec.module == "hf"
        or (not Path(first).exists() and is_hub_id(first))
        or (Path(first).is_dir() and _hf().is_dataset_folder(Path(first)))
    ):
        if len(given) > 1:
            raise InvalidValue(
                f"a Hugging Face dataset is read one at a time: give one {opt('path')}"
            )
        return _dataset_plan(spec, first, split, user, from_origin=False, revision=revision)
    if revision is not None:
        raise InvalidValue(
            f"a revision pins a Hub dataset, and {first} is read as files: give no revision"
        )
    paths = expand(given)
    found, notes = assign(paths, spec.splits, split)
    units: dict[str, list[Unit]] = {k: list(v) for k, v in found.items()}
    paired = getattr(importlib.import_module(f"builders.sources.{spec.module}"), "PAIRED", ())
    for key in units if paired else ():  # the reader reads files in pairs: `inputs.pair`
        groups, more = pair(found[key], paired)
        units[key], notes = list(groups), notes + more
    notes = [*said, *notes]
    opts = parse_options(spec.module, {**spec.options, **user})
    return ReadPlan(
        spec.module,
        units,
        opts,
        {k: opts[k] for k in user},
        ", ".join(map(str, paths)),
        tuple(notes),
    )


def _origin_plan(
    spec: SourceSpec, split: str | None, user: dict[str, object], revision: str | None
) -> ReadPlan:
    """Read from the Hub origin; offline (or when it fails) say how to give the files."""
    if not spec.origin:
        raise InputError(
            f"source {spec.name!r} has no default origin: give the files with {opt('path')} "
            f"({spec.description})"
        )
    try:
        return _dataset_plan(spec, spec.origin, split, user, from_origin=True, revision=revision)
    except BuildersError as exc:
        if spec.module == "hf":
            raise
        local = f" (no $LABELSHIFT_DATA/{spec.local})" if spec.local else ""
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        why = "cannot be reached offline (HF_HUB_OFFLINE is set)" if offline else f"failed ({exc})"
        origin = spec.origin + (f"[{spec.origin_config}]" if spec.origin_config else "")
        raise InputError(
            f"source {spec.name!r}: no local copy{local}, and reading its Hub origin "
            f"{origin} {why}: give the files with {opt('path')} ({spec.description})"
        ) from exc


def _dataset_plan(
    spec: SourceSpec,
    dataset: str,
    split: str | None,
    user: dict[str, object],
    from_origin: bool,
    revision: str | None = None,
) -> ReadPlan:
    """A Hugging Face dataset's splits as units, a Hub dataset's at its commit (resolved)."""
    opts = {**(spec.hub_options if spec.module != "hf" else {}), **user}
    checked = parse_options("hf", opts)
    config = checked.pop("config", None) or (spec.origin_config if from_origin else None)
    checked["config"] = config
    commit, notes = _hf().resolve_revision(dataset, revision)
    units = _hf().discover(dataset, None if config is None else str(config), split, commit)
    origin = dataset + (f"[{config}]" if config else "") + (f"@{commit}" if commit else "")
    recorded = {"config": config, **{k: checked[k] for k in user if k != "config"}}
    return ReadPlan("hf", dict(units), checked, recorded, origin, tuple(notes))


def reader_options(module: str) -> type[ReaderOptions]:
    """The options dataclass a reader module declares (`Options`)."""
    mod = importlib.import_module(f"builders.sources.{module}")
    return mod.Options  # type: ignore[no-any-return]


def parse_options(module: str, given: Mapping[str, object]) -> dict[str, object]:
    """Validate `given` against the reader's options; all of them, defaults filled in."""
    return dict(reader_options(module).parse(given, module).as_dict())


def _hf() -> Any:
    return importlib.import_module("builders.sources.hf")


def check_split(name: str) -> str:
    """A split name the user gave, as its canonical name (`validation` -> `dev`); an
    UnknownNameError if it is not train, dev, test or one of their aliases."""
    canon = SPLIT_ALIASES.get(name.strip().lower())
    if canon is None:
        raise UnknownNameError("split", name, list(SPLIT_ALIASES))
    return canon
