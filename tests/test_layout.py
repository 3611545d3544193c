"""The package's shape: one package per stage of the data walk, imports only downward.

    errors, defaults < labels < sources < store < shift < hub < splits | fewnerd
    < scenarios < cli

Every `import` in `builders/` counts, at module level or inside a function: a stage may import
its own package and the stages below it, never one above or beside it, and no two modules
import each other, directly or round a cycle (counting the imports that run: those under
`if TYPE_CHECKING:` only name types, so they keep the layers but make no cycle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import builders

ROOT = Path(builders.__file__).parent
#: Stage -> rank; a stage imports only stages of a lower rank (and its own package).
RANKS = {
    "errors": 0,
    "files": 0,
    "defaults": 0,
    "names": 1,
    "processes": 0,
    "progress": 0,
    "deferred": 0,
    "data": 0,
    "labels": 1,
    "sources": 2,
    "store": 3,
    "shift": 4,
    "hub": 5,
    "splits": 6,
    "fewnerd": 6,
    "evaluate": 6,
    "scenarios": 7,
    "cli": 8,
    "__main__": 9,
}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, run_time: bool = False) -> set[str]:
    """Every builders module this file imports (absolute imports; the code uses no others);
    with `run_time`, not those under `if TYPE_CHECKING:`."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(n)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for stmt in block.body
        for n in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if run_time and id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("builders")}
        elif (
            isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("builders")
        ):
            assert node.level == 0, f"{path}: relative import"
            for alias in node.names:  # `from builders.hub import folder` imports a module
                sub = f"{node.module}.{alias.name}"
                found.add(sub if _is_module(sub) else node.module)
    return found


def _is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:])
    return (ROOT / rel).with_suffix(".py").is_file() or (ROOT / rel / "__init__.py").is_file()


GRAPH = {_module(p): _imports(p) for p in sorted(ROOT.rglob("*.py"))}
RUN_TIME = {_module(p): _imports(p, run_time=True) for p in sorted(ROOT.rglob("*.py"))}


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_stage_has_a_rank() -> None:
    stages = {_stage(m) for m in GRAPH} - {""}
    assert stages <= set(RANKS), f"give these a rank: {sorted(stages - set(RANKS))}"


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if _stage(m)))
def test_imports_go_only_down(module: str) -> None:
    here = _stage(module)
    bad = sorted(
        target
        for target in GRAPH[module]
        if _stage(target) and _stage(target) != here and RANKS[_stage(target)] >= RANKS[here]
    )
    assert not bad, f"{module} ({here}, rank {RANKS[here]}) imports upward or sideways: {bad}"


def test_no_import_cycles() -> None:
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(RUN_TIME.get(node, ())):
            if nxt == node or nxt not in RUN_TIME:
                continue
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(RUN_TIME):
        if node not in state:
            visit(node)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_checks_can_fail() -> None:
    """The graph is real: the CLI sits on the splitter, and the splitter on the store."""
    assert "builders.splits" in GRAPH["builders.cli.splits"]
    assert "builders.store" in GRAPH["builders.splits.pipeline"]
    assert RANKS["store"] < RANKS["splits"] < RANKS["cli"]


def test_the_card_templates_are_package_data_not_a_top_level_module(tmp_path: Path) -> None:
    """Installed, `cards/` is `builders.cards`: `import cards` finds nothing outside the repo."""
    import subprocess
    import sys

    code = (
        "import importlib.resources as r, importlib.util as u;"
        "print(u.find_spec('cards') is None,"
        " r.files('builders.cards').joinpath('subset.md.j2').is_file())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["True", "True"]


def test_the_card_templates_are_found_from_a_checkout_without_the_package_mapping() -> None:
    """`python -m pytest` in a checkout beside a non-editable install imports `builders` from
    the checkout, where `builders.cards` is no module: the templates come from `cards/`."""
    import subprocess
    import sys

    code = (
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in"
        " getattr(f, '__module__', '') and 'editable' not in repr(f)];"
        "import importlib.util as u; print(u.find_spec('builders.cards') is None);"
        "from builders.hub.templating import card_text, environment;"
        "print(card_text('METHOD.md').startswith('# '),"
        " bool(environment().get_template('subset.md.j2')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT.parent, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["True", "True", "True"]


def test_every_method_reference_resolves_to_a_section_of_docs_method() -> None:
    """`METHOD.md section N` (and `sections N, M and P`) anywhere in the code, the card
    templates, the docs or the README names a section docs/METHOD.md has."""
    import re

    root = Path(builders.__file__).parent.parent
    method = (root / "docs" / "METHOD.md").read_text(encoding="utf-8")
    have = {int(n) for n in re.findall(r"^## (\d+)\. ", method, flags=re.M)}
    files = [*root.glob("builders/**/*.py"), *root.glob("cards/*.j2"), *root.glob("docs/*.md")]
    files += [root / "README.md", *root.glob("scripts/*.py")]
    cited: set[int] = set()
    for path in files:
        text = path.read_text(encoding="utf-8")
        for ref in re.findall(r"METHOD\.md\]?(?:\(METHOD\.md\))?,? sections? ([\d, and]+)", text):
            cited |= {int(n) for n in re.findall(r"\d+", ref)}
    assert cited and cited <= have, sorted(cited - have)
    assert (root / "cards" / "METHOD.md").resolve() == (root / "docs" / "METHOD.md").resolve()


def _exception_classes(path: Path) -> list[str]:
    """Public classes of a module that derive from an exception type (by their bases' names:
    `...Error`, `...Exception`, `...Warning`, `...Note`, or a class of `builders.errors`)."""
    import builders.errors as errors

    ours = {
        n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, BaseException)
    }
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
            continue
        bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
        if any(b.endswith(("Error", "Exception", "Warning")) or b in ours for b in bases):
            found.append(node.name)
    return found


def test_every_public_exception_type_is_in_errors_py() -> None:
    outside = {
        str(p.relative_to(ROOT)): names
        for p in sorted(ROOT.rglob("*.py"))
        if p.name != "errors.py" or p.parent != ROOT
        if (names := _exception_classes(p))
    }
    assert not outside, f"public exception types outside builders/errors.py: {outside}"
    assert {"StoreError", "LevelsUnreachable"} <= set(_exception_classes(ROOT / "errors.py"))


#: The store's rooms behind `builders.store` (its package exports what a caller needs).
_STORE_INSIDE = {
    f"builders.store.{m}"
    for m in ("db", "settings", "connection", "failures", "catalogue", "vectors", "schema")
}


def test_no_cli_module_imports_duckdb_or_the_store_internals() -> None:
    """The store turns DuckDB's errors into typed ones at its boundary: the command line
    needs neither DuckDB nor `builders.store.db` to tell them apart."""
    for path in sorted((ROOT / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        bad = {n for n in names if n.split(".")[0] == "duckdb" or n in _STORE_INSIDE}
        assert not bad, f"{path.relative_to(ROOT.parent)} imports {sorted(bad)}"
