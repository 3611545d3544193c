"""The lazy command group: `builders --help` imports no command module (so it stays fast while
each command module imports the library at its top), and the table it lists the commands from
says what the commands themselves say."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from builders.cli.main import COMMANDS, all_commands, cli, load_command


def test_the_table_names_every_command_with_its_own_summary() -> None:
    commands = all_commands()
    assert sorted(commands) == sorted(COMMANDS)
    for name, command in commands.items():
        module, _, attribute = COMMANDS[name][0].partition(":")
        assert command is getattr(sys.modules[module], attribute), name
        assert command.name == name
        for width in (30, 45, 78, 10_000):  # what `--help` shows at any terminal width
            stand_in = click.Command(name, help=COMMANDS[name][1])
            assert stand_in.get_short_help_str(width) == command.get_short_help_str(width), name


def test_the_listing_is_the_one_click_writes_from_the_commands() -> None:
    """The lazy listing equals click's own, written from the loaded commands."""
    lazy = CliRunner().invoke(cli, ["--help"], terminal_width=80).output
    eager = click.Group(
        "cli",
        commands=all_commands(),
        help=cli.help,
        params=cli.params,
        context_settings=cli.context_settings,
    )
    want = CliRunner().invoke(eager, ["--help"], prog_name="cli", terminal_width=80).output
    assert lazy == want


_PROBE = (
    "import json, sys; sys.argv = ['builders', '--help']\n"
    "from builders.cli.main import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "mods = sorted(m for m in sys.modules if m.startswith('builders.') or m == 'duckdb')\n"
    "print(json.dumps(mods), file=sys.stderr)"
)


def test_builders_help_loads_no_command_module_and_no_library() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "build-splits" in done.stdout
    modules = json.loads(done.stderr.strip().splitlines()[-1])
    loaded = {m for m in modules if m.startswith("builders.cli.")}
    assert loaded <= {"builders.cli.main", "builders.cli.lazy", "builders.cli.output"}, loaded
    assert not {m for m in modules if m.split(".")[1] in {"store", "shift", "splits", "hub"}}
    assert "duckdb" not in modules


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_loads_by_its_name(name: str) -> None:
    assert load_command(name).name == name


#: What no command's `--help` may import: each costs a tenth of a second or more to load
#: (`datasets` half a second), so the library imports them inside the functions that use
#: them, or, for numpy, pyarrow and DuckDB, through `builders.deferred` on their first use.
_HEAVY = (
    "datasets", "duckdb", "jinja2", "matplotlib", "numpy", "pandas", "polars", "pyarrow",
    "sentence_transformers", "torch", "transformers",
)  # fmt: skip

_HELP_PROBE = (
    "import json, sys; sys.argv = {argv!r}\n"
    "from builders.cli.main import {entry}\n"
    "try:\n    {entry}()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
    "print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)), file=sys.stderr)"
)

_HELPS = [["builders", "--help"], ["build-splits", "--help"]]
_HELPS += [["builders", name, "--help"] for name in sorted(COMMANDS)]


@pytest.mark.parametrize("argv", _HELPS, ids=lambda argv: " ".join(argv[:-1]))
def test_each_command_help_imports_no_heavy_library(argv: list[str]) -> None:
    """`CMD --help` loads the command's module and the library it imports at its top, but
    none of the heavy packages: they load when a command runs (a module-level use of
    `builders.deferred`'s numpy, say a constant `np.float64`, would fail this). How long the
    helps take is measured by scripts/bench_help.py."""

    entry = "build_splits_main" if argv[0] == "build-splits" else "main"
    code = _HELP_PROBE.format(argv=argv, entry=entry, heavy=_HEAVY)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: "), done.stdout
    assert json.loads(done.stderr.strip().splitlines()[-1]) == [], argv
