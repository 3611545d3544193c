"""The per-user leakage-scan cache (`builders.shift.scan_cache`): a second scan of an unchanged
corpus reads the first one's tables; any change of what the scan reads misses; a damaged or
unwritable cache never changes a result."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_leakage import BENCH, CLEAN, MINILM, _store, planted, write_bio

from builders.shift import scan_cache
from builders.shift.benchmarks import resolve
from builders.shift.leakage import scan
from builders.shift.scan_cache import ScanCache
from builders.shift.specs import EmbeddingSpec
from builders.store.ingest import ingest


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every scan that runs its SQL."""
    from builders.store.overlap import OverlapQueries

    calls: list[str] = []
    real = OverlapQueries.overlap_tables

    def counted(self, source, benchmarks, n, texts=True):  # type: ignore[no-untyped-def]
        calls.append(source)
        return real(self, source, benchmarks, n, texts)

    monkeypatch.setattr(OverlapQueries, "overlap_tables", counted)
    return calls


def test_a_second_scan_reads_the_first_ones_tables(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch)
    notes: list[str] = []
    with _store(db, tmp_path, [*CLEAN, *planted()]) as store:
        sets = resolve("crossner-ai", store=store)
        first = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM), on_note=notes.append)
        second = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM), on_note=notes.append)
        scan(store, "train", sets, n=5, embedding=EmbeddingSpec(MINILM))  # another n: scanned
        bare = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM), texts=False)
    assert calls == ["train", "train", "train"]  # the second scan ran no SQL
    assert any("unchanged since its last scan" in n for n in notes)
    assert second.report() == first.report()
    assert second.pairs.equals(first.pairs) and second.mentions.equals(first.mentions)
    assert second.pairs_table().equals(first.pairs_table())
    assert bare.report() == first.report()
    cache = ScanCache.default()
    assert cache is not None and len(cache.entries()) == 3


def test_a_changed_corpus_or_benchmark_is_scanned_again(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch)
    with _store(db, tmp_path, [*CLEAN, *planted()]) as store:
        sets = resolve("crossner-ai", store=store)
        before = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
        more = write_bio(tmp_path / "more-train.bio", planted())
        ingest(store, "columns", more, name="train", split="train", append=True,
               options={"repair": True})  # fmt: skip
        after = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
        fewer = write_bio(tmp_path / "test.txt", BENCH[1:])  # the verbatim copy's sentence gone
        ingest(store, "crossner-ai", fewer, split="test", replace=True)
        again = scan(
            store, "train", resolve("crossner-ai", store=store), embedding=EmbeddingSpec(MINILM)
        )
        ingest(store, "crossner-ai", fewer, split="test", replace=True)  # the same input, anew
        scan(store, "train", resolve("crossner-ai", store=store), embedding=EmbeddingSpec(MINILM))
    assert len(calls) == 4  # --replace reads it again: what the reader makes of it may differ
    assert after.report() != before.report()
    assert again.report() != after.report()


def test_a_decontaminated_view_is_never_cached(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch)
    with _store(db, tmp_path, [*CLEAN, *planted()]) as store:
        sets = resolve("crossner-ai", store=store)
        found = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
        with store.without_sentences("train", found.overlapping_training_ids()):
            inside = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
            inside_again = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
        outside = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
    assert len(calls) == 3  # the two scans of the view ran; the last one read the first's
    assert inside.report() == inside_again.report() != found.report()
    assert outside.report() == found.report()


def test_a_damaged_entry_is_removed_and_the_scan_runs(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch)
    with _store(db, tmp_path, [*CLEAN, *planted()]) as store:
        sets = resolve("crossner-ai", store=store)
        first = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
        cache = ScanCache.default()
        assert cache is not None
        (key, _, _) = cache.entries()[0]
        (cache.root / key / "pairs.parquet").write_bytes(b"PAR1 not parquet")
        with pytest.warns(scan_cache.CacheWarning, match="unreadable leakage-scan cache"):
            second = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
        third = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
    assert len(calls) == 2
    assert second.report() == third.report() == first.report()


def test_an_unwritable_cache_warns_and_changes_nothing(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(scan_cache.pq, "write_table", full)
    with _store(db, tmp_path, [*CLEAN, *planted()]) as store:
        sets = resolve("crossner-ai", store=store)
        with pytest.warns(scan_cache.CacheWarning, match="No space left"):
            found = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
    cache = ScanCache.default()
    assert cache is not None and cache.entries() == []
    assert not [p for p in cache.root.iterdir()]  # no temporary entry left
    assert found.report().per_benchmark["crossner-ai"]["exact_sentences"] == 2


def test_off_bound_and_stale_temporaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(scan_cache.SCANS_ENV, "off")
    assert ScanCache.default() is None
    monkeypatch.setenv(scan_cache.SCANS_ENV, str(tmp_path / "scans"))
    monkeypatch.setenv(scan_cache.MAX_ENV, "lots")
    with pytest.raises(Exception, match="LABELSHIFT_SCANS_MAX='lots' is not a size"):
        ScanCache.default()
    root = tmp_path / "scans"
    root.mkdir()
    dead = root / ".tmp-999999999-x"  # no such pid
    dead.mkdir()
    live = root / f".tmp-{os.getpid()}-y"
    live.mkdir()
    assert ScanCache(root).entries() == []
    assert not dead.exists() and live.exists()


def test_the_bound_removes_the_least_recently_used(tmp_path: Path) -> None:
    import time

    import pyarrow as pa

    from builders.store.overlap import OverlapTables

    part = pa.table({"x": pa.array(range(20_000), pa.int64())})
    tables = OverlapTables(part, part, part, part)
    cache = ScanCache(tmp_path / "scans", max_bytes=1)
    cache.put("a", {"n": 1}, tables)
    time.sleep(0.01)
    cache.put("b", {"n": 2}, tables)
    assert [k for k, _, _ in cache.entries()] == ["b"]  # the newest stays, even over the bound
    cache.max_bytes = 1 << 30
    cache.put("c", {"n": 3}, tables)
    hit = cache.get("b")
    assert hit is not None and hit.pairs.equals(part)
    assert [k for k, _, _ in cache.entries()] == ["b", "c"]
    assert cache.clear()[0] == 2 and cache.entries() == []
