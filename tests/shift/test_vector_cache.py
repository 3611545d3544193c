"""The per-user embedding cache: shards, merging, the size bound, faults, concurrent writers,
kill -9, and its use by the embedder, `familiarity_of` and `builders cache`."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner

from builders.cli.main import cli
from builders.errors import BuildersError
from builders.shift import vector_cache
from builders.shift.embedder import Embedder
from builders.shift.vector_cache import (
    DEFAULT_MAX,
    MAX_SHARDS,
    CacheWarning,
    VectorCache,
    parse_size,
)
from builders.store import Store

KEY = "acme/model|torch|fp32|cpu|32|0123456789ab"


def _vectors(labels: list[str], dim: int = 8, salt: float = 0.0) -> np.ndarray:
    """Deterministic vectors of `labels`: the same label, the same row."""
    rows = [np.random.default_rng(abs(hash(lab)) % 2**32).random(dim) + salt for lab in labels]
    return np.asarray(rows, dtype=np.float32)


def _lookup(cache: VectorCache, labels: list[str]) -> dict[str, bytes]:
    pos, vecs = cache.lookup(KEY, pa.array(labels, pa.string()))
    return {labels[p]: vecs[i].tobytes() for i, p in enumerate(pos)}


def _add(cache: VectorCache, labels: list[str], salt: float = 0.0) -> None:
    cache.add(KEY, pa.array(labels, pa.string()), _vectors(labels, salt=salt))


def test_round_trip_partial_hits_and_bytes(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path)
    _add(cache, ["person", "city"])
    _add(cache, ["river"])
    got = _lookup(cache, ["nothing", "river", "person"])
    assert got == {
        "river": _vectors(["river"])[0].tobytes(),
        "person": _vectors(["person"])[0].tobytes(),
    }
    assert _lookup(cache, []) == {} and _lookup(cache, ["absent"]) == {}
    assert VectorCache(tmp_path / "never-made").lookup(KEY, pa.array(["x"]))[0].size == 0
    (entry,) = cache.entries()
    assert (entry.key, entry.labels, entry.shards) == (KEY, 3, 2)
    assert entry.parts["model"] == "acme/model" and entry.parts["backend"] == "torch"


def test_a_label_held_twice_is_read_from_the_oldest_shard(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path)
    _add(cache, ["person"], salt=0.0)
    _add(cache, ["person", "city"], salt=1.0)  # a second run embedded it meanwhile
    assert _lookup(cache, ["person"])["person"] == _vectors(["person"])[0].tobytes()


def test_shards_are_merged_past_the_limit_keeping_every_label_once(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path)
    labels = [f"label {i}" for i in range(MAX_SHARDS + 1)]
    for lab in labels:
        _add(cache, [lab, "shared"])
    (entry,) = cache.entries()
    assert entry.shards == 1 and entry.labels == len(labels) + 1
    assert _lookup(cache, [*labels, "shared"]) == {
        lab: _vectors([lab])[0].tobytes() for lab in [*labels, "shared"]
    }


def test_the_size_bound_evicts_the_least_recently_used_key_first(tmp_path: Path) -> None:
    big = [f"label {i}" for i in range(400)]  # about 14 KB a shard
    cache = VectorCache(tmp_path, max_bytes=40_000)
    for key in ("old|k", "used|k"):
        cache.add(key, pa.array(big), _vectors(big))
    time.sleep(0.02)
    cache.lookup("used|k", pa.array(["label 1"]))  # "old|k" is now the least recently used
    cache.add("new|k", pa.array(big), _vectors(big))
    assert cache.size() <= 40_000
    assert [e.key for e in cache.entries() if e.shards] == ["new|k", "used|k"]


def test_one_key_larger_than_the_bound_keeps_its_newest_shard(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, max_bytes=1)
    _add(cache, ["person"])
    _add(cache, ["city"])
    assert _lookup(cache, ["person", "city"]).keys() == {"city"}


def test_an_unreadable_shard_is_removed_with_a_warning(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path)
    _add(cache, ["person"])
    bad = cache.folder(KEY) / "00000000000000000000-1-bad.parquet"  # sorts first
    bad.write_bytes(b"PAR1 not really")
    with pytest.warns(CacheWarning, match="unreadable embedding cache shard"):
        assert _lookup(cache, ["person"]).keys() == {"person"}
    assert not bad.exists()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_a_failed_write_is_a_warning_and_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    cache = VectorCache(tmp_path)
    _add(cache, ["person"])
    real = vector_cache.pq.write_table

    def full(table: pa.Table, where: object, **kw: object) -> None:
        real(table, where, **kw)  # the bytes land, then the disk is full
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(vector_cache.pq, "write_table", full)
    with pytest.warns(CacheWarning, match="embedding cache not written"):
        _add(cache, ["city"])
    assert sorted(p.name.startswith(".tmp-") for p in cache.folder(KEY).iterdir()) == [
        False,
        False,
    ]  # key.txt and the first shard only
    assert _lookup(cache, ["person", "city"]).keys() == {"person"}


def test_environment_moves_bounds_and_switches_it_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LABELSHIFT_EMBEDDINGS", str(tmp_path / "here"))
    monkeypatch.setenv("LABELSHIFT_EMBEDDINGS_MAX", "500M")
    cache = VectorCache.default()
    assert cache is not None and cache.root == tmp_path / "here"
    assert cache.max_bytes == 500 << 20
    monkeypatch.setenv("LABELSHIFT_EMBEDDINGS", "off")
    assert VectorCache.default() is None
    monkeypatch.delenv("LABELSHIFT_EMBEDDINGS")
    monkeypatch.delenv("LABELSHIFT_EMBEDDINGS_MAX")
    monkeypatch.setenv("LABELSHIFT_CACHE", str(tmp_path / "root"))
    cache = VectorCache.default()
    assert cache is not None and cache.root == tmp_path / "root" / "embeddings"
    assert cache.max_bytes == DEFAULT_MAX
    monkeypatch.delenv("LABELSHIFT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    cache = VectorCache.default()
    assert cache is not None and cache.root == tmp_path / "xdg" / "labelshift" / "embeddings"
    assert [parse_size(s) for s in ("123", "2K", "1.5G", "3 MiB")] == [
        123,
        2048,
        3 << 29,
        3 << 20,
    ]
    with pytest.raises(BuildersError, match="LABELSHIFT_EMBEDDINGS_MAX='lots' is not a size"):
        parse_size("lots")


# ------------------------------------------------------------------ processes
_WRITER = textwrap.dedent(
    """
    import sys
    import numpy as np, pyarrow as pa
    from builders.shift.vector_cache import VectorCache
    cache = VectorCache(sys.argv[1])
    me = int(sys.argv[2])
    for round in range(6):
        labels = [f"w{me} r{round} l{i}" for i in range(50)] + ["shared"]
        vecs = np.full((len(labels), 4), 1.0, dtype=np.float32)
        cache.add(sys.argv[3], pa.array(labels), vecs)
        pos, _ = cache.lookup(sys.argv[3], pa.array(labels))
        assert len(pos) == len(labels), (me, round, len(pos))
    """
)


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), str(i), KEY])
        for i in range(4)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    cache = VectorCache(tmp_path)
    every = [f"w{w} r{r} l{i}" for w in range(4) for r in range(6) for i in range(50)]
    assert len(_lookup(cache, [*every, "shared"])) == len(every) + 1
    assert not [p for p in cache.folder(KEY).iterdir() if p.name.startswith(".tmp-")]


_STUCK = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np, pyarrow as pa
    from builders.shift import vector_cache
    def stuck(src, dst):
        print("written", flush=True)
        time.sleep(600)
    vector_cache.os.replace = stuck
    cache = vector_cache.VectorCache(sys.argv[1])
    cache.add(sys.argv[2], pa.array(["person"]), np.ones((1, 4), dtype=np.float32))
    """
)


