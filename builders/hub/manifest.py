"""A build's levels, checked on read to come from one build.

    check_levels([out / "pilener-low-shift", out / "pilener-high-shift"], "entropy")

Every build has an id (`splits.subsets.build_id`), recorded in each config's build.json; once
its folders are swapped in, each config's build id, levels and files' sha256 are merged into
the manifest beside them (`hub.outdir.MANIFEST`). Folders the manifest does not know are read
with a one-line note.
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

from builders.defaults import LEVELS
from builders.errors import BuildersNote, InputError, opt
from builders.hub.folder import BUILD_JSON, configs_of, read_json
from builders.hub.outdir import JOURNAL, MANIFEST, read_manifest

#: A level folder's name as a build makes it (`splits.pipeline`): `{source}{suffix}-{level}-shift`.
_LEVEL_NAME = re.compile(rf"(.+)-(?:{'|'.join(LEVELS)})-shift")


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def files_of(config_dir: Path) -> dict[str, str]:
    """Every file of a config folder (relative POSIX path) -> its sha256."""
    return {
        p.relative_to(config_dir).as_posix(): file_sha256(p)
        for p in sorted(config_dir.rglob("*"))
        if p.is_file()
    }


def config_entry(config_dir: Path) -> dict[str, Any]:
    """A written config's manifest entry: its build id and levels (from its build.json) and
    its files' sha256."""
    build = (read_json(config_dir / BUILD_JSON) or {}).get("build") or {}
    return {
        "build": build.get("id"),
        "levels": sorted(build.get("levels") or ()),
        "files": files_of(config_dir),
    }


def check_levels(
    folders: Sequence[Path],
    config: str | None = None,
    *,
    note: Callable[[str], None] | None = None,
) -> None:
    """Check that `folders`, read together, hold what one build wrote (`config`, or every
    config): refuse them beside a swap journal (a build interrupted or under way), with a
    config file that is not the one its build wrote, or with two levels of one build from
    different builds. Folders without configs (Few-NERD) are passed over."""
    folders = [Path(f) for f in folders]
    for parent in dict.fromkeys(Path(os.path.abspath(f)).parent for f in folders):
        if (parent / JOURNAL).exists():
            raise InputError(
                f"{parent}: a build into this folder was interrupted or is under way ({JOURNAL}), "
                "so its levels may come from two builds: let it finish, or run any build into it "
                f"again (build-splits, fewnerd-splits or regenerate with {opt('out', parent)}), "
                "which first finishes the interrupted one"
            )
    read: dict[str, list[tuple[Path, str, dict[str, Any]]]] = {}
    unchecked: list[str] = []
    manifests: dict[Path, dict[str, Any] | None] = {}
    for folder in folders:
        where = Path(os.path.abspath(folder))  # `out/x/`, `.`: the folder's own name
        if where.parent not in manifests:
            manifests[where.parent] = read_manifest(where.parent)
        for cfg in _configs(folder, config):
            manifest = manifests[where.parent]
            entry = (manifest["folders"].get(where.name) or {}).get(cfg) if manifest else None
            if not isinstance(entry, dict):
                unchecked.append(str(folder / cfg))
                continue
            _check_files(folder / cfg, entry, where.parent / MANIFEST)
            read.setdefault(cfg, []).append((folder, where.name, entry))
    for cfg, levels in read.items():
        _check_one_build(cfg, levels)
    if unchecked:
        (note or _warn)(
            f"{', '.join(unchecked)}: not in a build manifest ({MANIFEST} beside the folder; "
            "made by hand, downloaded or by an older version): read without checking that "
            "its levels come from one build"
        )


def check_top_level(folder: Path, files: Iterable[str], written: Collection[str]) -> None:
    """Refuse a file of `files` (relative POSIX paths) outside the configs of a folder its
    manifest knows, but those in `written`: a build keeps such a file across rebuilds without
    writing it, and published it would pass for the build's."""
    where = Path(os.path.abspath(folder))
    manifest = read_manifest(where.parent)
    if manifest is None or not isinstance(manifest["folders"].get(where.name), dict):
        return
    configs = set(configs_of(folder))
    for rel in sorted(files):
        top, _, rest = rel.partition("/")
        in_config = bool(rest) and top in configs
        if in_config or (not rest and top in written):
            continue
        raise InputError(
            f"{Path(folder) / rel}: not written by its build ({where.parent / MANIFEST}): move "
            f"it out of {folder} (a build leaves it there; publish pushes only what one wrote)"
        )


def _warn(text: str) -> None:
    warnings.warn(text, BuildersNote, stacklevel=3)


def _configs(folder: Path, config: str | None) -> list[str]:
    """The configs of `folder` to check: `config`, or all; those with a build.json."""
    if not folder.is_dir():
        return []  # the reader says what is missing
    if config is None:
        return configs_of(folder)
    return [config] if (folder / config / BUILD_JSON).is_file() else []


def _check_files(where: Path, entry: dict[str, Any], manifest: Path) -> None:
    """The config's files are the ones its build wrote, none missing, none added."""
    want: dict[str, str] = entry.get("files") or {}
    have = {p.relative_to(where).as_posix() for p in where.rglob("*") if p.is_file()}
    fix = f"build it again into {manifest.parent}, or copy every level of one build whole"
    for name in sorted(set(want) | have):
        path = where / name
        if name not in have:
            raise InputError(f"{path}: missing; its build ({manifest}) wrote it: {fix}")
        if name not in want:
            raise InputError(f"{path}: not written by its build ({manifest}): {fix}")
        if file_sha256(path) != want[name]:
            raise InputError(
                f"{path}: differs from what its build {entry.get('build')} wrote "
                f"(sha256 in {manifest}): {fix}"
            )


def _family(name: str) -> str | None:
    """The folder name a level's name shares with its other levels (`pilener-low-shift` ->
    `pilener`), or None for a name not made by a build (`{source}{suffix}-{level}-shift`)."""
    found = _LEVEL_NAME.fullmatch(name)
    return found.group(1) if found else None


def _check_one_build(config: str, levels: list[tuple[Path, str, dict[str, Any]]]) -> None:
    """Two levels of one config read together carry one build id when one's build also wrote
    the other, or their names differ only in the level: levels of separate runs are placed
    apart, so they may overlap or cross. Levels of other sources may be read together."""
    for i, (a, name_a, ea) in enumerate(levels):
        for b, name_b, eb in levels[i + 1 :]:
            siblings = name_b in ea.get("levels", ()) or name_a in eb.get("levels", ())
            family = _family(name_a)
            siblings = siblings or (family is not None and family == _family(name_b))
            if siblings and ea.get("build") != eb.get("build"):
                raise InputError(
                    f"{a / config} is from build {ea.get('build')} but {b / config} is from "
                    f"build {eb.get('build')}: levels of two builds; build them again together "
                    "(one build-splits run writes every level)"
                )
