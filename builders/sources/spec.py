"""A source's description (`SourceSpec`): its kind, reader and options, where it is read from
without `--path`, how its labels are verbalised, its licence and credits."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

from builders.labels import verbalise
from builders.sources import planning
from builders.sources.planning import frozen

Kind = Literal["corpus", "benchmark"]
#: What a source's raw labels are (METHOD.md section 6): `tags` (CoNLL's `PER`, CrossNER's
#: `programlang`) or `natural` language (Pile-NER's `field of study`).
LabelKind = Literal["tags", "natural"]


@dataclass(frozen=True)
class SourceSpec:
    """How to load one named source (`name`: also its default name in the store).

    - `origin`: the Hub dataset read without `--path` (online users); `local`, a folder or file
      under `$LABELSHIFT_DATA` (or `package:` data), is read before it; `local_note` says what
      that copy is where it is not the whole corpus.
    - `splits`: split -> file-name globs that name a file's split before the generic split
      words do (`valid.txt` is CoNLL's dev split).
    - `labels`: `tags`, verbalised through the packaged table, or `natural` language, which
      keeps the table's natural-language keys where no other tag is beside them; `label_fn`
      (`module:function`: raw label -> (label, coarse)) replaces the table (Few-NERD's types).
    - `hub_options`: the `hf` reader's options for the Hub origin; `license` is inherited by
      derived datasets; `annotation`: `llm`, `human` or `unknown`; `credits`: citation keys
      (`cards/_citations.md.j2`).
    - `loader_version`: bumped when the reader's output changes (part of the fingerprint);
      `profile`: the paper's quantile profile (`shift.scoring`), None: by the number of labels.
    """

    name: str
    kind: Kind
    module: str
    description: str
    options: Mapping[str, object] = field(default_factory=frozen)
    origin: str | None = None
    origin_config: str | None = None
    local: str | None = None
    splits: Mapping[str, tuple[str, ...]] = field(default_factory=frozen)
    labels: LabelKind = "tags"
    label_fn: str | None = None
    hub_options: Mapping[str, object] = field(default_factory=frozen)
    license: str = "unknown"
    annotation: str = "unknown"
    credits: tuple[str, ...] = ()
    loader_version: str = "1"
    profile: str | None = None
    local_note: str | None = None

    #: What to read: the reader, its units per split, its validated options (`planning.plan`).
    plan = planning.plan

    def reader(self, module: str | None = None) -> Callable:
        mod = importlib.import_module(f"builders.sources.{module or self.module}")
        return mod.read  # type: ignore[no-any-return]

    def map_label(
        self, raw: str, mapping: Mapping[str, str] | None = None
    ) -> tuple[str, str | None]:
        """Raw label -> (verbalised label, coarse type or None); `mapping` (`labels.label_map`)
        is read before the packaged table."""
        if self.label_fn:
            mod, _, fn = self.label_fn.partition(":")
            return importlib.import_module(f"builders.sources.{mod}").__dict__[fn](raw)  # type: ignore[no-any-return]
        return verbalise(raw, mapping, natural=self.labels == "natural"), None

    def default_path(self) -> Path | None:
        """Where to read from without `--path`: the packaged file, or `$LABELSHIFT_DATA/local`."""
        if self.local is None:
            return None
        if self.local.startswith("package:"):
            return Path(str(resources.files("builders.data").joinpath(self.local[8:])))
        root = os.environ.get("LABELSHIFT_DATA")
        if root and (Path(root) / self.local).exists():
            return Path(root) / self.local
        return None
