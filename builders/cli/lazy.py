"""A click group that imports a command's module only when the command is used (click's
`LazyGroup` pattern): `builders --help` lists the commands from a table."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click


class LazyGroup(click.Group):
    """A group whose commands are named in `lazy`: name -> (`module:attribute`, summary)."""

    def __init__(self, *args: Any, lazy: Mapping[str, tuple[str, str]], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.lazy)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, attribute = self.lazy[cmd_name][0].partition(":")
            self.add_command(getattr(importlib.import_module(module), attribute), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list, as click writes it, from the summaries."""
        limit = formatter.width - 6 - max(map(len, self.lazy))
        with formatter.section("Commands"):
            formatter.write_dl(
                [
                    (name, click.Command(name, help=summary).get_short_help_str(limit))
                    for name, (_, summary) in sorted(self.lazy.items())
                ]
            )
