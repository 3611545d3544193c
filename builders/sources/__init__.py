"""The registry of sources: one place that maps a source name to its reader and metadata.

Readers live one format per module in this package (see `base.py` for the contract) and are
imported lazily, so listing sources never imports `datasets` or parses anything.
"""

from __future__ import annotations

import fnmatch
import importlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, cast

from builders.defaults import canonical_split
from builders.errors import BuildersError, UnknownNameError
from builders.labels import normalise_label, verbalise
from builders.sources.base import Unit

Kind = Literal["corpus", "benchmark"]


def _frozen(d: Mapping | None = None) -> Mapping:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class SourceSpec:
    """How to load one named source.

    Attributes:
        name: registry key, also the default name in the store.
        kind: `corpus` (training data) or `benchmark` (evaluation data).
        module: reader module under `builders.sources`.
        description: one line for `builders sources`.
        options: fixed keyword options passed to the reader (column layout, scheme, ...).
        origin: Hugging Face Hub dataset id used when no `--path` is given (online users).
        origin_config: the Hub config name, if any.
        local: folder or file relative to `$LABELSHIFT_DATA` used when it is set and exists.
        splits: split -> file-name glob patterns, used when `--path` is a folder.
        verbalise: map raw tags through the verbalisation table (benchmarks).
        label_fn: optional `module:function` turning a raw label into (label, coarse).
        hub_options: options of the `hf` reader when the source is read from its Hub origin
            (its copy there may name its columns and tags differently).
        license: licence of the published data, inherited by derived datasets.
        loader_version: bump when the reader's output changes; part of the fingerprint.
    """

    name: str
    kind: Kind
    module: str
    description: str
    options: Mapping[str, object] = field(default_factory=_frozen)
    origin: str | None = None
    origin_config: str | None = None
    local: str | None = None
    splits: Mapping[str, tuple[str, ...]] = field(default_factory=_frozen)
    verbalise: bool = False
    label_fn: str | None = None
    hub_options: Mapping[str, object] = field(default_factory=_frozen)
    license: str = "unknown"
    loader_version: str = "1"

    def __post_init__(self) -> None:
        if self.kind not in ("corpus", "benchmark"):
            raise ValueError(f"{self.name}: kind must be corpus or benchmark, not {self.kind!r}")

    def plan(
        self,
        path: str | Path | None = None,
        split: str | None = None,
        options: Mapping[str, object] | None = None,
    ) -> ReadPlan:
        """What to read: the reader, its units per split, and its options.

        `path` is a local file or folder, or (for Hugging Face datasets) a Hub id; without
        it, the source's local copy (`default_path`) or else its Hub origin is read.
        A Hub id, a `save_to_disk` folder, or any path given to the `hf` source is read by
        the `hf` reader; everything else by the source's own reader.
        """
        user = dict(options or {})
        where: str | Path | None = path if path is not None else self.default_path()
        from_origin = where is None
        if from_origin:
            if not self.origin:
                raise BuildersError(
                    f"source {self.name!r} has no default origin: give the files with --path "
                    f"({self.description})"
                )
            where = self.origin
        local = Path(str(where))
        if (
            self.module == "hf"
            or (not local.exists() and is_hub_id(str(where)))
            or (local.is_dir() and _hf().is_dataset_folder(local))
        ):
            return self._dataset_plan(str(where), split, user, from_origin)
        if not local.exists():
            raise BuildersError(f"{local}: no such file or folder")
        units = cast(dict[str, list[Unit]], self.discover(local, split))
        return ReadPlan(self.module, units, {**self.options, **user}, user, str(local))

    def _dataset_plan(
        self, dataset: str, split: str | None, user: dict[str, object], from_origin: bool
    ) -> ReadPlan:
        opts = {**(self.hub_options if self.module != "hf" else {}), **user}
        config = opts.pop("config", None) or (self.origin_config if from_origin else None)
        units = _hf().discover(dataset, None if config is None else str(config), split)
        origin = dataset + (f"[{config}]" if config else "")
        return ReadPlan("hf", dict(units), opts, {"config": config, **user}, origin)

    def reader(self, module: str | None = None) -> Callable:
        mod = importlib.import_module(f"builders.sources.{module or self.module}")
        return mod.read  # type: ignore[no-any-return]

    def map_label(self, raw: str) -> tuple[str, str | None]:
        """Raw label -> (normalised label, coarse type or None)."""
        if self.label_fn:
            mod, _, fn = self.label_fn.partition(":")
            return importlib.import_module(f"builders.sources.{mod}").__dict__[fn](raw)  # type: ignore[no-any-return]
        return normalise_label(verbalise(raw) if self.verbalise else raw), None

    def default_path(self) -> Path | None:
        """Where to read from without `--path`: the packaged file, or `$LABELSHIFT_DATA/local`."""
        if self.local is None:
            return None
        if self.local.startswith("package:"):
            from importlib import resources

            return Path(str(resources.files("builders.data").joinpath(self.local[8:])))
        root = os.environ.get("LABELSHIFT_DATA")
        if root and (Path(root) / self.local).exists():
            return Path(root) / self.local
        return None

    def discover(self, path: Path, split: str | None = None) -> dict[str, list[Path]]:
        """Map splits to files for a `--path` that is a file or a folder."""
        if not path.exists():
            raise BuildersError(f"{path}: no such file or folder")
        if path.is_file():
            if split:
                return {canonical_split(split): [path]}
            # A training corpus in one file is used whole: call it train whatever its name.
            return {"train" if self.kind == "corpus" else guess_split(path): [path]}
        found: dict[str, list[Path]] = {}
        files = sorted(p for p in path.iterdir() if p.is_file())
        patterns = self.splits or _GENERIC_SPLITS
        for name, globs in patterns.items():
            hits = [p for p in files if any(fnmatch.fnmatch(p.name, g) for g in globs)]
            if hits:
                found[name] = hits
        if split:
            want = canonical_split(split)
            if want not in found:
                raise BuildersError(
                    f"{path}: no file for split {split!r} (found: {', '.join(found) or 'none'})"
                )
            found = {want: found[want]}
        if not found:
            raise BuildersError(
                f"{path}: no input files found; expected names like "
                + ", ".join(g for gs in patterns.values() for g in gs)
            )
        return found


