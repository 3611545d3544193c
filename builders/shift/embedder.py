"""Label embeddings: the `Embedder` (a runtime over a resolved model) and the store's cache.

Models are located by `builders.shift.models`, run by `builders.shift.runtime` over the length
buckets of `builders.shift.buckets`; vectors are cached in the store under `Embedder.cache_key`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builders.defaults import DEFAULT_BACKEND, DEFAULT_MODEL, DEFAULT_PRECISION
from builders.deferred import np, pa, pc
from builders.errors import CacheError, ConflictingOptions, InvalidValue, ModelUnavailable, opt
from builders.shift.auto import choose_backend
from builders.shift.models import (
    ResolvedModel,
    _offline,
    auto_device,
    cached_snapshot,
    canonical_name,
    model_cache_dir,
    resolve_model,
    weights_fingerprint,
)
from builders.shift.runtime import (
    Runner,
    TorchRunner,
    ensure_export,
    export_dir,
    load_exported,
    quiet_loss_type,
    require_extra,
)
from builders.shift.specs import EmbeddingSpec
from builders.shift.vector_cache import VectorCache

if TYPE_CHECKING:
    from builders.store import Store

#: Rows per batch by default, on a CPU (the fastest of 16, 32 and 64 for every runtime:
#: docs/PERFORMANCE.md) and on an accelerator. Each token length's last batch is filled up
#: with repeats (`builders.shift.buckets`): 200,000 labels of 13 token lengths compute 1.65x
#: their real tokens at 8192 rows, 1.15x at 2048 and 1.08x at 1024 (GPU throughput unmeasured).
CPU_BATCH = 32
GPU_BATCH = 2048


#: Parts of a cache key (`Embedder.cache_key`): model|backend|precision|device|rows|weights.
KEY_PARTS = 6


def is_stale_key(key: str) -> bool:
    """A cache key this version never writes (an older version's): never read again."""
    return len(key.split("|")) != KEY_PARTS


@dataclass(frozen=True)
class CacheStats:
    """Where one `Embedder.embed_cached` call's `distinct` labels came from."""

    requested: int
    distinct: int
    cached: int
    new: int
    shared: int = 0

    def message(self) -> str:
        return (
            f"embedded {self.new:,} new labels, {self.cached:,} from the store's cache, "
            f"{self.shared:,} from the user cache"
        )


class Embedder:
    """Sentence-transformer label embeddings through a runtime (`backend`: auto, torch, onnx
    or openvino) at a `precision`, cached under `cache_key`; the model loads on first use."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        device: str | None = None,
        batch_size: int | None = None,
        backend: str = DEFAULT_BACKEND,
        precision: str = DEFAULT_PRECISION,
    ):
        if batch_size is not None and batch_size < 1:
            raise InvalidValue(f"batch_size must be at least 1, got {batch_size}")
        EmbeddingSpec(model, backend, precision)  # refuses what no runtime runs
        if backend not in ("torch", "auto") and device not in (None, "auto", "cpu"):
            raise ConflictingOptions(
                f"{opt('backend', backend)} runs on the CPU, not on {device!r}"
            )
        self.model = model
        self.requested_backend = backend
        self._backend: str | None = None if backend == "auto" else backend
        self.precision = precision
        self.device: str | None = None if device in (None, "auto") else device  # auto: on load
        if backend not in ("torch", "auto"):
            self.device = "cpu"
        self._batch_size = batch_size
        self._canonical: str | None = None
        self._key: str | None = None
        self.resolved: ResolvedModel | None = None  # set when the model is located
        self._st: Any = None
        self._runner: Runner | None = None
        self.last_stats: CacheStats | None = None
        self._user_cache: VectorCache | str | None = "default"

    @classmethod
    def of(cls, spec: EmbeddingSpec | Embedder, **runtime: Any) -> Embedder:
        """The embedder of a spec, with the machine's `device` and `batch_size` (`runtime`);
        an `Embedder` is returned as it is (shared: one model load)."""
        if isinstance(spec, Embedder):
            return spec
        return cls(**spec.to_dict(), **runtime)

    @property
    def spec(self) -> EmbeddingSpec:
        """What this embedder was asked for (`auto` as asked)."""
        return EmbeddingSpec(self.model, self.requested_backend, self.precision)

    @property
    def backend(self) -> str:
        """The runtime that embeds: as asked, or `auto.choose_backend`'s choice."""
        if self._backend is None:
            self._backend = choose_backend(self)
        return self._backend

    @property
    def model_name(self) -> str:
        """The canonical model name (what reports name)."""
        if self._canonical is None:
            self._canonical = canonical_name(self.model)
        return self._canonical

    @property
    def batch_size(self) -> int:
        """Rows per batch: as given, else 32 on a CPU and 2048 on an accelerator."""
        if self._batch_size is not None:
            return self._batch_size
        return CPU_BATCH if (self.device or "cpu") == "cpu" else GPU_BATCH

    def locate(self) -> ResolvedModel:
        """Where the model loads from, found without loading it: an unknown name fails at once."""
        if self.resolved is None:
            self.resolved = resolve_model(self.model)
        return self.resolved

    @property
    def weights(self) -> str:
        """The weights' hash (locates the model, never loads it; a Hub model is downloaded)."""
        folder = Path(self.locate().path_or_name)
        if not folder.is_dir():  # a Hub name, online: loading downloads it into the HF cache
            _ = self.st
            folder = cached_snapshot(self.model_name) or folder
            if not folder.is_dir():
                raise ModelUnavailable(f"cannot locate the weights of {self.model!r} to hash them")
        return weights_fingerprint(folder)

    @property
    def device_kind(self) -> str:
        """cpu, cuda or mps: where the vectors are computed (resolved without loading the model)."""
        if self.device is None:
            self.device = auto_device()
        return self.device.split(":")[0]

    @property
    def cache_key(self) -> str:
        """`model|backend|precision|device|rows|weights-hash`: everything that changes a
        vector's bytes (float32 results differ by ~1e-7 between devices and batch shapes)."""
        if self._key is None:
            device = self.device_kind
            parts = (self.model_name, self.backend, self.precision, device, str(self.batch_size))
            self._key = "|".join((*parts, self.weights))
        return self._key

    @property
    def st(self) -> Any:
        """The loaded `SentenceTransformer` (loads it on first access)."""
        if self._st is None:
            res = self.locate()
            self.device = self.device or auto_device()
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # its "Loading weights" bar ignores --quiet
            try:
                with quiet_loss_type():
                    self._st = SentenceTransformer(
                        res.path_or_name, device=self.device, local_files_only=_offline()
                    )
            except Exception as exc:
                raise ModelUnavailable(
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
    def user_cache(self) -> VectorCache | None:
        """The per-user cache: `VectorCache.default()` (read at each use) unless set."""
        if isinstance(self._user_cache, str):
            return VectorCache.default()
        return self._user_cache

    @user_cache.setter
    def user_cache(self, cache: VectorCache | None) -> None:
        self._user_cache = cache

    @property
    def dimension(self) -> int:
        return self.runner.dim

    @property
    def last_new(self) -> int:
        return self.last_stats.new if self.last_stats else 0

    def encode(self, labels: Sequence[str], progress: bool = False) -> np.ndarray:
        """Embed `labels` in order: unit float32 rows, shape (len(labels), dim)."""
        labels = list(labels)
        if not labels:
            return np.zeros((0, self.dimension), dtype=np.float32)
        out = self.runner.encode(labels, self.batch_size, progress=progress)
        return np.ascontiguousarray(out, dtype=np.float32)

    def embed_cached(
        self, store: Store, labels: Sequence[str], progress: bool = False
    ) -> np.ndarray:
        """Embed `labels` (duplicates allowed) in order, encoding only those in neither the
        store's cache nor the per-user one; the store gets the vectors it lacked, the user
        cache the new ones. A warm cache never loads the model. Sets `self.last_stats`."""
        arr = pa.array(list(labels), pa.string())
        uniq = pc.unique(arr)  # first-occurrence order
        table, found = self._from_caches(store, uniq)
        todo = np.flatnonzero(found == 0)
        if len(todo):
            todo_labels = uniq.take(pa.array(todo))
            new = self.encode(todo_labels.to_pylist(), progress=progress)
            table = self._filled(table, todo, new, len(uniq))
            store.add_vectors(self.cache_key, todo_labels, new)
            if (user := self.user_cache) is not None:
                user.add(self.cache_key, todo_labels, new)
        counts = np.bincount(found, minlength=3)
        self.last_stats = CacheStats(len(arr), len(uniq), int(counts[1]), len(todo), int(counts[2]))
        if table is None:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if len(uniq) == len(arr):  # no duplicates: already in input order, skip a copy
            return table
        return table[pc.index_in(arr, value_set=uniq).to_numpy(zero_copy_only=False)]

    def _from_caches(self, store: Store, uniq: pa.Array) -> tuple[np.ndarray | None, np.ndarray]:
        """The vectors of `uniq` the caches hold (rows of the others unset; None when none is
        held), and where each came from: 0 nowhere, 1 the store, 2 the user cache (those are
        added to the store)."""
        key = self.cache_key
        found = np.zeros(len(uniq), dtype=np.int8)
        pos, cached = store.cached_vectors(key, uniq)
        found[pos] = 1
        table = self._filled(None, pos, cached, len(uniq)) if len(pos) else None
        rest = np.flatnonzero(found == 0)
        user = self.user_cache
        if user is None or not len(rest):
            return table, found
        rest_labels = uniq.take(pa.array(rest))
        upos, shared = user.lookup(key, rest_labels)
        if len(upos):
            found[rest[upos]] = 2
            table = self._filled(table, rest[upos], shared, len(uniq))
            store.add_vectors(key, rest_labels.take(pa.array(upos)), shared)
        return table, found

    def _filled(
        self, table: np.ndarray | None, rows: np.ndarray, vectors: np.ndarray, n: int
    ) -> np.ndarray:
        """`table` (made (n, dim) on first use) with `vectors` written at `rows`."""
        if table is None:
            table = np.empty((n, vectors.shape[1]), dtype=np.float32)
        elif vectors.shape[1] != table.shape[1]:
            raise CacheError(
                f"cached {self.cache_key!r} vectors are {table.shape[1]}-d, the model gives "
                f"{vectors.shape[1]}-d; clear the model's vectors (`builders cache clear`) "
                "or drop them from the store's embedding cache"
            )
        table[rows] = vectors
        return table


#: Rows of the larger matrix multiplied at once in `cosine_clipped` (its float64 buffer: 48 MB
#: at 768 dimensions).
COSINE_CHUNK = 8192


def cosine_clipped(
    a: np.ndarray, b: np.ndarray, dtype: Any = "float64", *, transposed: bool = False
) -> np.ndarray:
    """max(cos, 0) of unit float32 rows as a (len(a), len(b)) matrix clipped to [0, 1] (with
    `transposed`, its transpose, the same bits).

    Products are computed in float64 and rounded to float32, so a similarity does not depend
    on the other rows and columns: a float32 matrix product's bits depend on its shape, which
    moved a label's F(z) by up to 1.5e-7 with the benchmarks named beside it. The larger side
    goes `COSINE_CHUNK` rows at a time."""
    a32 = np.asarray(a, dtype=np.float32)
    b32 = np.asarray(b, dtype=np.float32)
    if a32.ndim != 2 or b32.ndim != 2 or a32.shape[1] != b32.shape[1]:
        raise InvalidValue(
            f"cosine_clipped: need (n, d) and (m, d) arrays, got {a32.shape}, {b32.shape}"
        )
    swap = len(b32) > len(a32)  # chunk the larger one: only the smaller is copied whole
    big, small = (b32, a32) if swap else (a32, b32)
    flip = swap != transposed  # the big side runs along the result's columns
    shape = (len(b32), len(a32)) if transposed else (len(a32), len(b32))
    sims = np.empty(shape, dtype=np.float32)
    st = small.astype(np.float64).T
    buf = np.empty((min(COSINE_CHUNK, len(big)), big.shape[1]), dtype=np.float64)
    for start in range(0, len(big), COSINE_CHUNK):
        n = min(COSINE_CHUNK, len(big) - start)
        np.copyto(buf[:n], big[start : start + n])
        block = buf[:n] @ st
        if flip:
            sims[:, start : start + n] = block.T
        else:
            sims[start : start + n] = block
        del block  # before the next one is made
    np.clip(sims, 0.0, 1.0, out=sims)
    return sims.astype(dtype, copy=False)
