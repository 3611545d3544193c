"""NumPy, PyArrow and DuckDB, imported on first use (`from builders.deferred import np`), so
that a command's `--help` does not pay their 0.3 s of import (a test checks it). To a type
checker each name is the library itself.
"""

from __future__ import annotations

import importlib
import types
from typing import TYPE_CHECKING, Any

__all__ = ["duckdb", "np", "pa", "pc", "pq"]


class Deferred(types.ModuleType):
    """A stand-in for the module named `name`, imported when an attribute is first asked for;
    then it takes the module's namespace and becomes a plain module (as `LazyLoader` does),
    read at a module's own speed. A submodule is a stand-in of its own (`pc`, `pq`); a test
    patches a library through its stand-in (`scan_cache.pq`)."""

    def __getattr__(self, attribute: str) -> Any:
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)
        self.__class__ = types.ModuleType  # type: ignore[assignment]
        return getattr(self, attribute)


if TYPE_CHECKING:
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
else:
    duckdb = Deferred("duckdb")
    np = Deferred("numpy")
    pa = Deferred("pyarrow")
    pc = Deferred("pyarrow.compute")
    pq = Deferred("pyarrow.parquet")