@dataclass(frozen=True)
class ReadPlan:
    """What an ingest reads: the reader module, its units per (canonical) split, the reader's
    options (the source's fixed ones with the user's), the user's own options (recorded in
    the store) and a description of where it all comes from."""

    module: str
    units: Mapping[str, list[Unit]]
    options: Mapping[str, object]
    user_options: Mapping[str, object]
    origin: str


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def is_hub_id(text: str) -> bool:
    """`org/name`: what a Hugging Face dataset id looks like (and a relative path may too)."""
    return bool(_HUB_ID.fullmatch(text)) and ".." not in text


def _hf() -> Any:
    return importlib.import_module("builders.sources.hf")


_GENERIC_SPLITS = {
    "train": ("*train*",),
    "dev": ("*dev*", "*valid*"),
    "test": ("*test*",),
}


def guess_split(path: Path) -> str:
    stem = path.name.lower()
    for key in ("train", "valid", "dev", "test"):
        if key in stem:
            return canonical_split(key)
    return "train"


_CROSSNER_SPLITS = {"train": ("train.txt",), "dev": ("dev.txt",), "test": ("test.txt",)}
_CROSSNER_LICENSE = "mit"


def _crossner(domain: str, title: str) -> SourceSpec:
    return SourceSpec(
        name=f"crossner-{domain}",
        kind="benchmark",
        module="columns",
        description=f"CrossNER {title}: token<TAB>BIO-tag column files",
        options=_frozen({"token_col": 0, "tag_col": -1, "scheme": "bio"}),
        origin="DFKI-SLT/cross_ner",
        origin_config=domain,
        local=f"crossner/{domain}",
        splits=_frozen(_CROSSNER_SPLITS),
        verbalise=True,
        license=_CROSSNER_LICENSE,
    )


