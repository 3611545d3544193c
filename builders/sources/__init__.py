"""The registry of sources: one place that maps a source name to its reader and metadata.

Readers live one format per module in this package (see `base.py` for the contract) and are
imported lazily, so listing sources never imports `datasets` or parses anything.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, cast

from builders.defaults import SPLIT_ALIASES
from builders.errors import BuildersError, InvalidValue, UnknownNameError
from builders.labels import label_map, verbalise
from builders.sources.base import Unit
from builders.sources.inputs import assign, expand
from builders.sources.options import ReaderOptions

Kind = Literal["corpus", "benchmark"]
#: What a source's raw labels are (METHOD.md section 6): `tags` (CoNLL's `PER`, CrossNER's
#: `programlang`) or `natural` language (Pile-NER's `field of study`).
LabelKind = Literal["tags", "natural"]


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
        splits: split -> file-name glob patterns that name a file's split before the generic
            split words do (`valid.txt` is CoNLL's dev split).
        labels: what its raw labels are: `tags`, verbalised through the whole packaged table
            (column files, tag sequences, every benchmark), or `natural` language, which keeps
            the table's natural-language keys where no other tag of the table is beside them
            (GLiNER json, Pile-NER, NuNER).
        label_fn: optional `module:function` turning a raw label into (label, coarse), in
            place of the table (Few-NERD's types).
        hub_options: options of the `hf` reader when the source is read from its Hub origin
            (its copy there may name its columns and tags differently).
        license: licence of the published data, inherited by derived datasets.
        annotation: who annotated it: `llm` (synthetic, LLM-annotated), `human`, or `unknown`.
        credits: citation keys (`cards/_citations.md.j2`) the data's authors ask for.
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
    labels: LabelKind = "tags"
    label_fn: str | None = None
    hub_options: Mapping[str, object] = field(default_factory=_frozen)
    license: str = "unknown"
    annotation: str = "unknown"
    credits: tuple[str, ...] = ()
    loader_version: str = "1"

    def __post_init__(self) -> None:
        if self.kind not in ("corpus", "benchmark"):
            raise InvalidValue(f"{self.name}: kind must be corpus or benchmark, not {self.kind!r}")
        if self.labels not in ("tags", "natural"):
            raise InvalidValue(f"{self.name}: labels must be tags or natural, not {self.labels!r}")

    def plan(
        self,
        path: str | Path | Sequence[str | Path] | None = None,
        split: str | None = None,
        options: Mapping[str, object] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> ReadPlan:
        """What to read: the reader, its units per split, its validated options, the label map
        (`labels`: raw tag -> label, read before the packaged table), and notes.

        `path` is one or more local files, folders or globs (see `inputs.py`), or for Hugging
        Face datasets a Hub id; without it, the source's local copy (`default_path`) or else
        its Hub origin is read. A Hub id, a `save_to_disk` folder, or any path given to the
        `hf` source is read by the `hf` reader; everything else by the source's own reader.

        Raises:
            BuildersError: no such path, an unknown split, a bad option, a label map for a
                source with its own types, or nothing to read.
        """
        mapping = self._label_map(labels)
        plan = self._plan(path, split, dict(options or {}))
        if not mapping:
            return plan
        recorded = {**plan.user_options, "label_map": dict(sorted(mapping.items()))}
        return dataclasses.replace(plan, user_options=recorded, label_map=mapping)

    def _label_map(self, labels: Mapping[str, str] | None) -> dict[str, str]:
        if labels and self.label_fn:
            raise BuildersError(
                f"source {self.name!r} names its types by its own table (Few-NERD's "
                "coarse-fine types): --label-map does not apply to it"
            )
        return label_map(labels or {})

    def _plan(
        self, path: str | Path | Sequence[str | Path] | None, split: str | None, user: dict
    ) -> ReadPlan:
        """The reader, its units and options for `path` (see `plan`)."""
        split = check_split(split) if split is not None else None
        given = [path] if isinstance(path, (str, Path)) else list(path or [])
        if not given:
            local = self.default_path()
            if local is None:
                return self._origin_plan(split, user)
            given = [local]
        first = str(given[0])
        if (
            self.module == "hf"
            or (not Path(first).exists() and is_hub_id(first))
            or (Path(first).is_dir() and _hf().is_dataset_folder(Path(first)))
        ):
            if len(given) > 1:
                raise BuildersError("a Hugging Face dataset is read one at a time: give one --path")
            return self._dataset_plan(first, split, user, from_origin=False)
        paths = expand(given)
        units, notes = assign(paths, self.splits, split)
        opts = parse_options(self.module, {**self.options, **user})
        return ReadPlan(
            self.module,
            cast(dict[str, list[Unit]], units),
            opts,
            {k: opts[k] for k in user},
            ", ".join(map(str, paths)),
            tuple(notes),
        )

    def _origin_plan(self, split: str | None, user: dict[str, object]) -> ReadPlan:
        """Read from the Hub origin; offline (or when it fails) say how to give the files."""
        if not self.origin:
            raise BuildersError(
                f"source {self.name!r} has no default origin: give the files with --path "
                f"({self.description})"
            )
        if self.module == "hf":
            return self._dataset_plan(self.origin, split, user, from_origin=True)
        try:
            return self._dataset_plan(self.origin, split, user, from_origin=True)
        except BuildersError as exc:
            local = f" (no $LABELSHIFT_DATA/{self.local})" if self.local else ""
            offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
            why = (
                "cannot be reached offline (HF_HUB_OFFLINE is set)"
                if offline
                else f"failed ({exc})"
            )
            origin = self.origin + (f"[{self.origin_config}]" if self.origin_config else "")
            raise BuildersError(
                f"source {self.name!r}: no local copy{local}, and reading its Hub origin "
                f"{origin} {why}: give the files with --path ({self.description})"
            ) from exc

    def _dataset_plan(
        self, dataset: str, split: str | None, user: dict[str, object], from_origin: bool
    ) -> ReadPlan:
        opts = {**(self.hub_options if self.module != "hf" else {}), **user}
        checked = parse_options("hf", opts)
        config = checked.pop("config", None) or (self.origin_config if from_origin else None)
        checked["config"] = config
        units = _hf().discover(dataset, None if config is None else str(config), split)
        origin = dataset + (f"[{config}]" if config else "")
        recorded = {"config": config, **{k: checked[k] for k in user if k != "config"}}
        return ReadPlan("hf", dict(units), checked, recorded, origin)

    def reader(self, module: str | None = None) -> Callable:
        mod = importlib.import_module(f"builders.sources.{module or self.module}")
        return mod.read  # type: ignore[no-any-return]

    def map_label(
        self, raw: str, mapping: Mapping[str, str] | None = None
    ) -> tuple[str, str | None]:
        """Raw label -> (verbalised, normalised label; coarse type or None). `mapping` is a
        normalised label map (`labels.label_map`), read before the packaged table."""
        if self.label_fn:
            mod, _, fn = self.label_fn.partition(":")
            return importlib.import_module(f"builders.sources.{mod}").__dict__[fn](raw)  # type: ignore[no-any-return]
        return verbalise(raw, mapping, natural=self.labels == "natural"), None

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


@dataclass(frozen=True)
class ReadPlan:
    """What an ingest reads: the reader module, its units per (canonical) split, the reader's
    options (the source's fixed ones with the user's), the user's own options (recorded in
    the store, the label map among them), a description of where it all comes from, and the
    label map (normalised raw tag -> label) read before the packaged table."""

    module: str
    units: Mapping[str, list[Unit]]
    options: Mapping[str, object]
    user_options: Mapping[str, object]
    origin: str
    notes: tuple[str, ...] = ()
    label_map: Mapping[str, str] = field(default_factory=_frozen)


def reader_options(module: str) -> type[ReaderOptions]:
    """The options dataclass a reader module declares (`Options`)."""
    mod = importlib.import_module(f"builders.sources.{module}")
    return mod.Options  # type: ignore[no-any-return]


def parse_options(module: str, given: Mapping[str, object]) -> dict[str, object]:
    """Validate `given` against the reader's options; all of them, defaults filled in."""
    return dict(reader_options(module).parse(given, module).as_dict())


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def is_hub_id(text: str) -> bool:
    """`org/name`: what a Hugging Face dataset id looks like (and a relative path may too)."""
    return bool(_HUB_ID.fullmatch(text)) and ".." not in text


