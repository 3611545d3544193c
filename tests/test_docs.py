"""The docs stay true: docs/DESIGN.md's module table names every module under `builders/` (and
no module that is gone), and the README's Python blocks run as printed.

The README's second block reads the demo's store (`out/demo.duckdb`): it runs in a folder
holding a copy of the session's sample store, as `make demo` leaves one (the first block needs
nothing but the packaged model). Nothing is downloaded: the blocks run with HF_HUB_OFFLINE=1.
They are of the slow tier (`make test-all`, CI): each loads a model in a new process, and the
second embeds the sample's labels with the paper's model (about 60 s on 2 cores together).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

import builders

PACKAGE = Path(builders.__file__).parent
DESIGN = ROOT / "docs" / "DESIGN.md"
README = ROOT / "README.md"


def design_modules(text: str) -> set[str]:
    """The modules DESIGN.md's module table names (`| \\`store/db.py\\` | ... |` rows)."""
    section = text.split("## Modules (`builders/`)", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([\w/]+\.py)` \|", section, flags=re.M))


def package_modules() -> set[str]:
    """Every module of the package, as a path under `builders/`; a package's `__init__.py`
    only where it holds more than its imports (a docstring, `__all__` and re-exports)."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if path.name == "__main__.py" or (path.name == "__init__.py" and _only_exports(path)):
            continue
        found.add(rel)
    return found


def _only_exports(path: Path) -> bool:
    import ast

    body = ast.parse(path.read_text(encoding="utf-8")).body
    return all(
        isinstance(node, ast.Import | ast.ImportFrom)
        or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        or (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", "") for t in node.targets] == ["__all__"]
        )
        for node in body
    )


def test_design_names_every_module_and_no_module_that_is_gone() -> None:
    named = design_modules(DESIGN.read_text(encoding="utf-8"))
    have = package_modules()
    assert not have - named, f"docs/DESIGN.md's module table does not name: {sorted(have - named)}"
    gone = {m for m in named - have if not (PACKAGE / m).is_file()}
    assert not gone, f"docs/DESIGN.md names modules that are gone: {sorted(gone)}"


def test_the_module_check_can_fail() -> None:
    """A table without a row misses that module; a row for a module that is gone is seen."""
    text = DESIGN.read_text(encoding="utf-8")
    without = text.replace("| `store/db.py` |", "| store db |")
    assert "store/db.py" in package_modules() - design_modules(without)
    assert (
        design_modules(text.replace("| `store/db.py` |", "| `store/gone.py` |")) - package_modules()
    )


def python_blocks(text: str) -> list[tuple[int, str]]:
    """The README's ```python blocks: (line number of the fence, code)."""
    return [
        (text[: m.start()].count("\n") + 1, m.group(1))
        for m in re.finditer(r"^```python\n(.*?)^```$", text, flags=re.M | re.S)
    ]


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 2, BLOCKS


@pytest.fixture(scope="module")
def demo_folder(sample_results: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding `out/demo.duckdb`: a copy of the session's sample store."""
    root = tmp_path_factory.mktemp("readme-python")
    (root / "out").mkdir()
    shutil.copy(sample_results["db"], root / "out" / "demo.duckdb")
    return root


@pytest.mark.slow  # a new process loads a model; the second block embeds with the paper's model
@pytest.mark.parametrize(("line", "code"), BLOCKS, ids=[f"README.md:{n}" for n, _ in BLOCKS])
def test_the_readme_python_blocks_run(line: int, code: str, demo_folder: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=demo_folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"README.md:{line}: exit {done.returncode}\n{done.stderr}"
    assert done.stdout.strip(), f"README.md:{line}: printed nothing\n{done.stderr}"