def test_a_writer_killed_mid_write_leaves_nothing_readers_see(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path)
    cache.add(KEY, pa.array(["city"]), np.ones((1, 4), dtype=np.float32))
    proc = subprocess.Popen(
        [sys.executable, "-c", _STUCK, str(tmp_path), KEY], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "written\n"
    tmp = [p for p in cache.folder(KEY).iterdir() if p.name.startswith(".tmp-")]
    assert len(tmp) == 1
    assert _lookup(cache, ["person", "city"]).keys() == {"city"}  # a live writer's: kept
    assert tmp[0].exists()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert _lookup(cache, ["person", "city"]).keys() == {"city"}
    assert not tmp[0].exists()  # its writer is gone: removed


# ------------------------------------------------------------------ users of the cache
def test_a_new_store_reads_the_user_cache_without_loading_the_model(tmp_path: Path) -> None:
    labels = ["person", "city", "river bank"]
    first = Embedder("minilm", device="cpu")
    with Store(tmp_path / "a.duckdb") as store:
        vecs = first.embed_cached(store, labels)
    assert (first.last_stats.new, first.last_stats.shared) == (3, 0)
    cold = Embedder("minilm", device="cpu")
    with Store(tmp_path / "b.duckdb") as store:
        again = cold.embed_cached(store, [*labels, "human"])
        assert (cold.last_stats.new, cold.last_stats.shared) == (1, 3)
        assert again[:3].tobytes() == vecs.tobytes()
    cold.user_cache = None  # the store now answers on its own
    with Store(tmp_path / "b.duckdb") as store:
        alone = cold.embed_cached(store, [*labels, "human"])
    assert (cold.last_stats.new, cold.last_stats.cached) == (0, 4)
    assert alone.tobytes() == again.tobytes()
    assert first.last_stats.message().endswith("0 from the user cache")


_FAMILIARITY = textwrap.dedent(
    """
    import json, sys
    from builders import familiarity_of
    r = familiarity_of(["person", "person", "city", "river bank"],
                       {"x": ["person", "location"]}, model="minilm")
    print(json.dumps({"f": r.union_macro, "new": r.embedded.new, "shared": r.embedded.shared,
                      "loaded": "sentence_transformers" in sys.modules}))
    """
)


@pytest.mark.slow  # a real model exported or loaded in a new process
def test_a_second_familiarity_of_in_a_new_process_embeds_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "LABELSHIFT_EMBEDDINGS": str(tmp_path / "emb")}
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", _FAMILIARITY], env=env, capture_output=True, check=True
            ).stdout
        )
        for _ in range(2)
    ]
    assert (runs[0]["new"], runs[0]["loaded"]) == (4, True)
    assert runs[1] == {**runs[0], "new": 0, "shared": 4, "loaded": False}


