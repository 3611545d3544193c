"""The span store: ingestion is all-or-nothing, idempotent, and counts what the files hold."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from helpers import snapshot

from builders.errors import BuildersError, SourceFormatError, StoreError, UnknownNameError
from builders.sources import SOURCES, get_source
from builders.store import Store
from builders.store.ingest import ingest


def test_ingest_counts_and_schema(db: Path, data_dir: Path) -> None:
    with Store(db) as store:
        res = ingest(store, "crossner-ai", data_dir / "crossner/ai-test.txt", split="test")
        assert (res.status, res.sentences, res.mentions, res.types) == ("ingested", 3, 8, 2)
        row = store.con.execute(
            "SELECT sentence_id, tokens[1], len(tokens) FROM sentences ORDER BY idx LIMIT 1"
        ).fetchone()
        assert row == ("crossner-ai/test/0", "Typical", 20)
        # labels are verbalised and normalised, raw tags kept beside them
        labels = store.con.execute(
            "SELECT DISTINCT label, raw_label FROM mentions ORDER BY label"
        ).fetchall()
        assert labels == [("algorithm", "algorithm"), ("conference", "conference")]


def test_benchmark_labels_are_verbalised(db: Path, tmp_path: Path) -> None:
    f = tmp_path / "test.txt"
    f.write_text(
        "ACL\tB-organisation\nand\tO\nPython\tB-programlang\nx\tB-misc\n\n", encoding="utf-8"
    )
    with Store(db) as store:
        ingest(store, "crossner-ai", f, split="test")
        labels = store.con.execute(
            "SELECT label, raw_label FROM mentions ORDER BY start"
        ).fetchall()
    assert labels == [
        ("organization", "organisation"),
        ("program language", "programlang"),
        ("else", "misc"),
    ]


def test_reingest_unchanged_is_noop(db: Path, data_dir: Path) -> None:
    with Store(db) as store:
        ingest(store, "mit-movie", data_dir / "mit-movie/engtest.bio")
        before = snapshot(store)
        again = ingest(store, "mit-movie", data_dir / "mit-movie/engtest.bio")
        assert again.status == "unchanged"
        assert (again.sentences, again.mentions) == (3, 5)
        assert snapshot(store) == before
        forced = ingest(store, "mit-movie", data_dir / "mit-movie/engtest.bio", replace=True)
        assert forced.status == "ingested"
        assert snapshot(store)[:3] == before[:3]


def test_changed_input_reingests(db: Path, data_dir: Path, tmp_path: Path) -> None:
    f = tmp_path / "engtest.bio"
    shutil.copy(data_dir / "mit-movie/engtest.bio", f)
    with Store(db) as store:
        ingest(store, "mit-movie", f)
        f.write_text(f.read_text() + "O\tmore\nB-YEAR\t1999\n\n", encoding="utf-8")
        res = ingest(store, "mit-movie", f)
        assert (res.status, res.sentences, res.mentions) == ("ingested", 4, 6)


def test_failed_ingest_leaves_store_unchanged(db: Path, data_dir: Path, tmp_path: Path) -> None:
    good = tmp_path / "good" / "test.txt"
    good.parent.mkdir()
    shutil.copy(data_dir / "crossner/ai-test.txt", good)
    # Splits are read in name order (dev, test, train): the good dev and test splits are
    # written, the old test split deleted, before the bad train split fails. One transaction
    # must undo all of it.
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(data_dir / "crossner/ai-test.txt", bad / "dev.txt")
    (bad / "test.txt").write_text("Only\tO\none\tB-task\n\n", encoding="utf-8")
    (bad / "train.txt").write_text("EU\tB-ORG\nrejects\tI-MISC\n\n", encoding="utf-8")
    with Store(db) as store:
        ingest(store, "crossner-ai", good.parent)
        before = snapshot(store)
        with pytest.raises(
            SourceFormatError, match=re.escape(f"{bad / 'train.txt'}:2: I- tag after")
        ):
            ingest(store, "crossner-ai", bad, replace=True)
        assert snapshot(store) == before
        splits = store.con.execute("SELECT DISTINCT split FROM sentences").fetchall()
        assert splits == [("test",)]


def test_span_outside_sentence(db: Path, tmp_path: Path) -> None:
    f = tmp_path / "train.json"
    f.write_text('[{"tokenized_text": ["a", "b"], "ner": [[1, 2, "x"]]}]', encoding="utf-8")
    pytest.importorskip("builders.sources.gliner")
    with Store(db) as store, pytest.raises(SourceFormatError) as err:
        ingest(store, "gliner", f)
    # the record number and the span as the file writes it (end inclusive), on a one-line file
    assert str(err.value) == (
        f"{f}:1: record 1: ner span outside the 2 tokens of 'tokenized_text' (end is inclusive): "
        '[1, 2, "x"]'
    )


def test_empty_file(db: Path, tmp_path: Path) -> None:
    f = tmp_path / "test.txt"
    f.write_text("\n\n", encoding="utf-8")
    with (
        Store(db) as store,
        pytest.raises(SourceFormatError, match=re.escape(f"{f}: empty input: no sentences found")),
    ):
        ingest(store, "crossner-ai", f)


def test_unknown_source_lists_valid_names(db: Path) -> None:
    with (
        Store(db) as store,
        pytest.raises(UnknownNameError, match=r"unknown source 'nunr'\. Valid: .*nuner, pilener"),
    ):
        ingest(store, "nunr")


def test_missing_path(db: Path, tmp_path: Path) -> None:
    with Store(db) as store, pytest.raises(BuildersError, match="no such file or folder"):
        ingest(store, "crossner-ai", tmp_path / "nope")


def test_store_creates_its_folder(tmp_path: Path) -> None:
    with Store(tmp_path / "new" / "dir" / "s.duckdb") as store:
        assert store.stats()["sources"] == []
    assert (tmp_path / "new" / "dir" / "s.duckdb").is_file()


def test_empty_negative_label(db: Path, tmp_path: Path) -> None:
    f = tmp_path / "train.json"
    f.write_text('[{"tokenized_text": ["a"], "ner": [], "negatives": ["  "]}]', encoding="utf-8")
    with Store(db) as store, pytest.raises(SourceFormatError) as err:
        ingest(store, "gliner", f)
    assert str(err.value) == f"{f}:1: record 1: empty label: '  '"


def test_read_only_store_must_exist(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no store here"):
        Store(tmp_path / "none.duckdb", read_only=True)


def test_name_and_label_counts(db: Path, data_dir: Path) -> None:
    with Store(db) as store:
        ingest(store, "mit-restaurant", data_dir / "mit-restaurant/restauranttest.bio", name="rest")
        rows = store.label_counts("rest")
        assert rows[0][1] >= rows[-1][1]
        assert {r[0] for r in rows} <= {
            "amenity",
            "cuisine",
            "dish",
            "hours",
            "location",
            "price",
            "rating",
            "restaurant name",
        }
        with pytest.raises(StoreError, match="source 'mit-restaurant' is not in"):
            store.label_counts("mit-restaurant")


def test_bundled_sample(db: Path) -> None:
    with Store(db) as store:
        res = ingest(store, "pilener-sample")
    # 30,822 B- tags (the shared README's count) + 156 lax I- tags that open an entity.
    assert (res.sentences, res.mentions, res.types) == (2217, 30822 + 156, 368)
    assert res.splits[0].report["counts"] == {"repaired_tags": 156}


def test_every_spec_has_a_reader_module() -> None:
    import importlib
    import importlib.util

    for spec in SOURCES.values():
        assert importlib.util.find_spec(f"builders.sources.{spec.module}") is not None, spec.name
        mod = importlib.import_module(f"builders.sources.{spec.module}")
        assert mod.__doc__ and len(mod.__doc__.strip().splitlines()) >= 3, spec.module


# ---------------------------------------------------------------- the shared corpora
SHARED_COUNTS = {
    # source, folder: split -> (sentences, mentions, types), from ../shared/data/README.md
    "crossner-ai": ("crossner/ai", {"test": (431, 1809, 14)}),
    "crossner-literature": ("crossner/literature", {"test": (416, 2266, 12)}),
    "crossner-music": ("crossner/music", {"test": (465, 3336, 13)}),
    "crossner-politics": ("crossner/politics", {"test": (651, 4209, 9)}),
    "crossner-science": ("crossner/science", {"test": (543, 3089, 17)}),
    "crossner-conll2003": ("crossner/conll2003", {"train": (14041, 23429, 4)}),
    "mit-movie": ("mit-movie", {"train": (9775, 21295, 12), "test": (2443, 5339, 12)}),
    "mit-restaurant": ("mit-restaurant", {"train": (7660, 15363, 8), "test": (1521, 3151, 8)}),
    "conll2003": ("conll2003", {"train": (14041, 23499, 4)}),
}


@pytest.mark.parametrize("source", sorted(SHARED_COUNTS))
def test_shared_corpora_counts(shared: Path, db: Path, source: str) -> None:
    folder, expected = SHARED_COUNTS[source]
    with Store(db) as store:
        res = ingest(store, source, shared / folder)
    got = {s.split: (s.sentences, s.mentions, s.types) for s in res.splits}
    for split, counts in expected.items():
        assert got[split] == counts, (source, split)
    assert get_source(source).kind == "benchmark"


def test_shared_pilener_bio(shared: Path, db: Path) -> None:
    with Store(db) as store:
        res = ingest(store, "pilener-sample", shared / "pilener/pilener-391xALL-dev.bio")
    assert (res.sentences, res.types) == (2217, 368)
    assert res.mentions == 30822 + res.splits[0].report["counts"]["repaired_tags"]


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("  Foo__Bar\tbaz ", "foo bar baz"),
        ("Restaurant_Name", "restaurant name"),
        ("field of  study", "field of study"),
        ("Cafe\u0301", "caf\u00e9"),  # NFC: e + combining acute == é
        ("PERSON", "person"),
    ],
)
def test_normalise_label(raw: str, normal: str) -> None:
    from builders.labels import normalise_label

    assert normalise_label(raw) == normal


def test_polars_frames(db: Path, data_dir: Path) -> None:
    import polars as pl

    with Store(db) as store:
        ingest(store, "crossner-ai", data_dir / "crossner/ai-test.txt", split="test")
        labels = store.labels_frame("crossner-ai")
        spans = store.spans_frame("crossner-ai", "test")
    assert isinstance(labels, pl.DataFrame)
    assert labels.rows() == [
        ("algorithm", 5, 2, ["algorithm"]),
        ("conference", 3, 1, ["conference"]),
    ]
    assert spans.height == 8
    assert spans.row(0, named=True) == {
        "sentence_id": "crossner-ai/test/0",
        "split": "test",
        "start": 5,
        "stop": 8,
        "text": "naive Bayes classifier",
        "label": "algorithm",
        "raw_label": "algorithm",
    }


def test_memory_limit_from_the_environment(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LABELSHIFT_MEMORY_LIMIT caps DuckDB's memory; a bad value names the variable."""
    monkeypatch.setenv("LABELSHIFT_MEMORY_LIMIT", "1GB")
    with Store(db) as store:
        ((limit,),) = store.con.execute("SELECT current_setting('memory_limit')").fetchall()
    assert limit in ("953.6 MiB", "1.0 GiB", "1000.0 MiB", "1.0 GB")
    monkeypatch.setenv("LABELSHIFT_MEMORY_LIMIT", "lots")
    with pytest.raises(StoreError, match=r"LABELSHIFT_MEMORY_LIMIT='lots': not a memory size"):
        Store(db)


