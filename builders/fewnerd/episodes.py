"""Few-NERD's greedy N-way K~2K-shot episode sampler (Algorithm 1; METHOD.md section 5); a
sentence that adds nothing to a type still below K is passed over too. Mentions are counted
as the official IO files count them (adjacent mentions of one type are one). "At random until
done" is one pass over a random permutation of the candidates: counts only grow, so a sentence
rejected once stays rejected; an unfinished pass redraws the types, a bounded number of times.
Records are the official JSONL shape (`episode_record`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

from builders.deferred import np
from builders.errors import CannotBuild, InvalidValue
from builders.files import atomic_open
from builders.sources.base import Example

Span = tuple[int, int, str]


@dataclass(frozen=True, slots=True)
class Episode:
    """Types in drawn order; support and query as indices into the examples."""

    types: tuple[str, ...]
    support: tuple[int, ...]
    query: tuple[int, ...]


def entity_counts(spans: Iterable[Span]) -> Counter[str]:
    """Mentions per type as an IO tagging shows them (adjacent same-type spans are one)."""
    out: Counter[str] = Counter()
    last_stop, last_label = -1, None
    for start, stop, label in sorted(spans):
        if not (start == last_stop and label == last_label):
            out[label] += 1
        last_stop, last_label = stop, label
    return out


def io_counts(labels: Sequence[str]) -> Counter[str]:
    """Mentions per type of one IO-tagged sentence (runs of one non-O tag)."""
    return Counter(tag for tag, _ in groupby(labels) if tag != "O")


def _greedy(
    cands: np.ndarray,
    counts: list[Counter[str]],
    target: tuple[str, ...],
    k: int,
    rng: np.random.Generator,
    exclude: frozenset[int] = frozenset(),
) -> list[int] | None:
    have = dict.fromkeys(target, 0)
    below = len(target)
    chosen: list[int] = []
    for i in cands[rng.permutation(len(cands))].tolist():
        if i in exclude:
            continue
        c = counts[i]
        useful = False
        for t, n in c.items():
            if have[t] + n > 2 * k:
                break
            useful = useful or have[t] < k
        else:
            if not useful:
                continue
            chosen.append(i)
            for t, n in c.items():
                if have[t] < k <= have[t] + n:
                    below -= 1
                have[t] += n
            if below == 0:
                return chosen
    return None


def sample_episodes(
    examples: Sequence[Example],
    types: Sequence[str] | None,
    n_way: int,
    k_shot: int,
    n_episodes: int,
    seed: int = 0,
    q_shot: int | None = None,
    max_attempts: int = 1000,
    progress: Callable[[int], None] | None = None,
) -> list[Episode]:
    """Sample `n_episodes` N-way K~2K-shot episodes (support and query), deterministically,
    from `types` (default: every type of the examples), each in at most `max_attempts` type
    draws; `q_shot` is the query set's Q (default K)."""
    q = k_shot if q_shot is None else q_shot
    if n_way < 1 or k_shot < 1 or q < 1 or n_episodes < 0:
        raise InvalidValue(
            f"need n_way, k_shot, q_shot >= 1 and episodes >= 0 (got {n_way}, {k_shot}, {q}, {n_episodes})"
        )
    counts = [entity_counts(ex.spans) for ex in examples]
    pool = _type_pool(counts, types, n_way)
    groups = _by_type_set(counts)
    rng = np.random.default_rng(seed)
    out: list[Episode] = []
    for e in range(n_episodes):
        episode = _draw_episode(groups, counts, pool, (n_way, k_shot, q), rng, max_attempts)
        if episode is None:
            raise CannotBuild(
                f"episode {e + 1}: no {n_way}-way {k_shot}~{2 * k_shot}-shot episode (query "
                f"{q}~{2 * q}) found in {max_attempts} type draws; the part has too few "
                "sentences per type for this setting (lower N or K)"
            )
        out.append(episode)
        if progress:
            progress(1)
    return out


def _type_pool(
    counts: Sequence[Counter[str]], types: Sequence[str] | None, n_way: int
) -> list[str]:
    """The types episodes draw from, sorted: `types`, or every type of the part (N at least)."""
    pool = sorted(set(types) if types is not None else {t for c in counts for t in c})
    if len(pool) < n_way:
        raise CannotBuild(
            f"{n_way}-way episodes need {n_way} types; the part has {len(pool)}"
            + (f" ({', '.join(pool)})" if pool else "")
        )
    return pool


def _by_type_set(counts: Sequence[Counter[str]]) -> list[tuple[frozenset[str], np.ndarray]]:
    """Indices of the sentences with entities, grouped by their set of types (first seen first)."""
    groups: dict[frozenset[str], list[int]] = {}
    for i, c in enumerate(counts):
        if c:
            groups.setdefault(frozenset(c), []).append(i)
    return [(key, np.asarray(indices, dtype=np.int64)) for key, indices in groups.items()]


