"""No command prints a traceback, whatever value an option gets: bad values over every option
of every command end in a usage error (exit 2) or a clean `Error:` (exit 1)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from builders.cli.main import all_commands, cli

#: Values that are wrong for most options: empty, negative, out of range, not a number, a path
#: that does not exist, a list where one value is wanted.
BAD = ["", "-1", "1.5", "nan", "x", "{tmp}/no/such/path", "a,b"]


def _base(name: str, tmp: Path) -> list[str]:
    """The smallest arguments that get a command past its required ones, and make it stop
    early (a source the store does not hold, a folder that does not exist)."""
    return {
        "ingest": ["nope"],
        "labels": ["nope"],
        "familiarity": ["--source", "nope"],
        "build-splits": ["--source", "nope"],
        "leakage": ["--source", "nope"],
        "fewnerd-splits": ["--mode", "inter", "--source", "nope", "--path", str(tmp / "none")],
        "fewnerd-episodes": ["--part", "dev", "--source", "nope"],
        "export": [str(tmp / "none"), "--out", str(tmp / "x.json")],
        "export-gliner": [str(tmp / "none"), "--out", str(tmp / "x.json")],
        "publish": [str(tmp / "none"), "--org", "testorg", "--dry-run"],
        "regenerate": ["--scenarios", str(tmp / "none.toml")],
    }.get(name, [])


def _commands() -> dict[str, click.Command]:
    """Every command by its words (`cache clear` for a group's subcommand)."""
    out: dict[str, click.Command] = {}
    for name, command in sorted(all_commands().items()):
        out[name] = command
        if isinstance(command, click.Group):
            out |= {f"{name} {sub}": c for sub, c in sorted(command.commands.items())}
    return out


def _cases() -> list[tuple[str, str]]:
    out = []
    for name, command in _commands().items():
        for param in command.params:
            if isinstance(param, click.Option) and not param.is_flag and param.name != "help":
                out.append((name, param.opts[0]))
    return out


@pytest.mark.parametrize(("name", "option"), _cases())
def test_no_value_gives_a_traceback(
    name: str, option: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # relative values (`--db x`, `--out nan`) are files: they go to tmp_path, not the checkout
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    env = {"LABELSHIFT_DB": str(tmp_path / "s.duckdb")}
    param = next(p for p in _commands()[name].params if option in getattr(p, "opts", []))
    for bad in BAD:
        value = bad.format(tmp=tmp_path)
        values = [value] * (param.nargs if param.nargs > 1 else 1)
        args = [*name.split(), *_base(name, tmp_path), option, *values]
        result = runner.invoke(cli, args, env=env)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"{args}: {result.exception!r}"
        )
        assert "Traceback" not in result.output, args
        assert result.exit_code in (0, 1, 2), (args, result.output)
        if result.exit_code:
            assert "Error" in result.output, (args, result.output)


def test_the_sweep_sees_every_command() -> None:
    names = {name for name, _ in _cases()}
    # `sources` and `cache` have flags only (`cache clear` takes --model)
    assert names == set(_commands()) - {"sources", "cache"}
    assert ("build-splits", "--low-quantile") in _cases()