def test_memory_limit_by_default(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset: 4 GB (at most 80% of the RAM), not DuckDB's 80% of the RAM, whose cache of what
    it read set a 10x build's peak; `duckdb` leaves DuckDB's own default."""
    import duckdb

    from builders.store.db import memory_limit, usable_memory

    def setting() -> str:
        with Store(db) as store:
            return str(store.con.execute("SELECT current_setting('memory_limit')").fetchall())

    monkeypatch.delenv("LABELSHIFT_MEMORY_LIMIT", raising=False)
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    usable = usable_memory()
    assert usable is not None and usable <= ram
    default = "4GB" if 0.8 * usable >= 4 * 2**30 else None
    assert memory_limit() == default
    unset = setting()
    monkeypatch.setenv("LABELSHIFT_MEMORY_LIMIT", "4GB")
    if default is not None:
        assert unset == setting()
    monkeypatch.setenv("LABELSHIFT_MEMORY_LIMIT", "duckdb")
    assert memory_limit() is None
    plain = duckdb.connect().execute("SELECT current_setting('memory_limit')").fetchall()
    assert setting() == str(plain)


def test_a_container_cap_lowers_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a container capped below 5 GB, 4 GB would be over 80% of what the process may use:
    DuckDB's own default (80% of the cap) is kept; "max" (no cap) changes nothing."""
    import builders.store.settings as db_module

    monkeypatch.delenv("LABELSHIFT_MEMORY_LIMIT", raising=False)
    cap = tmp_path / "memory.max"
    monkeypatch.setattr(db_module, "_CGROUP_LIMITS", (cap, tmp_path / "absent"))
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    cap.write_text("max\n", encoding="ascii")
    assert db_module.usable_memory() == ram
    cap.write_text(f"{3 * 2**30}\n", encoding="ascii")
    assert db_module.usable_memory() == min(ram, 3 * 2**30)
    assert db_module.memory_limit() is None
    cap.write_text(f"{64 * 2**30}\n", encoding="ascii")
    assert db_module.memory_limit() == ("4GB" if 0.8 * ram >= 4 * 2**30 else None)


def test_subset_rows_counts_each_label_once_and_a_whole_label_wins_over_its_cap(
    tmp_path, data_dir
) -> None:
    """A label named twice, or both whole and capped, keeps its mentions once."""
    from builders.store import Store
    from builders.store.ingest import ingest

    with Store(tmp_path / "s.duckdb") as store:
        ingest(store, "pilener-sample")

        def mentions(labels, caps=None) -> int:
            rows = store.subset_rows("pilener-sample", labels, caps).to_pylist()
            return sum(len(r["spans"]) for r in rows)

        whole = mentions(["date"])
        assert mentions(["date", "date"]) == whole
        assert mentions(["date"], {"date": 5}) == whole
        capped = mentions([], {"date": 5})
        assert 5 <= capped < whole