def _draw_episode(
    groups: Sequence[tuple[frozenset[str], np.ndarray]],
    counts: list[Counter[str]],
    pool: Sequence[str],
    shots: tuple[int, int, int],
    rng: np.random.Generator,
    max_attempts: int,
) -> Episode | None:
    """One episode of `shots` = (N, K, Q) in up to `max_attempts` draws of N types; None when
    every draw fails."""
    n_way, k_shot, q = shots
    for _ in range(max_attempts):
        target = tuple(pool[i] for i in rng.choice(len(pool), n_way, replace=False))
        tset = set(target)
        parts = [a for key, a in groups if key <= tset]
        if not parts:
            continue
        cands = np.concatenate(parts)
        support = _greedy(cands, counts, target, k_shot, rng)
        if support is None:
            continue
        query = _greedy(cands, counts, target, q, rng, frozenset(support))
        if query is None:
            continue
        return Episode(target, tuple(support), tuple(query))
    return None


def episode_record(
    ep: Episode, examples: Sequence[Example], lowercase: bool = False
) -> dict[str, Any]:
    """The official JSONL record of an episode (IO labels; outside the N types -> O)."""
    keep = set(ep.types)

    def side(indices: tuple[int, ...]) -> dict[str, list[list[str]]]:
        words, labels = [], []
        for i in indices:
            ex = examples[i]
            tags = ["O"] * len(ex.tokens)
            for start, stop, label in ex.spans:
                if label in keep:
                    tags[start:stop] = [label] * (stop - start)
            toks = list(ex.tokens)
            if lowercase:
                toks = [t.lower() for t in toks]
                tags = [t if t == "O" else t.lower() for t in tags]  # `O` stays, as officially
            words.append(toks)
            labels.append(tags)
        return {"word": words, "label": labels}

    types = [t.lower() for t in ep.types] if lowercase else list(ep.types)
    return {"support": side(ep.support), "query": side(ep.query), "types": types}


def check_record(
    rec: dict[str, Any], n_way: int, k_shot: int, q_shot: int | None = None
) -> list[str]:
    """Problems of one JSONL record (empty when it meets the sampler's guarantees: N types,
    K..2K mentions of each in the support set and Q..2Q in the query set, no other type)."""
    q = k_shot if q_shot is None else q_shot
    problems: list[str] = []
    if set(rec) != {"support", "query", "types"}:
        return [f"keys {sorted(rec)}, expected support, query, types"]
    types = rec["types"]
    if len(types) != n_way or len(set(types)) != n_way:
        problems.append(f"types {types}: expected {n_way} distinct")
    for name, lo in (("support", k_shot), ("query", q)):
        side = rec[name]
        if set(side) != {"word", "label"} or len(side["word"]) != len(side["label"]):
            problems.append(f"{name}: expected aligned word and label lists")
            continue
        if not side["word"]:
            problems.append(f"{name}: empty")
        total: Counter[str] = Counter()
        for j, (words, labels) in enumerate(zip(side["word"], side["label"], strict=True)):
            if len(words) != len(labels):
                problems.append(f"{name}[{j}]: {len(words)} words, {len(labels)} labels")
            c = io_counts(labels)
            if not c:
                problems.append(f"{name}[{j}]: no entity")
            if set(c) - set(types):
                problems.append(
                    f"{name}[{j}]: types outside the episode: {sorted(set(c) - set(types))}"
                )
            total += c
        for t in types:
            if not lo <= total[t] <= 2 * lo:
                problems.append(f"{name}: {t} has {total[t]} mentions, expected {lo}..{2 * lo}")
    return problems


def check_episode(
    ep: Episode, examples: Sequence[Example], n_way: int, k_shot: int, q_shot: int | None = None
) -> list[str]:
    """`check_record` on the rendered episode, plus what rendering hides: a type outside the N
    (rendered O), and sentences support and query share."""
    problems = check_record(episode_record(ep, examples), n_way, k_shot, q_shot)
    for name, indices in (("support", ep.support), ("query", ep.query)):
        for i in indices:
            outside = set(entity_counts(examples[i].spans)) - set(ep.types)
            if outside:
                problems.append(
                    f"{name}: sentence {i} has types outside the episode: {sorted(outside)}"
                )
    shared = set(ep.support) & set(ep.query)
    if shared:
        problems.append(f"support and query share sentences {sorted(shared)}")
    return problems


def check_all(
    episodes: Sequence[Episode],
    examples: Sequence[Example],
    n_way: int,
    k_shot: int,
    q_shot: int | None = None,
) -> None:
    """`check_episode` on every episode; refuses the first that breaks the guarantees."""
    for i, ep in enumerate(episodes, start=1):
        problems = check_episode(ep, examples, n_way, k_shot, q_shot)
        if problems:
            raise InvalidValue(
                f"episode {i} breaks the sampler's guarantees: {'; '.join(problems)}"
            )


def write_jsonl(path: str | Path, records: Iterable[dict[str, Any]]) -> Path:
    """Write records one JSON object a line (UTF-8, like the official files), atomically."""
    path = Path(path)
    with atomic_open(path) as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return path
