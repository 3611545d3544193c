"""Levels fitted to what they write: the sentences a level keeps, its size counted on its
rows, and levels of one size brought to agree (METHOD.md section 4).

    level, chosen = fit(store, cfg, table, level)      # one level: its labels and sentences
    levels = equal_sizes(store, cfg, table, [fit(...) for level in levels])
"""

from __future__ import annotations

from dataclasses import replace

from builders.deferred import np
from builders.errors import CannotBuild, opt
from builders.shift.report import LabelTable
from builders.splits.config import SplitConfig
from builders.splits.levels import Level, bound_share
from builders.store import Store
from builders.store.subsets import Selection


def choose_sentences(store: Store, cfg: SplitConfig, table: LabelTable, level: Level) -> Selection:
    """The sentences the level keeps (a seeded draw for its capped labels), asked of the
    store in its own spellings: a protocol that spells labels otherwise (`--protocol
    paper`: Few-NERD's `actor` for the stored `person-actor`) names the stored label a capped
    one stands for, as it does its whole ones (matched as `actor`, a label capped by
    `--max-label-share` kept no mention)."""
    whole = table.stored(level.labels(table))
    caps = {}
    for label, cap in level.capped(table).items():
        stored = table.members.get(label, [label])
        if len(stored) > 1:  # not in Few-NERD: its fine types' names are each one type's
            raise CannotBuild(
                f"{opt('protocol', cfg.metric.protocol)} spells {', '.join(stored)} as one "
                f"label, {label!r}, and the level keeps part of its mentions, which cannot be "
                f"shared among them; build with {opt('protocol', 'ours')}, or without "
                f"{opt('max_label_share')}"
            )
        caps[stored[0]] = cap
    return store.select_sentences(cfg.source, whole, caps, seed=cfg.metric.seed)


#: Levels cut to one size whose written sizes differ by more than this share of the smallest
#: are all fitted again to the smallest (a level's own labels may not fill the size: the
#: sentences of its whole labels can hold more of a capped label than its cap).
EQUAL_WITHIN = 0.004
EQUAL_ROUNDS = 8


def equal_sizes(
    store: Store, cfg: SplitConfig, table: LabelTable, levels: list[tuple[Level, Selection]]
) -> list[tuple[Level, Selection]]:
    """The fitted levels, fitted again to the smallest one's written size while they differ
    by more than `EQUAL_WITHIN` (a level fitted to a smaller size can write less than it:
    sizes only fall, a few rounds at most; levels not cut to a size are left as they are).
    A level fitted again has its labels bounded anew (`bound_share`, --max-label-share) at
    the size it is fitted to, and so is a level that wrote less than it was planned at while
    it plans a label over the bound of what it wrote (a bound of 0.3 of 1,515 planned
    mentions is 454 of a level that writes 1,044: 43%)."""
    share = cfg.label_share_bound
    for _ in range(EQUAL_ROUNDS):
        sized = [chosen.mentions for lv, chosen in levels if lv.take is not None]
        smallest = min(sized, default=0)
        again = [
            lv.take is not None
            and (chosen.mentions > smallest * (1 + EQUAL_WITHIN) or _over(lv, smallest, share))
            for lv, chosen in levels
        ]
        if not any(again):
            break
        levels = [
            fit(store, cfg, table, bound_share(replace(lv, size=smallest), table, share))
            if redo
            else (lv, chosen)
            for (lv, chosen), redo in zip(levels, again, strict=True)
        ]
    return levels


def _over(level: Level, size: int, share: float | None) -> bool:
    """Whether the level plans a label over `share` of `size` mentions (beyond
    `EQUAL_WITHIN`), where a bound is asked and can be met (`bound_share`)."""
    if share is None or level.take is None or level.order is None:
        return False
    if level.order.size * share < 1:
        return False
    return bool((level.take > share * size * (1 + EQUAL_WITHIN)).any())


def fit(store: Store, cfg: SplitConfig, table: LabelTable, level: Level) -> tuple[Level, Selection]:
    """The level and its sentences; a level cut to a size (familiarity windows, `--match
    mentions`) holds that size counted on what it writes (METHOD.md section 4,
    `Store.fit_level`). The store gets the stored labels each label stands for
    (`table.members`: `--protocol paper` spells the stored `person-actor` as `actor`): by
    their protocol spelling they would count no mention, and all be taken whole."""
    if level.take is None or level.order is None:
        return level, choose_sentences(store, cfg, table, level)
    size = level.size if level.size is not None else int(level.take.sum())
    order = [table.labels[i] for i in level.order.tolist()]
    whole, caps = store.fit_level(cfg.source, order, level.take, size, table.members)
    index = {lab: i for i, lab in enumerate(table.labels)}
    done = level.realised([index[lab] for lab in whole], {index[k]: v for k, v in caps.items()})
    chosen = store.select_fitted(
        cfg.source,
        order,
        level.take,
        done.labels(table),
        done.capped(table),
        cfg.metric.seed,
        table.members,
    )
    done.selection = {
        **level.selection,
        "written": {
            "mentions": chosen.mentions,
            "planned": size,
            "labels_planned": level.n_labels(),  # the window's (or cut's) labels
            "labels": done.n_labels(),
            "over_cap": chosen.over(done.capped(table)),
            "sentences_drawn": chosen.drawn,
        },
    }
    return done, chosen


def table_counts(table: LabelTable, chosen: Selection) -> np.ndarray:
    """The selection's mentions per label of the table (stored labels summed into the label
    the protocol spells them as)."""
    spelled = {m: lab for lab, ms in table.members.items() for m in ms}
    index = {lab: i for i, lab in enumerate(table.labels)}
    counts = np.zeros(len(table.labels), dtype=np.int64)
    for lab, n in chosen.counts.items():
        counts[index[spelled.get(lab, lab)]] += n
    return counts
