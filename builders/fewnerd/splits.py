"""Few-NERD INTRA / INTER splits, rebuilt from the span store (METHOD.md section 5).

Each sentence's part is picked among those owning one of its types, keyed by (seed,
split/index) through BLAKE2b, so that it depends neither on processing order nor on the name
the source is stored under.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from builders.defaults import (
    FEWNERD_ASSIGNMENTS,
    FEWNERD_MODES,
    SEED,
    SPLITS,
    hub_split,
)
from builders.errors import (
    CannotBuild,
    ConflictingOptions,
    InputError,
    InvalidValue,
    SplitNotStored,
    opt,
)
from builders.labels import fewnerd_coarse_of as coarse_of
from builders.labels import fewnerd_coarse_types as coarse_types
from builders.labels import fewnerd_fine_types as fine_types
from builders.labels import fewnerd_official_name as official_name
from builders.labels import fewnerd_official_parts
from builders.labels import fewnerd_verbalise as verbalise
from builders.progress import progress_bar
from builders.shift.report import FamiliarityReport, LabelTable, measure
from builders.shift.specs import EmbeddingSpec, MetricSpec, spec_fields
from builders.sources.base import Example
from builders.store import Store

#: The parts of a split: the canonical splits (published as train / validation / test).
PARTS = SPLITS
#: Fraction of each coarse type's fine types sent to dev and to test by the random INTER split.
RANDOM_SHARE = 0.2


@dataclass(frozen=True)
class FewnerdRequest:
    """What `builders fewnerd-splits` builds; `familiarity`: measure the validation and test
    types against the train types."""

    mode: str
    assignment: str = "official"
    seed: int = SEED
    source: str = "fewnerd"
    familiarity: bool = True
    embedding: EmbeddingSpec = EmbeddingSpec()
    metric: MetricSpec = MetricSpec()

    @classmethod
    def from_dict(cls, source: str, params: Mapping[str, Any]) -> FewnerdRequest:
        """A request from a Few-NERD scenario's flat keys."""
        embedding = EmbeddingSpec(**{key: params[key] for key in spec_fields(EmbeddingSpec)})
        return cls(
            params["mode"],
            params["assignment"],
            int(params["seed"]),
            source,
            bool(params["familiarity"]),
            embedding,
            MetricSpec(k=int(params["k"])),
        )

    def command_line(self) -> str:
        """The command recorded in the folder (what rebuilds the split's parts)."""
        return (
            f"builders fewnerd-splits --mode {self.mode} --assignment {self.assignment} "
            f"--seed {self.seed} --source {self.source}"
        )


