"""`--backend auto`: the fastest installed runtime whose fp32 vectors equal torch's.

    backend = choose_backend(embedder)     "openvino", "onnx" or "torch"

On a CPU at fp32, the runtimes of `AUTO_ORDER` are tried fastest first (docs/PERFORMANCE.md);
one is taken when its vectors of every probe label have cosine >= `AUTO_MIN_COSINE` with
torch's, checked once per model weights and runtime versions and remembered under the model
cache (`runtime-choice/`). Torch is the answer on an accelerator, at another precision, or when
no runtime passes. `$LABELSHIFT_BACKEND` pins the answer where that runtime can run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

from builders.deferred import np
from builders.errors import BuildersError, BuildersNote, InvalidValue, opt
from builders.files import atomic_write_text
from builders.labels import benchmarks, fewnerd_fine_types, fewnerd_verbalise, verbalise
from builders.shift.models import auto_device, model_cache_dir
from builders.shift.runtime import EXTRA_MODULES

#: A `builders.shift.embedder.Embedder`, which imports this module (so it is not imported here).
Embedder = Any


#: Runtimes `auto` tries, fastest first; torch is the fallback.
AUTO_ORDER = ("openvino", "onnx")
#: The smallest cosine, over the probe labels, between a runtime's vector and torch's.
AUTO_MIN_COSINE = 0.99999
#: Pins what `auto` runs.
BACKEND_ENV = "LABELSHIFT_BACKEND"


def installed_runtimes() -> dict[str, str]:
    """Runtime -> its version (its first module's distribution: the memo's key), for the
    runtimes of `AUTO_ORDER` whose packages are installed."""
    from importlib.metadata import PackageNotFoundError, version  # 13 ms: not in --help

    out = {}
    for backend in AUTO_ORDER:
        if all(importlib.util.find_spec(m) is not None for m in EXTRA_MODULES[backend]):
            try:
                out[backend] = version(EXTRA_MODULES[backend][0])
            except PackageNotFoundError:
                continue
    return out


def probe_labels() -> list[str]:
    """The labels a runtime is checked on: every packaged benchmark's and Few-NERD's, sorted."""

    tags = {verbalise(t) for b in benchmarks().values() for t in b.tags}
    return sorted(tags | {fewnerd_verbalise(t) for t in fewnerd_fine_types()})


def choose_backend(emb: Embedder) -> str:
    """The runtime `--backend auto` runs for `emb` (its model, precision and device)."""
    pinned = os.environ.get(BACKEND_ENV, "").strip().lower()
    if pinned not in ("", "auto", "torch", *AUTO_ORDER):
        raise InvalidValue(f"{BACKEND_ENV}={pinned!r}: give torch, onnx, openvino or auto")
    if emb.precision != "fp32" or emb.device_kind != "cpu":
        return "torch"  # the runtimes run on a CPU; only torch runs every precision
    if pinned not in ("", "auto"):
        return pinned
    installed = installed_runtimes()
    if not installed:
        _note_once(
            emb,
            "torch (no faster runtime installed: pip install "
            "'labelshift-builders[openvino]' embeds about 2.4x faster on a CPU)",
        )
        return "torch"
    memo = _memo_path(emb.model_name, emb.weights)
    seen = _read_memo(memo)
    if seen is not None and seen.get("installed") == installed:
        return str(seen["backend"])
    backend, cosines = _check(emb, list(installed))
    _write_memo(memo, {"backend": backend, "installed": installed, "cosines": cosines})
    _announce(emb, backend, cosines)
    return backend


def expected_backend(model: str, weights: str, precision: str) -> str | None:
    """What `choose_backend` would run for `model` (canonical name, weights' hash) here,
    without loading the model; None when it would have to check the runtimes first."""
    pinned = os.environ.get(BACKEND_ENV, "").strip().lower()
    if precision != "fp32" or pinned == "torch":
        return "torch"
    installed = installed_runtimes()
    if not installed and pinned not in AUTO_ORDER:
        return "torch"
    if auto_device() != "cpu":
        return "torch"
    if pinned in AUTO_ORDER:
        return pinned
    seen = _read_memo(_memo_path(model, weights))
    if seen is not None and seen.get("installed") == installed:
        return str(seen["backend"])
    return None


def _check(emb: Embedder, candidates: list[str]) -> tuple[str, dict[str, Any]]:
    """The first candidate whose probe vectors pass against torch's, and each one's result."""
    labels = probe_labels()
    make = type(emb)  # the Embedder class, without importing its module (it imports this one)
    # each runtime as the caller's spec says but for the backend (the device and rows fixed)
    runtime = {"device": "cpu", "batch_size": emb.batch_size}
    torch_emb = make.of(replace(emb.spec, backend="torch"), **runtime)
    torch_emb._st = emb._st  # a model the caller already loaded is not loaded twice
    want = torch_emb.encode(labels)
    emb._st = torch_emb._st
    cosines: dict[str, Any] = {}
    for backend in candidates:
        other = make.of(replace(emb.spec, backend=backend), **runtime)
        other._st = torch_emb._st
        try:
            got = other.encode(labels)
        except (BuildersError, RuntimeError, ValueError, OSError) as exc:
            cosines[backend] = f"failed: {exc}"
            continue
        cos = float(np.min(np.sum(got.astype(np.float64) * want, axis=1)))
        cosines[backend] = cos
        if cos >= AUTO_MIN_COSINE:
            return backend, cosines
    return "torch", cosines


def _announce(emb: Embedder, backend: str, cosines: dict[str, Any]) -> None:
    checked = ", ".join(
        f"{b} {c:.7f}" if isinstance(c, float) else f"{b} {c}" for b, c in cosines.items()
    )
    if backend == "torch":
        why = f"no runtime's vectors had cosine >= {AUTO_MIN_COSINE} with torch's ({checked})"
        _note(f"{opt('backend', 'auto')} runs torch for {emb.model_name}: {why}")
    else:
        _note(
            f"{opt('backend', 'auto')} runs {backend} for {emb.model_name} (smallest cosine with torch "
            f"over {len(probe_labels())} labels: {checked}); checked once, remembered"
        )


def _note_once(emb: Embedder, text: str) -> None:
    memo = _memo_path(emb.model_name, "none-installed")
    if memo.is_file():
        return
    _note(f"{opt('backend', 'auto')} runs {text}")
    _write_memo(memo, {"backend": "torch", "installed": {}})


def _note(text: str) -> None:
    warnings.warn(text, BuildersNote, stacklevel=3)


def _memo_path(model: str, weights: str) -> Path:
    slug = model.replace("/", "--").replace("@", "-")
    return model_cache_dir() / "runtime-choice" / f"{slug}-{weights}.json"


def _read_memo(path: Path) -> dict[str, Any] | None:
    try:
        seen = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(seen, dict) and seen.get("backend") in ("torch", *AUTO_ORDER)
    return seen if ok else None


def _write_memo(path: Path, record: dict[str, Any]) -> None:
    """Written whole; one that cannot be written only costs a later check."""
    with contextlib.suppress(OSError):
        atomic_write_text(path, json.dumps(record, indent=2, sort_keys=True))
