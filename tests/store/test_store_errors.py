"""The store's boundary: DuckDB's errors leave it as typed `StoreError`s, so that no caller
(the command line included) needs DuckDB to tell a damaged store from a full disk."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from builders.errors import (
    BuildersError,
    NoStore,
    SourceNotStored,
    StoreDamaged,
    StoreError,
    StoreOutOfMemory,
    StoreUnreadable,
    StoreWriteRefused,
)
from builders.store import Store, as_store_error, store_errors


def test_no_store_where_one_is_only_read(tmp_path: Path) -> None:
    with pytest.raises(NoStore, match="no store here"):
        Store(tmp_path / "absent.duckdb", read_only=True)
    assert not (tmp_path / "absent.duckdb").exists()


def test_a_source_not_stored_names_itself(tmp_path: Path) -> None:
    with Store(tmp_path / "s.duckdb") as store, pytest.raises(SourceNotStored) as err:
        store.labels_frame("mine")
    assert err.value.source == "mine" and "it holds no source" in str(err.value)


def test_a_cut_store_is_damaged(sample_results: dict, tmp_path: Path) -> None:
    whole = tmp_path / "whole.duckdb"
    shutil.copy(sample_results["db"], whole)
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 3])
    with pytest.raises(StoreDamaged, match="the store is damaged"), Store(cut, True) as store:
        store.stats()


def test_a_file_that_is_no_store_is_unreadable(tmp_path: Path) -> None:
    text = tmp_path / "notes.duckdb"
    text.write_text("not a database\n" * 1000, encoding="utf-8")
    with pytest.raises(StoreUnreadable, match="not a valid DuckDB database file"):
        Store(text, read_only=True)


@pytest.mark.parametrize(
    ("error", "kind", "words"),
    [
        (duckdb.IOException("IO Error: No space left on device"), StoreWriteRefused, "no space"),
        (duckdb.IOException("Could not write: Permission denied"), StoreWriteRefused, "--db"),
        (duckdb.OutOfMemoryException("Out of Memory Error"), StoreOutOfMemory, "LABELSHIFT_MEM"),
        (duckdb.IOException("Corrupt database file: bad block"), StoreDamaged, "damaged"),
    ],
)
def test_duckdb_errors_leave_the_store_typed(
    tmp_path: Path, error: duckdb.Error, kind: type[StoreError], words: str
) -> None:
    db = tmp_path / "s.duckdb"
    with pytest.raises(kind, match=words) as err, store_errors(db):
        raise error
    assert err.value.__cause__ is error
    assert str(db) in str(err.value) or kind is StoreOutOfMemory  # DuckDB's limit, not a file
    with pytest.raises(kind) as left, Store(db):  # a `with Store(...)` block is a boundary too
        raise error
    assert left.value.__cause__ is error and isinstance(left.value, BuildersError)


def test_other_errors_pass_the_boundary_as_they_are(tmp_path: Path) -> None:
    """A DuckDB error the store does not know (a bug in a query) is not dressed up."""
    with Store(tmp_path / "s.duckdb") as store, pytest.raises(duckdb.CatalogException):
        store.con.execute("SELECT * FROM no_such_table")
    assert as_store_error(tmp_path, ValueError("x")) is None