def split_and_measure(
    store: Store,
    request: FewnerdRequest,
    *,
    progress: Callable[[str], AbstractContextManager[Callable[[int], None]]] | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> tuple[SplitBuild, FamiliarityReport | None]:
    """The request's split and, when asked, its Familiarity. `progress(description)` gives
    the split's sentence counter as a context; `on_stage` hears each step."""
    stage = on_stage or (lambda s: None)
    progress = progress or (lambda desc: progress_bar(desc, quiet=True))
    with progress(f"split {request.source} ({request.mode})") as bar:
        build = build_split(
            store, request.source, request.mode, request.assignment, request.seed, bar
        )
    if not request.familiarity:
        return build, None
    stage(f"Familiarity with {request.embedding.model} (K={request.metric.k})")
    return build, familiarity_summary(store, build, request.embedding, request.metric)


def assign_parts(
    mode: str, assignment: str = "official", seed: int = 0, types: Iterable[str] | None = None
) -> dict[str, str]:
    """Map every fine type (official spelling; default the 66) to its part: `train`, `dev` or
    `test`. `random` (INTER only) draws 60/20/20 of each coarse type's fine types with `seed`,
    at least one dev and one test type where it has 3 or more."""
    if mode not in FEWNERD_MODES:
        raise InvalidValue(f"unknown mode {mode!r}. Valid: {', '.join(FEWNERD_MODES)}")
    if assignment not in FEWNERD_ASSIGNMENTS:
        raise InvalidValue(
            f"unknown assignment {assignment!r}. Valid: {', '.join(FEWNERD_ASSIGNMENTS)}"
        )
    names = sorted({official_name(t) for t in (types if types is not None else fine_types())})
    bad = [n for n in names if coarse_of(n) not in coarse_types()]
    if bad:
        raise InvalidValue(f"not Few-NERD types (unknown coarse type): {', '.join(bad)}")
    if mode == "intra":
        if assignment != "official":
            raise ConflictingOptions("INTRA has only the official assignment (by coarse type)")
        by_coarse = {coarse_of(f): p for f, p in fewnerd_official_parts("intra").items()}
        return {n: by_coarse[coarse_of(n)] for n in names}
    if assignment == "official":
        owned = fewnerd_official_parts("inter")
        extra = [n for n in names if n not in owned]
        if extra:
            raise InvalidValue(
                f"the official INTER assignment does not know {', '.join(extra)}; "
                f"use {opt('assignment', 'random')} for new types"
            )
        return {n: owned[n] for n in names}
    out: dict[str, str] = {}
    for coarse in sorted({coarse_of(n) for n in names}):
        group = [n for n in names if coarse_of(n) == coarse]
        random.Random(f"fewnerd-inter:{seed}:{coarse}").shuffle(group)
        share = math.floor(RANDOM_SHARE * len(group) + 0.5)
        if len(group) >= 3:
            share = max(share, 1)
        for i, name in enumerate(group):
            out[name] = "dev" if i < share else "test" if i < 2 * share else "train"
    return dict(sorted(out.items()))


def pick(seed: int, key: str, n: int) -> int:
    """A uniform, seeded choice among `n` candidates keyed by a sentence (order independent)."""
    digest = hashlib.blake2b(f"{seed}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % n


@dataclass
class Part:
    """One part of a built split: its rows as columns, and its counts."""

    name: str
    ids: list[str] = field(default_factory=list)
    tokens: list[list[str]] = field(default_factory=list)
    spans: list[list[dict[str, Any]]] = field(default_factory=list)
    type_counts: Counter[str] = field(default_factory=Counter)

    @property
    def sentences(self) -> int:
        return len(self.ids)

    def add(self, sid: str, tokens: list[str], spans: list[dict[str, Any]]) -> None:
        """Append a sentence; its spans must not overlap (IO tags cannot show that)."""
        last = 0
        for span in spans:
            if span["start"] < last:
                raise InputError(f"{sid}: overlapping spans cannot be tagged")
            last = span["end"]
            self.type_counts[span["label"]] += 1
        self.ids.append(sid)
        self.tokens.append(tokens)
        self.spans.append(spans)

    def summary(self) -> dict[str, Any]:
        return {
            "sentences": self.sentences,
            "mentions": sum(self.type_counts.values()),
            "types": len(self.type_counts),
            "type_list": sorted(self.type_counts),
        }


@dataclass
class SplitBuild:
    """A built INTRA / INTER split (before writing)."""

    source: str
    mode: str
    assignment: str
    seed: int
    parts_of: dict[str, str]
    parts: dict[str, Part]
    fine_names: list[str]
    input_sentences: int
    dropped_no_entity: int
    relabelled_o: int
    origin: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The source's negatives, which the Few-NERD layout has no column for (counted only).
    negatives_left_out: int = 0
    negative_spans_left_out: int = 0
    #: Why the parts miss mentions (`split_input_warning`), or None.
    warning: str | None = None

    @property
    def name(self) -> str:
        return f"fewnerd-{self.mode}"

    def summary(self) -> dict[str, Any]:
        """The split as its `summary.json` has it: parts by their published names."""
        parts = {}
        for p in PARTS:
            parts[hub_split(p)] = self.parts[p].summary()
            parts[hub_split(p)]["origin_splits"] = dict(sorted(self.origin.get(p, {}).items()))
        out = {
            "name": self.name,
            "source": self.source,
            "mode": self.mode,
            "assignment": self.assignment,
            "seed": self.seed,
            "input_sentences": self.input_sentences,
            "dropped_no_entity": self.dropped_no_entity,
            "relabelled_o": self.relabelled_o,
            "parts": parts,
            "assignment_map": {t: hub_split(p) for t, p in sorted(self.parts_of.items())},
        }
        if self.warning:
            out["warning"] = self.warning
        if self.negatives_left_out or self.negative_spans_left_out:
            out["left_out"] = {
                "negatives": self.negatives_left_out,
                "negative_spans": self.negative_spans_left_out,
            }
        return out


def build_split(
    store: Store,
    source: str,
    mode: str,
    assignment: str = "official",
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> SplitBuild:
    """Rebuild Few-NERD INTRA or INTER parts from every stored sentence of `source`."""
    store.require_source(source)
    labels = [lab for lab, _, _ in store.label_counts(source, by="label")]
    parts_of = assign_parts(mode, assignment, seed, labels)
    part_index = {lab: PARTS.index(parts_of[official_name(lab)]) for lab in labels}
    chosen: dict[tuple[str, int], int] = {}
    for split, idx, labs in store.sentence_labels(source):
        cands = sorted({part_index[lab] for lab in labs})
        chosen[split, idx] = cands[pick(seed, f"{split}/{idx}", len(cands))]
    parts = {p: Part(p) for p in PARTS}
    origin: dict[str, Counter[str]] = {p: Counter() for p in PARTS}
    relabelled = 0
    rows = store.sentences_with_spans(source, with_mentions_only=True)
    rows.sort(key=lambda r: chosen[r[0], r[1]])  # stable: corpus order inside each part
    for n, (split, idx, tokens, spans) in enumerate(rows, start=1):
        part = parts[PARTS[chosen[split, idx]]]
        kept = [
            {"start": a, "end": b, "label": official_name(lab)}
            for a, b, lab in spans
            if part_index[lab] == chosen[split, idx]
        ]
        part.add(f"{split}/{idx}", tokens, kept)
        origin[part.name][split] += 1
        relabelled += len(spans) - len(kept)
        if progress and n % 10_000 == 0:
            progress(10_000)
    if progress:
        progress(len(rows) % 10_000)
    extra = sorted(set(parts_of) - set(fine_types()))
    stored = store.stored_splits(source)
    return SplitBuild(
        source=source,
        mode=mode,
        assignment=assignment,
        seed=seed,
        parts_of=parts_of,
        parts=parts,
        fine_names=[*fine_types(), *extra],
        input_sentences=store.count_sentences(source),
        dropped_no_entity=store.count_sentences(source) - len(rows),
        relabelled_o=relabelled,
        origin={p: dict(c) for p, c in origin.items()},
        negatives_left_out=sum(s.negatives for s in stored.values()),
        negative_spans_left_out=sum(s.negative_spans for s in stored.values()),
        warning=split_input_warning(store, source, mode, parts_of),
    )


def split_input_warning(
    store: Store, source: str, mode: str, parts_of: Mapping[str, str]
) -> str | None:
    """Why the rebuilt parts miss mentions (METHOD.md section 5: stored splits of disjoint
    types, mixed into other parts), or None."""
    labels = {
        split: labs
        for split in store.stored_splits(source)
        if (labs := set(store.split_labels(source, split)))  # a split of no mention tells none
    }
    if len(labels) < 2 or any(a & b for a, b in combinations(labels.values(), 2)):
        return None  # one split (nothing to tell), or shared types: the supervised data
    parts = {
        split: {parts_of[official_name(lab)] for lab in labs} for split, labs in labels.items()
    }
    own = [next(iter(p)) for p in parts.values() if len(p) == 1]
    if len(own) == len(parts) and len(set(own)) == len(own):
        return None  # each stored split is one part of this very split
    shown = ", ".join(f"{split} {len(labs)}" for split, labs in sorted(labels.items()))
    built = mode.upper()
    return (
        f"{source}'s stored splits hold disjoint entity types ({shown} types): it is a Few-NERD "
        f"split by type already (the official INTER or INTRA files), whose sentences leave the "
        f"types of its other parts unannotated, so the {built} parts rebuilt from it miss "
        f"those mentions; ingest Few-NERD's supervised files (every type in every split) to "
        f"rebuild {built}"
    )


def familiarity_summary(
    store: Store,
    build: SplitBuild,
    embedding: EmbeddingSpec = EmbeddingSpec(),
    metric: MetricSpec = MetricSpec(),
) -> FamiliarityReport:
    """Familiarity of the validation and test types (verbalised; the parts by published name)
    against the train part's mentions per type (METHOD.md 2)."""
    train = build.parts["train"].type_counts
    if not train:
        raise CannotBuild("the train part has no mentions; Familiarity is undefined")
    counts: Counter[str] = Counter()
    for typ, n in train.items():
        counts[verbalise(typ)] += n
    evals = {
        hub_split(p): tuple(dict.fromkeys(verbalise(t) for t in sorted(build.parts[p].type_counts)))
        for p in ("dev", "test")
        if build.parts[p].type_counts
    }
    if not evals:
        raise CannotBuild("the validation and test parts have no mentions")
    return measure(store, LabelTable.from_counts(counts), evals, embedding=embedding, metric=metric)


def store_examples(store: Store, source: str, split: str) -> list[Example]:
    """The sentences of one stored split with official type names, in index order."""
    store.require_source(source)
    rows = store.sentences_with_spans(source, split)
    if not rows:
        have = store.splits_of(source)
        raise SplitNotStored(
            f"source {source!r} has no split {split!r} (it has: {', '.join(have)})", source, split
        )
    return [
        Example(
            tokens=tokens,
            spans=[(a, b, official_name(lab)) for a, b, lab in spans],
            raw_id=f"{sp}/{idx}",
        )
        for sp, idx, tokens, spans in rows
    ]
