"""Every script in scripts/ still imports: a renamed library function breaks it here, not on
the day someone runs a benchmark."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from helpers import ROOT

SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))


def test_there_are_scripts() -> None:
    assert {"bench_embed.py", "bench_scale.py", "make_nuner_scale.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_script_imports(path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(path.parent))
    spec = importlib.util.spec_from_file_location(f"_script_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)  # imports only: main() runs under __main__
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"
