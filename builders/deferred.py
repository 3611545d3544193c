"""NumPy, PyArrow and DuckDB, imported on first use.

A command's `--help` imports its command module and, through it, the library. Importing NumPy,
PyArrow and DuckDB takes about 0.3 s, more than the rest of the help, and the help uses none of
them. So library modules take these libraries from here (`from builders.deferred import np`):
to a type checker each name is the library itself; at run time it is a stand-in module that
imports the library on its first attribute access and from then on holds its namespace, so
that later accesses cost what a module's own would. A test runs every command's `--help` and
checks that none of the libraries was imported.
"""

from __future__ import annotations

import importlib
import types
from typing import TYPE_CHECKING, Any

__all__ = ["duckdb", "np", "pa", "pc", "pq"]


class Deferred(types.ModuleType):
    """A stand-in for the module named `name`, imported when an attribute is first asked for.

    Then the stand-in takes the module's namespace and becomes a plain module (as
    `importlib.util.LazyLoader` does): an attribute is then read at a module's own speed
    (through this class's `__getattr__` it took 3x as long, in loops that read `np.` millions
    of times). A module-level `__getattr__` (PEP 562) comes with the namespace; a submodule
    imported later does not, so each submodule the library uses is a stand-in of its own
    (`pc`, `pq`). A test patches a library through its stand-in (`scan_cache.pq`), never
    the library's own module, which the stand-in no longer reads once used."""

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
