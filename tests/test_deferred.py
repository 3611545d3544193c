"""`builders.deferred`: numpy, pyarrow and DuckDB imported on first use, and the rule that the
library takes them from there (so a command's `--help` imports none of them:
tests/cli/test_lazy.py checks every command)."""

from __future__ import annotations

import ast
import subprocess
import sys
import types
from pathlib import Path

import pytest

import builders
from builders import deferred

ROOT = Path(builders.__file__).parent
DEFERRED = {"numpy", "pyarrow", "duckdb"}


def _top_level_imports(path: Path) -> list[str]:
    """The deferred libraries a module imports at its top (not inside a function, and not
    under `if TYPE_CHECKING:`, which only names types)."""
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        found += [f"{path.name}:{node.lineno} {n}" for n in names if n.split(".")[0] in DEFERRED]
    return found


def test_the_library_takes_numpy_pyarrow_and_duckdb_from_deferred() -> None:
    found = [
        hit
        for path in sorted(ROOT.rglob("*.py"))
        if path.name != "deferred.py"
        for hit in _top_level_imports(path)
    ]
    assert found == [], "import these through builders.deferred (see its docstring)"


def test_the_rule_can_fail(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "import numpy as np\nfrom pyarrow import parquet\ndef f():\n    import duckdb\n"
    )
    assert _top_level_imports(module) == ["m.py:1 numpy", "m.py:2 pyarrow"]


def test_the_stand_ins_are_the_libraries() -> None:
    import duckdb
    import numpy
    import pyarrow
    import pyarrow.compute
    import pyarrow.parquet

    assert deferred.np.ndarray is numpy.ndarray
    assert deferred.pa.table is pyarrow.table
    assert deferred.pc.sum is pyarrow.compute.sum
    assert deferred.pq.write_table is pyarrow.parquet.write_table
    assert deferred.duckdb.connect is duckdb.connect
    assert deferred.duckdb.__version__ == duckdb.__version__
    assert deferred.pa.types is pyarrow.types  # vector_cache reads `pa.types`
    for stand_in in (deferred.np, deferred.pa, deferred.pc, deferred.pq, deferred.duckdb):
        assert type(stand_in) is types.ModuleType  # read at a module's speed once used
    with pytest.raises(AttributeError):
        deferred.np.no_such_attribute  # noqa: B018


def test_a_library_is_imported_on_first_use_only() -> None:
    code = (
        "import sys\n"
        "from builders.deferred import np, pq\n"
        "before = 'numpy' in sys.modules, 'pyarrow.parquet' in sys.modules\n"
        "np.zeros(1)\n"
        "print(before, 'numpy' in sys.modules, 'pyarrow.parquet' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(False, False) True False"


def test_a_patched_attribute_is_seen_through_the_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests patch the library where the code finds it (`scan_cache.pq.write_table`): every
    module shares one stand-in, so the patch reaches all of them and is undone after."""
    from builders.shift import scan_cache, vector_cache

    real = deferred.pq.write_table
    monkeypatch.setattr(scan_cache.pq, "write_table", len)
    assert vector_cache.pq.write_table is len
    monkeypatch.undo()
    assert vector_cache.pq.write_table is real
