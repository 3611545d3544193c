"""Evaluation label sets: every `--benchmarks` value is resolved here, and only here.

    resolve("crossner-ai,mine:dev,file:med.txt,fewnerd-inter", store=store)  -> [EvalSet]
    evaluation_sets(...)                  -> {name: labels}, the shape every report takes

A value is a comma-separated list of entries (`FORMS`; the README's table), each tried form
by form (`_resolve_entry`); `NAME=ENTRY` gives one the name reports, cards and changelogs use,
else a label file is named by its stem (its folder's name for `labels.*`). Labels are
verbalised as METHOD.md section 6 says; `misc` ("else") is left out unless `keep_misc`. A
packaged name or a stored source (a registered benchmark source missing from the store is
ingested from `$LABELSHIFT_DATA`) also says where its evaluation sentences are.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from builders.defaults import DEFAULT_PROTOCOL, FEWNERD_MODES, canonical_split
from builders.errors import (
    AmbiguousInput,
    InputError,
    InvalidValue,
    SourceFormatError,
    SplitNotStored,
    opt,
)
from builders.labels import (
    MISC_LABEL,
    ZERO_SHOT,
    benchmarks,
    fewnerd_official_parts,
    fewnerd_verbalise,
    normalise_label,
    paper_label_sets,
    verbalise,
)
from builders.sources import SOURCES
from builders.sources.base import read_text
from builders.store.ingest import ingest

if TYPE_CHECKING:
    from builders.store import Store

FILE_PREFIX = "file:"
LABEL_FILE_SUFFIXES = (".txt", ".json")
#: The split a stored source is evaluated on unless `SOURCE:SPLIT` says otherwise.
EVAL_SPLIT = "test"

FORMS = (
    "all (the seven zero-shot benchmarks); a packaged name; SOURCE or SOURCE:SPLIT (a source "
    "in the store, default split test); file:PATH (.txt one label a line, .json a list of "
    "labels, of [label, count] pairs, or an object label -> count); fewnerd-intra[:PART] or "
    "fewnerd-inter[:PART] (PART train, dev or test; default test); NAME=ENTRY names an entry"
)


@dataclass(frozen=True)
class EvalSet:
    """One benchmark's evaluation labels (verbalised, each once), its `kind` (`packaged`,
    `store`, `file` or `fewnerd`), what was read (`origin`), the (source, split) holding its
    sentences (None: labels only), the `mapping` applied and a label file's counts."""

    name: str
    labels: tuple[str, ...]
    kind: str
    origin: str
    sentences: tuple[str, str] | None = None
    mapping: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    counts: Mapping[str, int] | None = None

    def label_of(self, raw: str, stored: str | None = None) -> str:
        """A mention's tag as this benchmark's evaluation label (the verbalisation above);
        `stored` is the store's label, which Few-NERD types are verbalised from."""
        if self.kind == "fewnerd":
            return _label_of(stored or raw, self.mapping, fewnerd=True)
        return _label_of(raw, self.mapping)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "origin": self.origin,
            "sentences": "/".join(self.sentences) if self.sentences else None,
            "labels": list(self.labels),
        }


def stored_sources(sets: Iterable[EvalSet]) -> list[str]:
    """The stored sources the sets' sentences come from, each once, in the sets' order."""
    return list(dict.fromkeys(s.sentences[0] for s in sets if s.sentences))


def evaluation_sets(
    spec: str | Sequence[str] | None,
    *,
    store: Store | None = None,
    keep_misc: bool = False,
    mapping: Mapping[str, str] | str | Path | None = None,
    protocol: str = DEFAULT_PROTOCOL,
) -> dict[str, tuple[str, ...]]:
    """Benchmark name -> its evaluation labels, for a `--benchmarks` value (see `resolve`)."""
    found = resolve(spec, store=store, keep_misc=keep_misc, mapping=mapping, protocol=protocol)
    return {s.name: s.labels for s in found}


