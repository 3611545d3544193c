"""NumPy, PyArrow and DuckDB, imported on first use.

A command's `--help` imports its command module and, through it, the library. Importing NumPy,
PyArrow and DuckDB takes about 0.3 s, more than the rest of the help, and the help uses none of
them. So library modules take these libraries from here (`from builders.deferred import np`):
to a type checker each name is the library itself; at run time it is a stand-in module that
imports the library on its first attribute access and keeps each attribute it hands out, so
that later accesses cost what a module's own would. A test runs every command's `--help` and
checks that none of the libraries was imported.
"""

from __future__ import annotations

import importlib
import types
from typing import TYPE_CHECKING, Any

__all__ = ["duckdb", "np", "pa", "pc", "pq"]


class Deferred(types.ModuleType):
    """A stand-in for the module named `name`, imported when an attribute is first asked for."""

    def __getattr__(self, attribute: str) -> Any:
        value = getattr(importlib.import_module(self.__name__), attribute)
        setattr(self, attribute, value)
        return value


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
