"""The README's commands still work as printed (as sqlite-utils' test_docs.py does for its docs).

- the set-up commands (`make demo`, `make test`, any `make X`) are targets of the Makefile;
- every `builders COMMAND` and `build-splits` line of a ```bash block names a real command whose
  `--help` exits 0 and lists every long option the line passes;
- the commands that read the demo's outputs (the block after "Load a level from the repo root")
  run, in a subprocess, from a folder holding `out/demo.duckdb` and `out/demo/`: the bundled
  sample's store from the session fixture, copied, and its familiarity levels built with MiniLM.

A failure names the README line that drifted.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers import ROOT

from builders.cli.main import build_splits, cli

README = ROOT / "README.md"
DEMO_BLOCK_AFTER = "Load a level from the repo root"
#: Options the README documents, added to a demo command that names none of its own to keep
#: the test short: `familiarity` defaults to the paper's model, whose first embedding of the
#: sample's labels takes 20 to 45 s on a CPU; the session store holds MiniLM's vectors.
CHEAP = {"familiarity": ["--model", "all-MiniLM-L6-v2"]}


def bash_blocks(text: str) -> list[list[tuple[int, str]]]:
    """The ```bash blocks of `text` (indented ones too), each as (line number, line) pairs."""
    blocks: list[list[tuple[int, str]]] = []
    block: list[tuple[int, str]] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        fence = line.strip()
        if block is None and fence == "```bash":
            block = []
        elif block is not None and fence == "```":
            blocks.append(block)
            block = None
        elif block is not None and fence:
            block.append((number, fence))
    assert block is None, "README.md: a ```bash block is never closed"
    return blocks


def demo_block(text: str) -> list[tuple[int, str]]:
    """The first ```bash block after the sentence that introduces the demo's outputs."""
    start = text.index(DEMO_BLOCK_AFTER)
    first = text[:start].count("\n") + 1
    return next(b for b in bash_blocks(text) if b and b[0][0] > first)


def words(line: str) -> list[str]:
    return shlex.split(line, comments=True)


TEXT = README.read_text(encoding="utf-8")
LINES = [(n, line) for block in bash_blocks(TEXT) for n, line in block]
COMMANDS = [(n, line) for n, line in LINES if words(line)[:1] in (["builders"], ["build-splits"])]
MAKES = [(n, line) for n, line in LINES if words(line)[:1] == ["make"]]
DEMO = demo_block(TEXT)


def where(number: int, line: str) -> str:
    return f"README.md:{number}: {line}"


def _id(item: tuple[int, str]) -> str:
    return f"README.md:{item[0]}"


def test_the_readme_has_what_these_tests_read() -> None:
    assert len(COMMANDS) >= 20, "the README's builders / build-splits lines were not found"
    assert {"make demo", "make test"} <= {" ".join(words(line)[:2]) for _, line in MAKES}
    assert any("load_dataset" in line for _, line in DEMO), DEMO
    assert sum(words(line)[:1] == ["builders"] for _, line in DEMO) >= 3, DEMO
    for extra in CHEAP.values():  # the test adds only what a reader is told about
        assert all(f"`{word}" in TEXT for word in extra), f"README.md does not document {extra}"


@pytest.mark.parametrize("item", MAKES, ids=_id)
def test_make_targets_exist(item: tuple[int, str]) -> None:
    number, line = item
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", makefile, re.MULTILINE))
    for target in (w for w in words(line)[1:] if "=" not in w and not w.startswith("-")):
        assert target in targets, f"{where(number, line)}: no Makefile target {target!r}"


def _command(argv: list[str]) -> tuple[click.Command, list[str], list[str]]:
    """The click command a README line runs, the words that name it, and the rest."""
    command: click.Command = cli if argv[0] == "builders" else build_splits
    path, rest = [], argv[1:]
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.get_command(click.Context(command), rest[0])
        if sub is None:
            break
        command, path, rest = sub, [*path, rest[0]], rest[1:]
    return command, path, rest


@pytest.mark.parametrize("item", COMMANDS, ids=_id)
def test_commands_and_their_options_exist(item: tuple[int, str]) -> None:
    number, line = item
    argv = words(line)
    command, path, rest = _command(argv)
    if isinstance(command, click.Group):  # a group runs alone only if it says so (`cache`)
        word = rest[0] if rest and not rest[0].startswith("-") else None
        named = " ".join([argv[0], *path, *([word] if word else [])])
        assert word is None and path and command.invoke_without_command, (
            f"{where(number, line)}: `{named}` is no command"
        )
    result = CliRunner().invoke(command, ["--help"], prog_name=" ".join([argv[0], *path]))
    assert result.exit_code == 0, f"{where(number, line)}: --help failed:\n{result.output}"
    for option in (w.split("=", 1)[0] for w in rest if w.startswith("--")):
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", result.output), (
            f"{where(number, line)}: {option} is not an option of "
            f"`{' '.join([argv[0], *path])}`:\n{result.output}"
        )


@pytest.fixture(scope="module")
def demo(sample_results: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding `out/demo.duckdb` (a copy of the session's sample store) and
    `out/demo/pilener-sample-{low,medium,high}-shift/` (its familiarity levels, MiniLM)."""
    from builders.shift.specs import EmbeddingSpec
    from builders.splits import SplitConfig, build
    from builders.store import Store

    root = tmp_path_factory.mktemp("readme-demo")
    (root / "out").mkdir()
    db = root / "out" / "demo.duckdb"
    shutil.copy(sample_results["db"], db)  # a copy: `familiarity` writes its label vectors
    cfg = SplitConfig("pilener-sample", "familiarity", embedding=EmbeddingSpec("all-MiniLM-L6-v2"))
    with Store(db) as store:
        build(store, cfg, root / "out" / "demo")
    return root


def _argv(line: str) -> list[str]:
    """The line's words, `python` and the commands being this interpreter's (with `CHEAP`)."""
    argv = words(line)
    extra = CHEAP.get(argv[1], []) if argv[0] == "builders" and len(argv) > 1 else []
    if extra and extra[0] not in argv:
        argv = [*argv, *extra]
    if argv[0] == "python":
        return [sys.executable, *argv[1:]]
    script = Path(sys.executable).with_name(argv[0])
    if script.exists():
        return [str(script), *argv[1:]]
    entry = "main" if argv[0] == "builders" else "build_splits_main"
    code = (
        f"import sys; from builders.cli.main import {entry}; sys.argv[0] = {argv[0]!r}; {entry}()"
    )
    return [sys.executable, "-c", code, *argv[1:]]


@pytest.mark.parametrize("item", DEMO, ids=_id)
def test_the_demo_commands_run(item: tuple[int, str], demo: Path) -> None:
    number, line = item
    done = subprocess.run(_argv(line), cwd=demo, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (
        f"{where(number, line)}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    assert done.stdout.strip(), f"{where(number, line)}: printed nothing\n{done.stderr}"