def resolve(
    spec: str | Sequence[str] | None,
    *,
    store: Store | None = None,
    keep_misc: bool = False,
    mapping: Mapping[str, str] | str | Path | None = None,
    protocol: str = DEFAULT_PROTOCOL,
) -> list[EvalSet]:
    """Resolve a `--benchmarks` value (None, `all`, or comma-separated entries) in order.

    `store` is needed for stored sources; `mapping` is raw tag -> label or a label map file;
    under the `paper` protocol a packaged benchmark's labels are GLiNER's `labels.json` list.

    Raises:
        BuildersError: an entry matches no form (the message says what was tried), two entries
            get the same name, or a set is empty.
    """
    table = read_label_map(mapping) if isinstance(mapping, str | Path) else dict(mapping or {})
    frozen = MappingProxyType({normalise_label(k): normalise_label(v) for k, v in table.items()})
    entries = _entries(spec)
    out: dict[str, EvalSet] = {}
    for name, entry in entries:
        for found in _resolve_entry(entry, store, frozen, keep_misc, protocol):
            final = name or found.name
            if final in out:
                if out[final].origin == found.origin:
                    continue  # the same benchmark named twice (`all,crossner-ai`)
                raise InvalidValue(
                    f"two benchmarks are named {final!r} ({out[final].origin} and "
                    f"{found.origin}); name one with NAME=ENTRY"
                )
            if not found.labels:
                raise InputError(
                    f"benchmark {final!r} ({found.origin}) has no labels"
                    + ("" if keep_misc else f" (misc is left out; {opt('keep_misc')} keeps it)")
                )
            out[final] = EvalSet(
                final, found.labels, found.kind, found.origin, found.sentences, frozen, found.counts
            )
    return list(out.values())


def _entries(spec: str | Sequence[str] | None) -> list[tuple[str | None, str]]:
    """(name or None, entry) pairs of a `--benchmarks` value; None and `all` mean `all`."""
    raw = spec.split(",") if isinstance(spec, str) else list(spec or [])
    out: list[tuple[str | None, str]] = []
    for item in (r.strip() for r in raw):
        if not item:
            continue
        name, sep, entry = item.partition("=")
        if sep and not entry.strip():
            raise InvalidValue(f"benchmark entry {item!r} names nothing. Valid forms: {FORMS}")
        out.append((name.strip(), entry.strip()) if sep else (None, item))
    return out or [(None, "all")]


def _resolve_entry(
    entry: str,
    store: Store | None,
    mapping: Mapping[str, str],
    keep_misc: bool,
    protocol: str = DEFAULT_PROTOCOL,
) -> list[EvalSet]:
    """One entry, tried form by form."""
    packaged = benchmarks()
    if entry == "all":
        return [_packaged(n, mapping, keep_misc, protocol) for n in ZERO_SHOT]
    if entry.startswith(FILE_PREFIX):
        return [_from_file(Path(entry[len(FILE_PREFIX) :]), mapping, keep_misc)]
    base, sep, split = entry.partition(":")
    if base in (f"fewnerd-{m}" for m in FEWNERD_MODES):
        return [
            _fewnerd(base, split if sep else EVAL_SPLIT, mapping, keep_misc, explicit=bool(sep))
        ]
    if entry in packaged:
        return [_packaged(entry, mapping, keep_misc, protocol)]
    stored = store is not None and (store.has_source(base) or bool(ingest_local(store, base)))
    path = Path(entry)
    is_file = path.suffix.lower() in LABEL_FILE_SUFFIXES and path.is_file()
    if stored and is_file:
        raise AmbiguousInput(
            f"{entry!r} is both a source in the store and a label file: write "
            f"file:{entry} or {base}:{EVAL_SPLIT}"
        )
    if stored:
        assert store is not None
        return [_stored(store, entry, base, split if sep else None, mapping, keep_misc)]
    if is_file:
        return [_from_file(path, mapping, keep_misc)]
    raise InvalidValue(_unknown(entry, base, store))


def ingest_local(store: Store, source: str) -> str | None:
    """Ingest a registered benchmark source from its local copy (`$LABELSHIFT_DATA`): the
    ingest's status (`unchanged`: another run stored it meanwhile), None without a copy."""
    local = local_copy(source)
    if local is None:
        return None
    return ingest(store, source, local).status


def local_copy(source: str) -> Path | None:
    """Where a registered benchmark source's local copy is (`$LABELSHIFT_DATA`), or None."""
    spec = SOURCES.get(source)
    return spec.default_path() if spec is not None and spec.kind == "benchmark" else None


