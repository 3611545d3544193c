"""From `--path` arguments to files per split: globs, folders, split names, and what was left.

Every `--path` is a file, a folder or a glob (one matching nothing is an error); a glob's or a
folder's files are read in natural order. A file's split comes from its name: the source's own
patterns (`valid.txt` is CoNLL's dev), else a split word (two splits: refused; none: `train`,
with a note). In a folder, a source with its own patterns reads only the files they match
(Few-NERD's `dev_5_1.jsonl` episodes beside `dev.txt`); a folder whose names say no split is
shards of one corpus, read as `train` (or `--split`); files not read are named in a note. A
reader that reads files in pairs (`PAIRED`) gets each name's files as one unit (`pair`).
"""

from __future__ import annotations

import fnmatch
import glob
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from builders.defaults import SPLIT_ALIASES
from builders.errors import AmbiguousInput, InputError, opt
from builders.sources.base import FileGroup

#: file names in a data folder that are documentation, not data
_NOT_DATA = re.compile(r"(readme|license|licence|changelog|citation)(\..*)?$|.*\.(md|pdf)$", re.I)
_SPLIT_WORDS = re.compile("|".join(sorted(SPLIT_ALIASES, key=len, reverse=True)))
_GLOB_CHARS = re.compile(r"[*?\[]")


def natural_key(path: Path) -> list[object]:
    """Sort key: digit runs compare as numbers (`part2` before `part10`)."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def expand(paths: Sequence[str | Path]) -> list[Path]:
    """Each path as given, a glob as its matches (an error when it matches nothing)."""
    out: list[Path] = []
    for raw in paths:
        text = str(raw)
        if not Path(text).exists() and _GLOB_CHARS.search(text):
            hits = sorted((Path(p) for p in glob.glob(text, recursive=True)), key=natural_key)
            if not hits:
                raise InputError(f"{text}: no file matches this pattern")
            out.extend(hits)
        elif not Path(text).exists():
            raise InputError(f"{text}: no such file or folder")
        else:
            out.append(Path(text))
    return list(dict.fromkeys(out))


def split_of(name: str, patterns: Mapping[str, tuple[str, ...]], words: bool = True) -> str | None:
    """The split a file name says: the source's patterns first, then (if `words`) split words;
    None if it says none. Raises `AmbiguousInput` when the words name two different splits."""
    for split, globs in patterns.items():
        if any(fnmatch.fnmatch(name, g) for g in globs):
            return split
    if not words:
        return None
    found = {SPLIT_ALIASES[w] for w in _SPLIT_WORDS.findall(name.lower())}
    if len(found) > 1:
        raise AmbiguousInput(
            f"{name}: the file name says several splits ({', '.join(sorted(found))}); "
            f"say which with {opt('split')}"
        )
    return found.pop() if found else None


def assign(
    paths: Sequence[Path], patterns: Mapping[str, tuple[str, ...]], split: str | None
) -> tuple[dict[str, list[Path]], list[str]]:
    """Files per split for `paths` (files and folders), and notes for the user."""
    units: dict[str, list[Path]] = {}
    notes: list[str] = []
    for path in paths:
        if path.is_dir():
            found, more = _folder(path, patterns, split)
            notes += more
        else:
            named = None if split else split_of(path.name, patterns)
            found = {split or named or "train": [path]}
            if split is None and named is None:
                notes.append(f"{path.name}: no split in the file name; read as train")
        for key, files in found.items():
            units.setdefault(key, []).extend(files)
    return {k: list(dict.fromkeys(v)) for k, v in units.items()}, notes


def _folder(
    folder: Path, patterns: Mapping[str, tuple[str, ...]], split: str | None
) -> tuple[dict[str, list[Path]], list[str]]:
    files = sorted((p for p in folder.iterdir() if p.is_file()), key=natural_key)
    skipped = [p for p in files if p.name.startswith(".") or _NOT_DATA.match(p.name)]
    data = [p for p in files if p not in skipped]
    # a source that names its files (CrossNER's train.txt) does not guess from other names
    named = {p: split_of(p.name, patterns, words=not patterns) for p in data}
    notes: list[str] = []
    if data and not any(named.values()):
        target = split or "train"
        notes.append(
            f"{folder}: no file name says a split; its {len(data)} files are read as {target}, "
            "one corpus in shards"
        )
        found = {target: data}
    else:
        found = {}
        for p in data:
            if named[p] is not None and (split is None or named[p] == split):
                found.setdefault(str(named[p]), []).append(p)
        skipped += [p for p in data if named[p] is None]
        if split is not None and split not in found:
            raise InputError(
                f"{folder}: no file for split {split!r} "
                f"(found: {', '.join(sorted({s for s in named.values() if s})) or 'none'})"
            )
    if not data:
        raise InputError(f"{folder}: no input files found")
    if skipped:
        notes.append(f"{folder}: not read: {', '.join(p.name for p in skipped)}")
    return found, notes


def pair(files: Sequence[Path], suffixes: tuple[str, ...]) -> tuple[list[FileGroup], list[str]]:
    """Each name's files (`suffixes`, in that order) as one unit, in the order the names first
    come, and a note naming the files of other suffixes; a name missing one is refused."""
    groups: dict[Path, FileGroup] = {}
    other = [f for f in files if f.suffix not in suffixes]
    for f in files:
        stem = f.with_suffix("")
        if f.suffix not in suffixes or stem in groups:
            continue
        group = tuple(stem.with_name(stem.name + s) for s in suffixes)
        missing = next((g for g in group if not g.is_file()), None)
        if missing is not None:
            raise InputError(
                f"{f}: no {missing.name} beside it: this reader reads "
                + " with ".join(f"NAME{s}" for s in suffixes)
                + " (a document not annotated yet needs an empty one)"
            )
        groups[stem] = FileGroup(group)
    if not groups:
        raise InputError(f"no {' or '.join(suffixes)} file among {', '.join(map(str, files))}")
    notes = [f"not read: {', '.join(f.name for f in other)}"] if other else []
    return list(groups.values()), notes
