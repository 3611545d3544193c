"""A shared store (`Store(shared=True)`): reads through a read-only connection, writes only for
the length of a write, holds label vectors in memory until `flush_vectors`. The lock message
and the wait's setting."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from helpers import LABELS_A, bio_corpus

from builders.errors import StoreError
from builders.store import Store
from builders.store.db import lock_wait, open_failure
from builders.store.ingest import ingest

KEY = "m|torch|fp32|cpu|32|abc"


def vectors(n: int, dim: int = 4, start: float = 0.0) -> np.ndarray:
    return (np.arange(n * dim, dtype=np.float32) + start).reshape(n, dim)


def test_a_new_shared_store_is_made_and_read_only_between_writes(tmp_path: Path) -> None:
    db = tmp_path / "new" / "s.duckdb"
    with Store(db, shared=True) as store:
        assert store.source_names() == []
        with pytest.raises(duckdb.Error, match="read-only"):
            store.con.execute("DELETE FROM embeddings")
        ingest(store, "columns", bio_corpus(tmp_path / "c.bio", LABELS_A, 20), name="c")
        assert store.source_names() == ["c"]  # read again, through a read-only connection
        with pytest.raises(duckdb.Error, match="read-only"):
            store.con.execute("DELETE FROM embeddings")
    with Store(db, read_only=True) as store:
        assert store.count_sentences("c") == 20


def test_held_vectors_are_found_and_written_once(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    Store(db).close()
    with Store(db, shared=True) as store:
        store.add_vectors(KEY, pa.array(["a", "b"]), vectors(2))
        store.add_vectors(KEY, pa.array(["c"]), vectors(1, start=100))
        assert store.pending_vectors == 3
        pos, got = store.cached_vectors(KEY, pa.array(["x", "c", "a"]))
        assert sorted(zip(pos.tolist(), got[:, 0].tolist(), strict=True)) == [(1, 100.0), (2, 0.0)]
        assert store.stats()["embeddings"] == {}  # held, not written
        with store.transaction() as con:  # another run cached `a` meanwhile: kept as it is
            con.execute("INSERT INTO embeddings VALUES (?, 'a', [9, 9, 9, 9])", [KEY])
        assert store.flush_vectors() == 3
        assert store.pending_vectors == 0
        pos, got = store.cached_vectors(KEY, pa.array(["a", "b", "c"]))
        assert dict(zip(pos.tolist(), got[:, 0].tolist(), strict=True)) == {
            0: 9.0,
            1: 4.0,
            2: 100.0,
        }
        assert store.flush_vectors(close=True) == 0
    with Store(db, read_only=True) as store:
        assert store.stats()["embeddings"] == {KEY: 3}


def test_held_and_stored_vectors_together(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        store.add_vectors(KEY, pa.array(["a"]), vectors(1, start=7))
    with Store(db, shared=True) as store:
        store.add_vectors(KEY, pa.array(["b"]), vectors(1, start=50))
        pos, got = store.cached_vectors(KEY, pa.array(["b", "z", "a"]))
        assert dict(zip(pos.tolist(), got[:, 0].tolist(), strict=True)) == {2: 7.0, 0: 50.0}
        with pytest.raises(StoreError, match="several lengths"):
            store.add_vectors(KEY, pa.array(["c"]), vectors(1, dim=3))
    with Store(db, shared=True) as store:
        store.add_vectors(KEY, pa.array(["b"]), vectors(1, dim=3))
        with pytest.raises(StoreError, match="several lengths"):  # 3-d held, 4-d stored
            store.cached_vectors(KEY, pa.array(["a", "b"]))


def test_no_write_while_a_decontaminated_view_is_open(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    corpus = bio_corpus(tmp_path / "c.bio", LABELS_A, 20)
    with Store(db) as store:
        ingest(store, "columns", corpus, name="c")
    with Store(db, shared=True) as store, store.without_sentences("c", ["c/train/0"]):
        with pytest.raises(StoreError, match="temporary views"):
            store.drop_vectors(KEY)
        assert store.count_sentences("c") == 19  # the view is still there


def test_the_lock_message_without_the_kernel_lock_table(tmp_path: Path) -> None:
    held = duckdb.IOException(
        'IO Error: Could not set lock on file "x": Conflicting lock is held in /usr/bin/python3 '
        "(PID 999999999). However, you would be able to open this database in read-only mode"
    )
    line = open_failure(tmp_path / "gone.duckdb", held, writing=True, waited=5)
    assert line == (
        f"{tmp_path / 'gone.duckdb'}: the store is in use by process 999999999 "
        "(/usr/bin/python3), which reads it, and this command writes to it: wait for it to "
        "finish (waited 5 s; LABELSHIFT_LOCK_WAIT=SECONDS sets how long a command waits), or "
        "pass --db another store"
    )
    writer = duckdb.IOException(str(held).split(". However")[0] + ".")
    line = open_failure(tmp_path / "gone.duckdb", writer, writing=False)
    assert "(/usr/bin/python3), which writes to it: wait for it to finish (LABELSHIFT" in line


def test_the_wait_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LABELSHIFT_LOCK_WAIT", raising=False)
    assert lock_wait() == 60
    monkeypatch.setenv("LABELSHIFT_LOCK_WAIT", "2.5")
    assert lock_wait() == 2.5
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv("LABELSHIFT_LOCK_WAIT", bad)
        with pytest.raises(StoreError, match=r"LABELSHIFT_LOCK_WAIT=.*seconds to wait"):
            lock_wait()