def sentence_sources(
    store: Store, sets: Sequence[EvalSet], note: Callable[[str], None]
) -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """(benchmark, source, split) of the sets with sentences; why the others have none."""
    rows, skipped = [], {}
    for s in sets:
        if s.sentences is None:
            skipped[s.name] = _labels_only(s)
            continue
        src, split = s.sentences
        if not store.has_source(src):
            status = ingest_local(store, src)
            if status is None:
                skipped[s.name] = _not_stored(src)
                continue
            how = "from its local copy" if status != "unchanged" else "by another run meanwhile"
            note(f"{src}: ingested {how} ({store.count_sentences(src):,} sentences)")
        if split not in store.splits_of(src):
            skipped[s.name] = _no_split(src, split)
            continue
        rows.append((s.name, src, split))
    return rows, skipped


def unscannable(store: Store, sets: Sequence[EvalSet]) -> dict[str, str]:
    """The sets a scan would list in `not_scanned`, with a short why, found without scanning or
    ingesting: decontamination is refused before a build's work rather than dropping nothing.
    A packaged benchmark with a local copy counts as scannable (the scan ingests it)."""
    out = {}
    for s in sets:
        if s.sentences is None:
            out[s.name] = _labels_only(s)
            continue
        src, split = s.sentences
        if store.has_source(src):
            if split not in store.splits_of(src):
                out[s.name] = _no_split(src, split)
        elif local_copy(src) is None:
            whose = "" if src == s.name else f"its source {src} "
            out[s.name] = f"{whose}not in the store, no local copy"
    return out


def _labels_only(s: EvalSet) -> str:
    return f"{s.kind} benchmark ({s.origin}): labels only, no sentences"


def _not_stored(src: str) -> str:
    return (
        f"{src} is not in the store and has no local copy: set LABELSHIFT_DATA "
        f"or run `builders ingest {src} --path ...`"
    )


def _no_split(src: str, split: str) -> str:
    return f"{src} has no {split} split"


def _unknown(entry: str, base: str, store: Store | None) -> str:
    tried = [f"a packaged name ({', '.join(benchmarks())})"]
    if store is None:
        tried.append("a source in the store (no store given)")
    else:
        known = store.source_names()
        tried.append(
            f"a source in {store.path} ({', '.join(known) or 'it holds none'}; "
            f"`builders ingest {base}` adds one)"
        )
    tried.append(f"a label file ({entry}: no such .txt or .json file)")
    tried.append(f"a Few-NERD part (fewnerd-{'/'.join(FEWNERD_MODES)})")
    return f"unknown benchmark {entry!r}. Tried: {'; '.join(tried)}. Valid forms: {FORMS}"


def _label_of(raw: str, mapping: Mapping[str, str], *, fewnerd: bool = False) -> str:
    key = normalise_label(raw)
    if key in mapping:
        return mapping[key]
    return normalise_label(fewnerd_verbalise(raw) if fewnerd else verbalise(raw))


def _labels(
    raws: Sequence[str], mapping: Mapping[str, str], keep_misc: bool, *, fewnerd: bool = False
) -> tuple[str, ...]:
    """Raw tags -> labels, in order, each once, `else` left out unless `keep_misc`."""
    out = dict.fromkeys(_label_of(r, mapping, fewnerd=fewnerd) for r in raws)
    return tuple(z for z in out if keep_misc or z != MISC_LABEL)


def _packaged(
    name: str, mapping: Mapping[str, str], keep_misc: bool, protocol: str = DEFAULT_PROTOCOL
) -> EvalSet:
    if protocol == "paper":
        labels = paper_label_sets([name])[name]
    else:
        labels = _labels(benchmarks()[name].tags, mapping, keep_misc)
    return EvalSet(name, labels, "packaged", name, (name, EVAL_SPLIT))


def _stored(
    store: Store,
    entry: str,
    source: str,
    split: str | None,
    mapping: Mapping[str, str],
    keep_misc: bool,
) -> EvalSet:
    """A stored source's labels in one split: `test`, or the only split it has."""
    have = store.splits_of(source)
    if split is None:
        split = have[0] if len(have) == 1 else EVAL_SPLIT
    split = canonical_split(split)
    if split not in have:
        raise SplitNotStored(
            f"source {source!r} has no {split} split (it has: {', '.join(have)}); "
            f"name one: {', '.join(f'{source}:{s}' for s in have)}",
            source,
            split,
        )
    rows = store.raw_labels(source, split)
    # Only Few-NERD's reader records coarse types: its fine types get Few-NERD's verbalisation.
    fewnerd = any(coarse is not None for _, _, coarse in rows)
    if fewnerd:
        labels = _labels([label for _, label, _ in rows], mapping, keep_misc, fewnerd=True)
    else:  # the packaged tables, after the command's map and the ingest's (its --label-map)
        ingested = store.stored_splits(source)[split].options.get("label_map") or {}
        both = {**{normalise_label(k): v for k, v in ingested.items()}, **mapping}
        labels = _labels([raw for raw, _, _ in rows], both, keep_misc)
    kind = "fewnerd" if fewnerd else "store"
    return EvalSet(entry, labels, kind, f"{source}:{split}", (source, split))


