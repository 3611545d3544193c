"""A level's rows as `fit_level` reads them (`Store._level_rows`: the mentions sorted in SQL,
counted in NumPy by `draws.count_runs`) are exactly the rows DuckDB's GROUP BY gave, kept
here as the reference; and the NumPy pieces that replaced sorts and object comparisons
(`sentence_starts`, `subsets._order_of`) give what those gave."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from builders.store import Store, subsets
from builders.store.draws import LevelRows, count_runs, sentence_starts
from builders.store.schema import SPLIT_ORDER_SQL

#: The level rows' query before the counting moved to NumPy.
GROUPED = f"""
SELECT m.split, m.idx, c.pos, count(*)::INTEGER AS n
FROM mentions m JOIN _selected c ON m.label = c.label
WHERE m.source = $1
GROUP BY m.split, m.idx, c.pos
ORDER BY {SPLIT_ORDER_SQL.format(col="m.split")}, m.split, m.idx, c.pos
"""


def _grouped(store: Store, source: str, order: list[str], members: dict) -> pa.Table:
    """The reference rows of an order (stored labels as `members` spells them)."""
    stored = [(m, i) for i, lab in enumerate(order) for m in members.get(lab, [lab])]
    labels, pos = zip(*stored, strict=True) if stored else ((), ())
    selected = pa.table({"label": pa.array(labels, pa.string()), "pos": pa.array(pos, pa.int32())})
    store.con.register("_selected", selected)
    try:
        return store.con.sql(GROUPED, params=[source]).to_arrow_table()
    finally:
        store.con.unregister("_selected")


def _same_rows(got: LevelRows, want: LevelRows) -> None:
    for name in ("pos", "n", "first"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
        assert getattr(got, name).dtype == getattr(want, name).dtype, name
    assert got.split.equals(want.split) and got.idx.equals(want.idx)


@pytest.fixture
def split_store(db: Path) -> Store:
    """Random mentions over three stored splits and one other (sorted after them), several
    mentions of a label in a sentence, labels in several sentences, idx shared by splits."""
    rng = np.random.default_rng(5)
    rows = 4000
    split = rng.choice(["test", "zeta", "train", "dev"], rows)
    idx = rng.integers(0, 60, rows)
    label = rng.choice([f"l{i}" for i in range(40)], rows)
    mentions = pa.table(
        {
            "source": ["s"] * rows,
            "split": split,
            "idx": idx.astype(np.int32),
            "start": np.zeros(rows, np.int32),
            "stop": np.ones(rows, np.int32),
            "label": label,
            "raw_label": label,
            "coarse": label,
        }
    )
    store = Store(db)
    store.con.register("_m", mentions)
    store.con.execute("INSERT INTO mentions SELECT * FROM _m")
    store.con.unregister("_m")
    return store


def test_level_rows_are_the_grouped_rows(split_store: Store) -> None:
    """Splits in their order (train, dev, test, then others by name), members standing for
    several stored labels, a label twice in an order, labels with no mention, no labels."""
    members = {"both": ["l3", "l4"], "l7": ["l7"]}
    orders = [
        [f"l{i}" for i in range(40)],
        ["l9", "both", "l1", "l7", "nothing"],
        ["l5", "l2", "l5"],
        ["nothing"],
        [],
    ]
    with split_store as store:
        for order in orders:
            take = np.ones(len(order), dtype=np.int64)
            got = store._level_rows("s", order, take, members)
            want = LevelRows.of(_grouped(store, "s", order, members), len(order))
            _same_rows(got, want)
        assert got.first.tolist() == [0]
        splits = store._level_rows("s", orders[0], np.ones(40, dtype=np.int64)).split
        assert pc.unique(splits).to_pylist() == ["train", "dev", "test", "zeta"]


def test_level_rows_are_the_grouped_rows_on_the_sample(sample_results: dict) -> None:
    """The bundled sample's 300 most frequent labels, in two orders."""
    source = "pilener-sample"
    with Store(sample_results["db"], read_only=True) as store:
        order = [
            lab
            for (lab,) in store.con.execute(
                "SELECT label FROM mentions WHERE source = $1 GROUP BY label "
                "ORDER BY count(*) DESC, label LIMIT 300",
                [source],
            ).fetchall()
        ]
        for labels in (order, order[::-1]):
            take = np.ones(len(labels), dtype=np.int64)
            got = store._level_rows(source, labels, take)
            assert got.pos.size > got.first.size > 100  # sentences with several labels
            _same_rows(got, LevelRows.of(_grouped(store, source, labels, {}), len(labels)))


def test_count_runs_counts_repeated_rows() -> None:
    table = pa.table(
        {
            "split": ["train", "train", "train", "dev", "dev", "dev", "test"],
            "idx": pa.array([0, 0, 0, 0, 0, 1, 1], pa.int32()),
            "pos": pa.array([2, 2, 5, 2, 2, 2, 2], pa.int32()),
        }
    )
    got = count_runs(table)
    assert got.to_pylist() == [
        {"split": "train", "idx": 0, "pos": 2, "n": 2},
        {"split": "train", "idx": 0, "pos": 5, "n": 1},
        {"split": "dev", "idx": 0, "pos": 2, "n": 2},
        {"split": "dev", "idx": 1, "pos": 2, "n": 1},
        {"split": "test", "idx": 1, "pos": 2, "n": 1},
    ]
    assert got.schema.field("n").type == pa.int32()
    empty = count_runs(table.slice(0, 0))
    assert empty.num_rows == 0 and empty.column_names == ["split", "idx", "pos", "n"]


def _starts_by_objects(table: pa.Table) -> np.ndarray:
    """`sentence_starts` as it compared the splits: as NumPy objects."""
    split = table.column("split").to_numpy(zero_copy_only=False)
    idx = table.column("idx").to_numpy()
    new = np.ones(idx.size, dtype=bool)
    new[1:] = (idx[1:] != idx[:-1]) | (split[1:] != split[:-1])
    return np.append(np.flatnonzero(new), idx.size)


@pytest.mark.parametrize("rows", [0, 1, 2, 500])
def test_sentence_starts_compares_splits_as_objects_did(rows: int) -> None:
    rng = np.random.default_rng(rows)
    split = rng.choice(["train", "dev", "test"], rows).tolist()
    idx = pa.array(rng.integers(0, 3, rows), pa.int32())
    for splits in (split, [None if i % 7 == 3 else s for i, s in enumerate(split)]):
        table = pa.table({"split": pa.array(splits, pa.string()), "idx": idx})
        chunked = pa.Table.from_batches(table.to_batches(max_chunksize=37), table.schema)
        for t in (table, chunked):
            assert np.array_equal(sentence_starts(t), _starts_by_objects(t))


def test_order_of_is_argsort_of_distinct_keys() -> None:
    rng = np.random.default_rng(1)
    for n in (0, 1, 10, 1000):
        forced = rng.random(n) < 0.3
        ranks = rng.permutation(n)
        for part in (np.arange(n), np.sort(rng.choice(n, n // 2, replace=False))):
            keys = np.where(forced[part], 0, n) + ranks[part]
            assert np.array_equal(subsets._order_of(keys, n), np.argsort(keys))
