"""Shared fixtures: no hub, no token, caches in a temp dir, and paths to test data."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# `datasets` and `huggingface_hub` read these once, at import: set them before any test
# module imports either, so no test can reach a hub or touch the user's caches.
_CACHE = Path(tempfile.mkdtemp(prefix="labelshift-tests-hf-"))
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)  # one per test process
os.environ["HF_HUB_OFFLINE"] = "1"
# `--backend auto` runs torch, the reference every expected figure was computed with (child
# processes inherit it); tests of `auto` itself take it away
os.environ["LABELSHIFT_BACKEND"] = "torch"
# session- and module-scoped fixtures embed before a test's own embedding cache is set (the
# `_offline` fixture below): theirs is this process's, never the user's
os.environ["LABELSHIFT_EMBEDDINGS"] = str(_CACHE / "labelshift-embeddings")
os.environ["LABELSHIFT_SCANS"] = str(_CACHE / "labelshift-scans")
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HOME"] = str(_CACHE)
os.environ["HF_DATASETS_CACHE"] = str(_CACHE / "datasets")
os.environ.pop("HF_TOKEN", None)
os.environ.pop("HUGGING_FACE_HUB_TOKEN", None)

import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# No time limit per example: speed is measured by scripts, never by tests, and a first example
# that pays for an import or a busy machine must not fail a property that holds.
settings.register_profile("labelshift", deadline=None)
settings.load_profile("labelshift")
from helpers import DATA, LABELS_A, SAMPLE_MEDIUM, SHARED, TOKEN, bio_corpus  # noqa: E402
from hubserver import HubServer  # noqa: E402


@pytest.fixture(autouse=True)
def _command_line_text(request: pytest.FixtureRequest) -> Iterator[None]:
    """Messages name settings as the command line does (`--min-labels`), so that the suite's
    checks of a library error's text compare, byte for byte, what a command shows of it. A
    test marked `library_surface` sees the library's names (`min_labels=`): tests/test_errors.py
    checks those, and that a command sets the command line's names itself."""
    if request.node.get_closest_marker("library_surface"):
        yield
        return
    from builders.cli.errors import COMMAND_LINE
    from builders.errors import shown_on

    with shown_on(COMMAND_LINE):
        yield


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = tmp_path_factory.getbasetemp() / "hf-cache"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("LABELSHIFT_BACKEND", "torch")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(cache))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(cache / "datasets"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.delenv("LABELSHIFT_DB", raising=False)
    monkeypatch.delenv("LABELSHIFT_DATA", raising=False)
    # a per-user embedding cache of the test's own: no test sees another's vectors
    monkeypatch.setenv("LABELSHIFT_EMBEDDINGS", str(tmp_path_factory.mktemp("embeddings")))
    monkeypatch.delenv("LABELSHIFT_EMBEDDINGS_MAX", raising=False)
    # and a leakage-scan cache of its own
    monkeypatch.setenv("LABELSHIFT_SCANS", str(tmp_path_factory.mktemp("scans")))
    monkeypatch.delenv("LABELSHIFT_SCANS_MAX", raising=False)


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
def sample_results(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The bundled sample built once per session with MiniLM: every level, entropy and max.

    The test excerpts of CrossNER AI, MIT Movie and MIT Restaurant are stored too, so the
    leakage scan has their sentences (the other benchmarks are reported as not scanned).
    Returns {"db": the store, "out": the folder holding `pilener-sample-{low,medium,high}-shift/`,
    "entropy": BuildResult, "max": BuildResult}. Read only: tests that change a folder or the
    store copy it first.
    """
    from builders.shift.specs import EmbeddingSpec
    from builders.splits import SplitConfig, build
    from builders.splits.strategies.quantile import QuantileOptions
    from builders.store import Store
    from builders.store.ingest import ingest

    root = tmp_path_factory.mktemp("sample-build")
    out: dict = {"db": root / "s.duckdb", "out": root / "out"}
    with Store(out["db"]) as store:
        ingest(store, "pilener-sample")
        for name, path in (
            ("crossner-ai", "crossner/ai-test.txt"),
            ("mit-movie", "mit-movie/engtest.bio"),
            ("mit-restaurant", "mit-restaurant/restauranttest.bio"),
        ):
            ingest(store, name, DATA / path)
        for strategy in ("entropy", "max"):
            cfg = SplitConfig(
                "pilener-sample",
                strategy,
                embedding=EmbeddingSpec("all-MiniLM-L6-v2"),
                options=QuantileOptions(medium_band=SAMPLE_MEDIUM),
            )
            (out[strategy],) = build(store, cfg, out["out"])
    return out


@pytest.fixture(scope="session")
def sample_build(sample_results: dict) -> Path:
    """The output folder of `sample_results`."""
    return sample_results["out"]


@pytest.fixture(scope="session")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real repo folder `pilener-low-shift` (entropy + max configs) built with MiniLM, for
    the publishing tests. Read only: tests that change it copy it first."""
    from builders.shift.specs import EmbeddingSpec
    from builders.splits import SplitConfig, build
    from builders.store import Store
    from builders.store.ingest import ingest

    root = tmp_path_factory.mktemp("published")
    corpus = bio_corpus(root / "corpus.txt", LABELS_A, 80)
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    try:
        with Store(root / "store.duckdb") as store:
            ingest(store, "columns", corpus, name="pilener")
            for strategy in ("entropy", "max"):
                cfg = SplitConfig(  # a 20-label corpus: tiny levels are what this test needs
                    source="pilener",
                    strategy=strategy,
                    levels=("low",),
                    embedding=EmbeddingSpec("all-MiniLM-L6-v2"),
                    min_labels=1,
                    min_mentions=1,
                )
                build(store, cfg, root / "out")
    finally:
        mp.undo()
    folder = root / "out" / "pilener-low-shift"
    assert (folder / "README.md").exists()
    return folder


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[HubServer]:
    """The fake Hub (`hubserver.py`) on loopback, with HF_ENDPOINT pointing at it and the
    token `TOKEN` required; huggingface_hub online for the test, with no saved login."""
    from huggingface_hub import constants

    server = HubServer(token=TOKEN).start()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # huggingface_hub reads these once, at import.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-saved-token"))
    yield server
    server.stop()


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every retry wait, ours and huggingface_hub's (both call `time.sleep`), not slept."""
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    return slept