def _fewnerd(
    base: str, part: str, mapping: Mapping[str, str], keep_misc: bool, explicit: bool
) -> EvalSet:
    part = canonical_split(part)
    parts = fewnerd_official_parts(base.removeprefix("fewnerd-"))
    types = [t for t, p in parts.items() if p == part]
    if not types:
        raise InvalidValue(f"{base} has no part {part!r}; parts: train, dev, test")
    labels = _labels(types, mapping, keep_misc, fewnerd=True)
    name = f"{base}:{part}" if explicit else base
    return EvalSet(name, labels, "fewnerd", f"{base}:{part}")


def _from_file(path: Path, mapping: Mapping[str, str], keep_misc: bool) -> EvalSet:
    if not path.is_file():
        raise InputError(f"{path}: no such label file. Valid forms: {FORMS}")
    raws, counts = read_label_file(path)
    name = path.parent.name if path.stem.lower() == "labels" and path.parent.name else path.stem
    labels = _labels(raws, mapping, keep_misc)
    return EvalSet(name, labels, "file", str(path), counts=counts)


# ---------------------------------------------------------------------------- files
def read_label_file(path: str | Path) -> tuple[list[str], dict[str, int] | None]:
    """The labels of a label file (`FORMS`), in file order, and their counts if it gives them;
    SourceFormatError names the file, the line or item and the value."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in LABEL_FILE_SUFFIXES:
        raise SourceFormatError(path, None, "a label file ends in .txt or .json", path.suffix)
    text = read_text(path)
    if suffix == ".txt":
        return [ln.strip() for ln in text.splitlines() if ln.strip()], None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceFormatError(path, exc.lineno, f"not JSON ({exc.msg})") from None
    if isinstance(data, dict):
        return list(data), {k: _count(path, k, v) for k, v in data.items()}
    if not isinstance(data, list):
        raise SourceFormatError(path, None, "expected a list or an object", type(data).__name__)
    if not data or isinstance(data[0], str):  # a list of labels (the first item says so)
        for i, item in enumerate(data):
            if not isinstance(item, str):
                raise SourceFormatError(path, None, f"item {i}: expected a label", item)
        return list(data), None
    counts: dict[str, int] = {}
    for i, item in enumerate(data):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            raise SourceFormatError(
                path, None, f"item {i}: expected a label or a [label, count] pair", item
            )
        counts[item[0]] = counts.get(item[0], 0) + _count(path, item[0], item[1])
    return list(counts), counts


def _count(path: Path, label: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SourceFormatError(path, None, f"count of {label!r} is not a positive integer", value)
    return value


def read_label_map(path: str | Path) -> dict[str, str]:
    """A verbalisation map (raw tag -> label): a JSON object, or TOML (its `[verbalise]` table,
    the shape of `builders/data/benchmarks.toml`, else its top-level keys)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such label map file (.json or .toml)")
    text = read_text(path)
    try:
        if path.suffix.lower() == ".toml":
            data: Any = tomllib.loads(text)
            data = data.get("verbalise", data)
        elif path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            raise SourceFormatError(path, None, "a label map ends in .json or .toml", path.suffix)
    except json.JSONDecodeError as exc:
        raise SourceFormatError(path, exc.lineno, f"not JSON ({exc.msg})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SourceFormatError(path, None, f"not TOML ({exc})") from None
    if not isinstance(data, dict):
        raise SourceFormatError(path, None, "expected an object tag -> label", type(data).__name__)
    for key, value in data.items():
        if not isinstance(value, str) or not value.strip():
            raise SourceFormatError(
                path, None, f"label of {key!r} is not a non-empty string", value
            )
    return dict(data)
