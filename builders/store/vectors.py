"""The embedding cache `Store` inherits: label vectors per cache key (`model|backend|precision|
device|rows|weights`); a shared store holds new ones in memory until `flush_vectors`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from builders.deferred import duckdb, np, pa, pc
from builders.errors import StoreError
from builders.store.schema import one


def _vector_rows(model: str, labels: pa.Array, vectors: np.ndarray) -> pa.Table:
    """(model, label, vector) rows for the embeddings table."""
    n, dim = vectors.shape
    offsets = pa.array(np.arange(0, (n + 1) * dim, dim, dtype=np.int32))
    vec = pa.ListArray.from_arrays(offsets, pa.array(vectors.reshape(-1), pa.float32()))
    return pa.table({"model": pa.array([model] * n, pa.string()), "label": labels, "vector": vec})


class VectorQueries:
    """Mixed into `Store`: the embedding cache."""

    con: duckdb.DuckDBPyConnection
    shared: bool
    _pending: dict[str, list[tuple[pa.Array, np.ndarray]]]

    if TYPE_CHECKING:  # `Store`'s own and `SubsetQueries`'

        @contextmanager
        def _registered(self, name: str, table: pa.Table) -> Iterator[None]: ...
        @contextmanager
        def _writable(self, reopen: bool = True) -> Iterator[None]: ...
        @contextmanager
        def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]: ...
        def close(self) -> None: ...

    def cached_vectors(self, model: str, labels: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """(positions into `labels`, float32 vectors) of the labels cached for `model` (in
        the store, or held in memory to be written: `add_vectors` on a shared store)."""
        pos, vectors = self._stored_vectors(model, labels)
        held = self._held(model)
        if held is None or len(pos) == len(labels):
            return pos, vectors
        rest = np.setdiff1d(np.arange(len(labels)), pos)
        at = pc.index_in(labels.take(pa.array(rest)), value_set=held[0])
        hit = at.is_valid().to_numpy(zero_copy_only=False)
        if not hit.any():
            return pos, vectors
        more = held[1][at.fill_null(0).to_numpy(zero_copy_only=False)[hit]]
        if len(pos) and more.shape[1] != vectors.shape[1]:
            raise StoreError(f"embedding cache holds vectors of several lengths for {model!r}")
        both = np.concatenate([vectors.reshape(-1, more.shape[1]), more])
        return np.concatenate([pos, rest[hit]]), both

    def _stored_vectors(self, model: str, labels: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """`cached_vectors` of the store's table alone."""
        query = pa.table({"pos": pa.array(np.arange(len(labels), dtype=np.int64)), "label": labels})
        with self._registered("_emb_query", query):
            hit = self.con.sql(
                "SELECT q.pos, e.vector FROM _emb_query q JOIN embeddings e "
                "ON e.model = ? AND e.label = q.label",
                params=[model],
            ).to_arrow_table()
        pos = hit.column("pos").to_numpy()
        if not len(pos):
            return pos, np.zeros((0, 0), dtype=np.float32)
        lengths = pc.list_value_length(hit.column("vector"))
        dims = pc.min_max(lengths).as_py()
        if dims["min"] != dims["max"]:
            raise StoreError(f"embedding cache holds vectors of several lengths for {model!r}")
        flat = hit.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
        return pos, flat.astype(np.float32, copy=False).reshape(len(pos), dims["max"])

    def add_vectors(self, model: str, labels: pa.Array, vectors: np.ndarray) -> None:
        """Cache `vectors` (one row per label) for `model`, in one statement; a shared store
        holds them in memory until `flush_vectors()`."""
        if self.shared:
            if isinstance(labels, pa.ChunkedArray):
                labels = labels.combine_chunks()
            parts = self._pending.setdefault(model, [])
            if parts and parts[0][1].shape[1] != vectors.shape[1]:
                raise StoreError(f"vectors of several lengths given for {model!r}")
            parts.append((labels, np.asarray(vectors, dtype=np.float32)))
            return
        with self._registered("_emb_new", _vector_rows(model, labels, vectors)):
            sql = "INTO embeddings SELECT model, label, vector FROM _emb_new"
            try:  # one statement, one transaction
                self.con.execute("INSERT " + sql)
            except duckdb.ConstraintException:  # a concurrent writer got there first
                self.con.execute("INSERT OR IGNORE " + sql)  # ten times slower: a fallback

    @property
    def pending_vectors(self) -> int:
        """Label vectors held in memory, not yet written to the store (a shared store's)."""
        return sum(len(labels) for parts in self._pending.values() for labels, _ in parts)

    def _held(self, model: str) -> tuple[pa.Array, np.ndarray] | None:
        """The labels and vectors held in memory for `model`, joined into one part."""
        parts = self._pending.get(model)
        if not parts:
            return None
        if len(parts) > 1:
            labels = pa.concat_arrays([p[0] for p in parts])
            parts[:] = [(labels, np.concatenate([p[1] for p in parts]))]
        return parts[0]

    def flush_vectors(self, *, close: bool = False) -> int:
        """Write the label vectors held in memory in one transaction (those another process
        cached meanwhile are kept as they are); returns how many were held. With `close`, the
        store is closed after the write. On a `StoreError` the vectors are still held."""
        models = [m for m in self._pending if self._held(m) is not None]
        n = self.pending_vectors
        if not models:
            if close:
                self.close()
            return 0
        with self._writable(reopen=not close), self.transaction() as con:
            for model in models:
                held = self._held(model)
                assert held is not None
                with self._registered("_emb_new", _vector_rows(model, *held)):
                    con.execute(
                        "INSERT INTO embeddings SELECT n.model, n.label, n.vector FROM _emb_new n "
                        "ANTI JOIN embeddings e ON e.model = n.model AND e.label = n.label"
                    )
        self._pending.clear()
        if close:
            self.close()
        return n

    def drop_vectors(self, model: str) -> int:
        """Forget every cached vector of `model`; returns how many there were."""
        self._pending.pop(model, None)
        (n,) = one(self.con.execute("SELECT count(*) FROM embeddings WHERE model = ?", [model]))
        with self.transaction() as con:
            con.execute("DELETE FROM embeddings WHERE model = ?", [model])
        return int(n)