def test_cache_command_shows_and_clears(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABELSHIFT_EMBEDDINGS", str(tmp_path / "emb"))
    cache = VectorCache.default()
    assert cache is not None
    minilm_key = "sentence-transformers/all-MiniLM-L6-v2|torch|fp32|cpu|32|7e54b3bcd8c7"
    cache.add(minilm_key, pa.array(["person"]), np.ones((1, 4), dtype=np.float32))
    _add(cache, ["a", "b"])
    runner = CliRunner()
    shown = json.loads(runner.invoke(cli, ["cache", "--json"]).output)["result"]
    assert shown["path"] == str(tmp_path / "emb") and len(shown["keys"]) == 2
    assert {k["key"]: k["labels"] for k in shown["keys"]} == {minilm_key: 1, KEY: 2}
    table = runner.invoke(cli, ["cache"])
    assert table.exit_code == 0 and "acme/model" in table.output
    from builders.shift.scan_cache import ScanCache
    from builders.store.overlap import OverlapTables

    scans = ScanCache(tmp_path / "scans")
    monkeypatch.setenv("LABELSHIFT_SCANS", str(scans.root))
    part = pa.table({"x": pa.array([1, 2], pa.int64())})
    scans.put("k", {"n": 13}, OverlapTables(part, part, part, part))
    shown = json.loads(runner.invoke(cli, ["cache", "--json"]).output)["result"]
    assert shown["scans"]["entries"] == 1 and shown["scans"]["path"] == str(scans.root)
    assert "leakage scans: " in runner.invoke(cli, ["cache"]).output
    typo = runner.invoke(cli, ["cache", "clear", "--model", "nosuch"])  # removes nothing
    assert typo.exit_code == 0 and "nothing removed: no vectors of 'nosuch'" in typo.output
    assert "cached models: acme/model, sentence-transformers/all-MiniLM-L6-v2" in typo.output
    cleared = runner.invoke(cli, ["cache", "clear", "--model", "minilm"])
    assert cleared.exit_code == 0, cleared.output
    assert "removed minilm's vectors: 1 cache keys" in cleared.output
    assert [e.key for e in cache.entries()] == [KEY] and len(scans.entries()) == 1
    cleared = runner.invoke(cli, ["cache", "clear"])
    assert cleared.exit_code == 0 and "removed 1 leakage scans" in cleared.output
    assert cache.entries() == [] and cache.size() == 0 and scans.entries() == []
    monkeypatch.setenv("LABELSHIFT_EMBEDDINGS", "off")
    off = runner.invoke(cli, ["cache"])
    assert off.exit_code != 0 and "switched off (LABELSHIFT_EMBEDDINGS=off)" in off.output
