"""Few-NERD INTRA / INTER splits, rebuilt from the span store (METHOD.md section 5).

Every sentence of a source (all its stored splits, ordered by split then index) goes to one
part: its candidate parts are the parts owning at least one of its entity types, one is picked
at random, sentences without entities are dropped and entities of types the chosen part does
not own become O. The pick is keyed by (seed, split/index) through BLAKE2b, so it does not
depend on processing order or on the name the source is stored under.

The type system, the official INTRA and INTER assignments and the label verbalisations are data
(`builders/data/fewnerd.toml`). A built split is a Hub-ready folder (`builders.fewnerd_export.write_split`): parquet per
part with ClassLabel tags declared the way `DFKI-SLT/few-nerd` declares them, a provisional
README card and `summary.json`. Episodes are in `builders.fewnerd.episodes`.
"""

from __future__ import annotations

import hashlib
import math
import random
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import pyarrow as pa

from builders.errors import BuildersError
from builders.sources.base import Example
from builders.store import Store

MODES = ("intra", "inter")
ASSIGNMENTS = ("official", "random")
PARTS = ("train", "dev", "test")
#: Part -> split name in the published dataset.
HUB_SPLITS = {"train": "train", "dev": "validation", "test": "test"}
#: Fraction of each coarse type's fine types sent to dev and to test by the random INTER split.
RANDOM_SHARE = 0.2


@cache
def _table() -> dict[str, Any]:
    with resources.files("builders.data").joinpath("fewnerd.toml").open("rb") as fh:
        return tomllib.load(fh)


def coarse_types() -> tuple[str, ...]:
    """The 8 coarse types in `DFKI-SLT/few-nerd`'s ClassLabel order (without `O`)."""
    return tuple(_table()["coarse"])


def fine_types() -> tuple[str, ...]:
    """The 66 fine types, official spelling, in `DFKI-SLT/few-nerd`'s ClassLabel order."""
    return tuple(_table()["fine"])


@cache
def _official_names() -> dict[str, str]:
    return {f.lower(): f for f in fine_types()}


def official_name(label: str) -> str:
    """The official spelling of a stored (lower-cased) fine type; unknown types stay as they are."""
    return _official_names().get(label.lower(), label)


def coarse_of(fine: str) -> str:
    return fine.split("-", 1)[0].lower()


def verbalise(fine: str) -> str:
    """The label text embedded for Familiarity (`person-artist/author` -> "artist / author")."""
    table = _table()["verbalise"]
    name = official_name(fine)
    if name in table:
        return str(table[name])
    return name.split("-", 1)[-1].replace("/", " / ").lower()


