"""Print pip constraints that pin every requirement of pyproject.toml to its declared floor.

    python .ci/floors.py > floors.txt     # `datasets>=4.0` -> `datasets==4.0`

The dependencies and the `dev` and `models` extras are pinned; torch is left out: it is installed
first, as the CPU wheel the Makefile names. Used by `.ci/run` to test the floors it declares.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP = {"torch"}


def floors(pyproject: Path) -> list[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    reqs = project["dependencies"] + [
        r for extra in ("dev", "models") for r in project["optional-dependencies"][extra]
    ]
    out = []
    for req in reqs:
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*>=\s*([^,;\s]+)", req)
        if m is None:
            sys.exit(f"{req!r}: every requirement needs a floor (>=)")
        if m.group(1).lower() not in SKIP:
            out.append(f"{m.group(1)}=={m.group(3)}")
    return out


if __name__ == "__main__":
    print("\n".join(floors(ROOT / "pyproject.toml")))