_SPECS: list[SourceSpec] = [
    *(
        _crossner(d, t)
        for d, t in [
            ("ai", "AI"),
            ("literature", "Literature"),
            ("music", "Music"),
            ("politics", "Politics"),
            ("science", "Science"),
        ]
    ),
    SourceSpec(
        name="crossner-conll2003",
        kind="benchmark",
        module="columns",
        description="CrossNER's copy of CoNLL-2003 (tags renamed): token<TAB>BIO-tag",
        options=_frozen({"token_col": 0, "tag_col": -1, "scheme": "bio"}),
        origin="DFKI-SLT/cross_ner",
        origin_config="conll2003",
        local="crossner/conll2003",
        splits=_frozen(_CROSSNER_SPLITS),
        verbalise=True,
        license="other",
    ),
    SourceSpec(
        name="mit-movie",
        kind="benchmark",
        module="columns",
        description="MIT Movie (eng): BIO-tag<TAB>token, label first",
        options=_frozen({"token_col": -1, "tag_col": 0, "scheme": "bio"}),
        origin="tner/mit_movie_trivia",
        local="mit-movie",
        splits=_frozen({"train": ("*train*.bio",), "test": ("*test*.bio",)}),
        verbalise=True,
        license="unknown",
    ),
    SourceSpec(
        name="mit-restaurant",
        kind="benchmark",
        module="columns",
        description="MIT Restaurant: BIO-tag<TAB>token, label first",
        options=_frozen({"token_col": -1, "tag_col": 0, "scheme": "bio"}),
        origin="tner/mit_restaurant",
        local="mit-restaurant",
        splits=_frozen({"train": ("*train*.bio",), "test": ("*test*.bio",)}),
        verbalise=True,
        license="unknown",
    ),
    SourceSpec(
        name="conll2003",
        kind="benchmark",
        module="columns",
        description="CoNLL-2003: token POS chunk BIO-tag, space separated, -DOCSTART- lines",
        options=_frozen({"token_col": 0, "tag_col": -1, "scheme": "bio", "columns": 4}),
        origin="eriktks/conll2003",
        local="conll2003",
        splits=_frozen(
            {"train": ("train.txt",), "dev": ("valid.txt", "dev.txt"), "test": ("test.txt",)}
        ),
        verbalise=True,
        license="other",
    ),
    SourceSpec(
        name="fewnerd",
        kind="benchmark",
        module="fewnerd",
        description="Few-NERD: token<TAB>IO coarse-fine tags, or BIO coarse_fine tags",
        origin="DFKI-SLT/few-nerd",
        origin_config="supervised",
        local="fewnerd/inter",
        splits=_frozen(
            {"train": ("train*.txt",), "dev": ("dev*.txt", "valid*.txt"), "test": ("test*.txt",)}
        ),
        label_fn="fewnerd:map_label",
        # DFKI-SLT/few-nerd: `fine_ner_tags` holds the 66 fine types (IO, `person-artist/author`)
        hub_options=_frozen({"tags_column": "fine_ner_tags", "scheme": "io"}),
        license="cc-by-sa-4.0",
    ),
    SourceSpec(
        name="pilener",
        kind="corpus",
        module="pilener",
        description="Pile-NER conversation JSON (train.json or one-question evaluation files); "
        "also its BIO conversion (.bio)",
        origin="Universal-NER/Pile-NER-type",
        local="pilener/pilener-391xALL-dev.bio",
        license="cc-by-nc-4.0",
    ),
    SourceSpec(
        name="pilener-sample",
        kind="corpus",
        module="columns",
        description="Bundled real sample: 2,217 Pile-NER passages in BIO (SLIMER's held-out slice)",
        # SLIMER's conversion flattened overlapping mentions, leaving 156 `I-x` tags right after
        # a `y` entity; they are read as `B-x` and counted as `repaired_tags`.
        options=_frozen(
            {"token_col": 0, "tag_col": -1, "scheme": "bio", "sep": "\t", "repair": True}
        ),
        origin="Universal-NER/Pile-NER-type",
        local="package:sample/pilener-391xALL-dev.bio.xz",
        license="cc-by-nc-4.0",
    ),
    SourceSpec(
        name="nuner",
        kind="corpus",
        module="nuner",
        description="NuNER CSV: input text, output list literal of '<mention> <> <type>'",
        origin="numind/NuNER",
        license="mit",
    ),
    SourceSpec(
        name="gliner",
        kind="corpus",
        module="gliner",
        description="GLiNER json: training (tokenized_text, ner) or benchmark (sentence, entities)",
        license="unknown",
    ),
    SourceSpec(
        name="columns",
        kind="corpus",
        module="columns",
        description="Any column file: BIO/IO/BIOES, token-first or label-first, tab or space",
        options=_frozen({"token_col": 0, "tag_col": -1, "scheme": "auto"}),
        license="unknown",
    ),
    SourceSpec(
        name="hf",
        kind="corpus",
        module="hf",
        description="Any Hugging Face dataset with a tokens column and tag sequences",
        license="unknown",
    ),
]

SOURCES: Mapping[str, SourceSpec] = MappingProxyType({s.name: s for s in _SPECS})


def get_source(name: str) -> SourceSpec:
    if name not in SOURCES:
        raise UnknownNameError("source", name, list(SOURCES))
    return SOURCES[name]