def _hf() -> Any:
    return importlib.import_module("builders.sources.hf")


_CROSSNER_SPLITS = {"train": ("train.txt",), "dev": ("dev.txt",), "test": ("test.txt",)}
_CROSSNER_LICENSE = "mit"


def _crossner(domain: str, title: str) -> SourceSpec:
    return SourceSpec(
        name=f"crossner-{domain}",
        kind="benchmark",
        module="columns",
        description=f"CrossNER {title}: token<TAB>BIO-tag column files",
        options=_frozen({"columns": "token,tag", "scheme": "bio"}),
        origin="DFKI-SLT/cross_ner",
        origin_config=domain,
        local=f"crossner/{domain}",
        splits=_frozen(_CROSSNER_SPLITS),
        license=_CROSSNER_LICENSE,
        annotation="human",
        credits=("crossner",),
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
        options=_frozen({"columns": "token,tag", "scheme": "bio"}),
        origin="DFKI-SLT/cross_ner",
        origin_config="conll2003",
        local="crossner/conll2003",
        splits=_frozen(_CROSSNER_SPLITS),
        license="other",
        annotation="human",
        credits=("crossner",),
    ),
    SourceSpec(
        name="mit-movie",
        kind="benchmark",
        module="columns",
        description="MIT Movie 'eng' corpus (MIT SLS: engtrain.bio, engtest.bio): "
        "BIO-tag<TAB>token, label first (token first is read too)",
        # No Hub copy of the `eng` corpus is registered: tner/mit_movie_trivia is trivia10k13.
        options=_frozen({"scheme": "bio"}),
        local="mit-movie",
        splits=_frozen({"train": ("*train*.bio",), "test": ("*test*.bio",)}),
        license="unknown",
        annotation="human",
    ),
    SourceSpec(
        name="mit-movie-trivia",
        kind="benchmark",
        module="columns",
        description="MIT Movie 'trivia10k13' corpus (MIT SLS: trivia10k13train.bio, "
        "trivia10k13test.bio): BIO-tag<TAB>token, label first",
        options=_frozen({"scheme": "bio"}),
        local="mit-movie-trivia",
        splits=_frozen({"train": ("*train*.bio",), "test": ("*test*.bio",)}),
        license="unknown",
        annotation="human",
    ),
    SourceSpec(
        name="mit-restaurant",
        kind="benchmark",
        module="columns",
        description="MIT Restaurant: BIO-tag<TAB>token, label first (token first is read too)",
        options=_frozen({"scheme": "bio"}),
        origin="tner/mit_restaurant",
        local="mit-restaurant",
        splits=_frozen({"train": ("*train*.bio",), "test": ("*test*.bio",)}),
        license="unknown",
        annotation="human",
    ),
    SourceSpec(
        name="conll2003",
        kind="benchmark",
        module="columns",
        description="CoNLL-2003: token POS chunk BIO-tag, space separated, -DOCSTART- lines",
        options=_frozen({"columns": "token,pos,chunk,tag", "scheme": "bio"}),
        origin="eriktks/conll2003",
        local="conll2003",
        splits=_frozen(
            {"train": ("train.txt",), "dev": ("valid.txt", "dev.txt"), "test": ("test.txt",)}
        ),
        license="other",
        annotation="human",
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
        annotation="human",
        credits=("fewnerd",),
    ),
    SourceSpec(
        name="pilener",
        kind="corpus",
        module="pilener",
        description="Pile-NER conversation JSON (train.json or one-question evaluation files); "
        "also its BIO conversion (.bio)",
        origin="Universal-NER/Pile-NER-type",
        local="pilener/pilener-391xALL-dev.bio",
        # SLIMER's held-out slice is training material despite the `dev` in its name
        splits=_frozen({"train": ("pilener-391xALL-dev.bio*",)}),
        labels="natural",
        license="cc-by-nc-4.0",
        annotation="llm",
        credits=("universalner",),
        loader_version="2",  # 2: tags among its types verbalised (`org` -> organization)
    ),
    SourceSpec(
        name="pilener-sample",
        kind="corpus",
        module="columns",
        description="Bundled real sample: 2,217 Pile-NER passages in BIO (SLIMER's held-out slice)",
        # SLIMER's conversion flattened overlapping mentions, leaving 156 `I-x` tags right after
        # a `y` entity; they are read as `B-x` and counted as `repaired_tags`.
        options=_frozen({"columns": "token,tag", "scheme": "bio", "sep": "\t", "repair": True}),
        origin="Universal-NER/Pile-NER-type",
        local="package:sample/pilener-391xALL-dev.bio.xz",
        splits=_frozen({"train": ("pilener-391xALL-dev.bio*",)}),
        # natural-language types; none of the sample's 368 is a tag of the table, so its
        # labels are read as they are (version 1 reads it the same)
        labels="natural",
        license="cc-by-nc-4.0",
        annotation="llm",
        credits=("universalner", "slimer"),
    ),
    SourceSpec(
        name="nuner",
        kind="corpus",
        module="nuner",
        description="NuNER CSV: input text, output list literal of '<mention> <> <type>'",
        origin="numind/NuNER",
        labels="natural",
        license="mit",
        annotation="llm",
        credits=("nuner",),
        loader_version="2",  # 2: tags among its types verbalised
    ),
    SourceSpec(
        name="gliner",
        kind="corpus",
        module="gliner",
        description="GLiNER json: training (tokenized_text, ner) or benchmark (sentence, entities)",
        labels="natural",
        license="unknown",
        # 2: benchmark sentences split on whitespace, as GLiNER's eval; 3: tags among its types
        # verbalised (`PER` -> person)
        loader_version="3",
    ),
    SourceSpec(
        name="columns",
        kind="corpus",
        module="columns",
        description="Any column file: BIO/IO/BIOES, token-first or label-first (found from the "
        "values, or --columns), tab or space",
        license="unknown",
        loader_version="2",  # 2: tags verbalised by the packaged table (`PER` -> person)
    ),
    SourceSpec(
        name="hf",
        kind="corpus",
        module="hf",
        description="Any Hugging Face dataset with a tokens column and tag sequences",
        license="unknown",
        loader_version="2",  # 2: tags verbalised by the packaged table (`PER` -> person)
    ),
]

SOURCES: Mapping[str, SourceSpec] = MappingProxyType({s.name: s for s in _SPECS})


def check_split(name: str) -> str:
    """A split name the user gave, as its canonical name (`validation` -> `dev`).

    Raises:
        UnknownNameError: the name is not train, dev, test or one of their aliases.
    """
    canon = SPLIT_ALIASES.get(name.strip().lower())
    if canon is None:
        raise UnknownNameError("split", name, list(SPLIT_ALIASES))
    return canon


def get_source(name: str) -> SourceSpec:
    if name not in SOURCES:
        raise UnknownNameError("source", name, list(SOURCES))
    return SOURCES[name]
