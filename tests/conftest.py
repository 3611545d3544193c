"""Shared fixtures: no hub, no token, caches in a temp dir, and paths to test data."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# `datasets` and `huggingface_hub` read these once, at import: set them before any test
# module imports either, so no test can reach a hub or touch the user's caches.
_CACHE = Path(tempfile.mkdtemp(prefix="labelshift-tests-hf-"))
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HOME"] = str(_CACHE)
os.environ["HF_DATASETS_CACHE"] = str(_CACHE / "datasets")
os.environ.pop("HF_TOKEN", None)
os.environ.pop("HUGGING_FACE_HUB_TOKEN", None)

import pytest  # noqa: E402
from helpers import DATA, SHARED  # noqa: E402


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = tmp_path_factory.getbasetemp() / "hf-cache"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(cache))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache / "datasets"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.delenv("LABELSHIFT_DB", raising=False)
    monkeypatch.delenv("LABELSHIFT_DATA", raising=False)


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip(f"shared data not found at {SHARED}")
    return SHARED


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.duckdb"


@pytest.fixture(scope="session")
def sample_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample built once per session with MiniLM: every level, entropy and max.

    The test excerpts of CrossNER AI, MIT Movie and MIT Restaurant are stored too, so the
    leakage scan has their sentences (the other benchmarks are reported as not scanned).
    Returns the output folder holding `pilener-sample-{low,medium,high}-shift/`. Read only:
    tests that change a folder copy it first.
    """
    from builders.splits import SplitConfig, build
    from builders.store import Store
    from builders.store.ingest import ingest

    root = tmp_path_factory.mktemp("sample-build")
    with Store(root / "s.duckdb") as store:
        ingest(store, "pilener-sample")
        for name, path in (
            ("crossner-ai", "crossner/ai-test.txt"),
            ("mit-movie", "mit-movie/engtest.bio"),
            ("mit-restaurant", "mit-restaurant/restauranttest.bio"),
        ):
            ingest(store, name, DATA / path)
        for strategy in ("entropy", "max"):
            build(
                store,
                SplitConfig("pilener-sample", strategy, model="all-MiniLM-L6-v2"),
                root / "out",
            )
    return root / "out"