def assign_parts(
    mode: str, assignment: str = "official", seed: int = 0, types: Iterable[str] | None = None
) -> dict[str, str]:
    """Map every fine type (official spelling) to its part: `train`, `dev` or `test`.

    Args:
        mode: `intra` (by coarse type) or `inter` (by fine type inside every coarse type).
        assignment: `official`, or `random` (INTER only: per coarse type, a seeded 60/20/20
            draw of its fine types; at least one dev and one test type where it has 3 or more).
        seed: seed of the random assignment.
        types: the fine types to assign (default: the 66 official ones).

    Raises:
        BuildersError: on an unknown mode or assignment, or a type the official table lacks.
    """
    if mode not in MODES:
        raise BuildersError(f"unknown mode {mode!r}. Valid: {', '.join(MODES)}")
    if assignment not in ASSIGNMENTS:
        raise BuildersError(f"unknown assignment {assignment!r}. Valid: {', '.join(ASSIGNMENTS)}")
    names = sorted({official_name(t) for t in (types if types is not None else fine_types())})
    bad = [n for n in names if coarse_of(n) not in coarse_types()]
    if bad:
        raise BuildersError(f"not Few-NERD types (unknown coarse type): {', '.join(bad)}")
    if mode == "intra":
        if assignment != "official":
            raise BuildersError("INTRA has only the official assignment (by coarse type)")
        by_coarse = {c: p for p in PARTS for c in _table()["intra"][p]}
        return {n: by_coarse[coarse_of(n)] for n in names}
    if assignment == "official":
        owned = {t: p for p in ("dev", "test") for t in _table()["inter"][p]}
        extra = [n for n in names if n not in _official_names().values()]
        if extra:
            raise BuildersError(
                f"the official INTER assignment does not know {', '.join(extra)}; "
                "use --assignment random for new types"
            )
        return {n: owned.get(n, "train") for n in names}
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

    @property
    def mentions(self) -> int:
        return sum(self.type_counts.values())

    def summary(self) -> dict[str, Any]:
        return {
            "sentences": self.sentences,
            "mentions": self.mentions,
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

    @property
    def name(self) -> str:
        return f"fewnerd-{self.mode}"

    def summary(self) -> dict[str, Any]:
        parts = {}
        for p in PARTS:
            parts[p] = self.parts[p].summary()
            parts[p]["origin_splits"] = dict(sorted(self.origin.get(p, {}).items()))
        return {
            "name": self.name,
            "source": self.source,
            "mode": self.mode,
            "assignment": self.assignment,
            "seed": self.seed,
            "input_sentences": self.input_sentences,
            "dropped_no_entity": self.dropped_no_entity,
            "relabelled_o": self.relabelled_o,
            "parts": parts,
            "assignment_map": dict(sorted(self.parts_of.items())),
        }


def _split_rank(split: str) -> str:
    return f"{ {'train': 0, 'dev': 1, 'test': 2}.get(split, 3) }{split}"


def build_split(
    store: Store,
    source: str,
    mode: str,
    assignment: str = "official",
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> SplitBuild:
    """Rebuild Few-NERD INTRA or INTER parts from every stored sentence of `source`.

    Raises:
        StoreError: when the source is not in the store.
        BuildersError: when its labels are not Few-NERD types, or spans overlap.
    """
    store.require_source(source)
    con = store.con
    labels = [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT label FROM mentions WHERE source = ? ORDER BY label", [source]
        ).fetchall()
    ]
    parts_of = assign_parts(mode, assignment, seed, labels)
    label_rows = [
        (lab, official_name(lab), PARTS.index(parts_of[official_name(lab)])) for lab in labels
    ]
    con.register(
        "_fn_assign",
        pa.table(
            {
                "label": pa.array([r[0] for r in label_rows], pa.string()),
                "name": pa.array([r[1] for r in label_rows], pa.string()),
                "part": pa.array([r[2] for r in label_rows], pa.int32()),
            }
        ),
    )
    try:
        (total,) = con.execute(
            "SELECT count(*) FROM sentences WHERE source = ?", [source]
        ).fetchall()[0]
        cands = con.execute(
            "SELECT m.split, m.idx, list(DISTINCT a.part ORDER BY a.part) FROM mentions m "
            "JOIN _fn_assign a USING (label) WHERE m.source = ? GROUP BY m.split, m.idx",
            [source],
        ).fetchall()
        choice = {"split": [], "idx": [], "part": []}  # type: dict[str, list[Any]]
        for split, idx, parts in cands:
            choice["split"].append(split)
            choice["idx"].append(idx)
            choice["part"].append(
                parts[0] if len(parts) == 1 else parts[pick(seed, f"{split}/{idx}", len(parts))]
            )
        con.register(
            "_fn_choice",
            pa.table(
                {
                    "split": pa.array(choice["split"], pa.string()),
                    "idx": pa.array(choice["idx"], pa.int32()),
                    "part": pa.array(choice["part"], pa.int32()),
                }
            ),
        )
        rows = con.execute(
            "SELECT c.part, s.split, s.idx, s.tokens, "
            "list({'start': m.start, 'end': m.stop, 'label': a.name} ORDER BY m.start, m.stop) "
            "FILTER (WHERE a.part = c.part) AS kept, count(*) AS n_all "
            "FROM _fn_choice c JOIN sentences s ON s.source = ? AND s.split = c.split AND s.idx = c.idx "
            "JOIN mentions m ON m.source = ? AND m.split = c.split AND m.idx = c.idx "
            "JOIN _fn_assign a ON a.label = m.label "
            "GROUP BY c.part, s.split, s.idx, s.tokens",
            [source, source],
        ).fetchall()
    finally:
        for view in ("_fn_assign", "_fn_choice"):
            con.unregister(view)  # a no-op for a view never registered
    rows.sort(key=lambda r: (r[0], _split_rank(r[1]), r[2]))
    parts = {p: Part(p) for p in PARTS}
    origin: dict[str, Counter[str]] = {p: Counter() for p in PARTS}
    relabelled = 0
    for n, (part_i, split, idx, tokens, kept, n_all) in enumerate(rows, start=1):
        part = parts[PARTS[part_i]]
        last = 0
        for span in kept:
            if span["start"] < last:
                raise BuildersError(f"{source}/{split}/{idx}: overlapping spans cannot be tagged")
            last = span["end"]
            part.type_counts[span["label"]] += 1
        part.ids.append(f"{split}/{idx}")
        part.tokens.append(list(tokens))
        part.spans.append(list(kept))
        origin[part.name][split] += 1
        relabelled += n_all - len(kept)
        if progress and n % 10_000 == 0:
            progress(10_000)
    if progress:
        progress(len(rows) % 10_000)
    extra = sorted(set(parts_of) - set(fine_types()))
    return SplitBuild(
        source=source,
        mode=mode,
        assignment=assignment,
        seed=seed,
        parts_of=parts_of,
        parts=parts,
        fine_names=[*fine_types(), *extra],
        input_sentences=int(total),
        dropped_no_entity=int(total) - len(rows),
        relabelled_o=relabelled,
        origin={p: dict(c) for p, c in origin.items()},
    )


def familiarity_summary(
    store: Store, build: SplitBuild, model: str, k: int = 1000, weighting: str = "zipf"
) -> dict[str, Any]:
    """Familiarity of the dev and test label sets against the train labels (METHOD.md 2).

    Labels are the verbalised fine types (`verbalise`); train support counts are the train
    part's mentions per type.
    """
    import numpy as np

    from builders.shift.embedder import Embedder, cosine_clipped
    from builders.shift.familiarity import exact_overlap, familiarity, summarise

    train = build.parts["train"].type_counts
    if not train:
        raise BuildersError("the train part has no mentions; Familiarity is undefined")
    train_types = sorted(train)
    train_text = [verbalise(t) for t in train_types]
    emb = Embedder(model)
    train_vec = emb.embed_cached(store.con, train_text)
    out: dict[str, Any] = {"model": emb.model_name, "k": k, "weighting": weighting}
    for part in ("dev", "test"):
        types = sorted(build.parts[part].type_counts)
        if not types:
            out[part] = None
            continue
        text = [verbalise(t) for t in types]
        sims = cosine_clipped(emb.embed_cached(store.con, text), train_vec)
        counts = np.array([train[t] for t in train_types], dtype=np.int64)
        values = familiarity(sims, counts, k=k, weighting=weighting, labels=train_text)
        out[part] = {
            **summarise(values).to_dict(),
            "labels": {t: round(float(v), 6) for t, v in zip(types, values, strict=True)},
            "exact_overlap": exact_overlap(text, train_text),
        }
    return out


def store_examples(store: Store, source: str, split: str) -> list[Example]:
    """The sentences of one stored split with official type names, in index order."""
    store.require_source(source)
    rows = store.con.execute(
        "SELECT s.idx, s.tokens, list((m.start, m.stop, m.label) ORDER BY m.start, m.stop) "
        "FILTER (WHERE m.label IS NOT NULL) FROM sentences s LEFT JOIN mentions m "
        "ON m.source = s.source AND m.split = s.split AND m.idx = s.idx "
        "WHERE s.source = ? AND s.split = ? GROUP BY s.idx, s.tokens ORDER BY s.idx",
        [source, split],
    ).fetchall()
    if not rows:
        have = [
            r[0]
            for r in store.con.execute(
                "SELECT DISTINCT split FROM sentences WHERE source = ? ORDER BY split", [source]
            ).fetchall()
        ]
        raise BuildersError(f"source {source!r} has no split {split!r} (it has: {', '.join(have)})")
    return [
        Example(
            tokens=list(tokens),
            spans=[(int(a), int(b), official_name(lab)) for a, b, lab in (spans or [])],
            raw_id=f"{split}/{idx}",
        )
        for idx, tokens, spans in rows
    ]
