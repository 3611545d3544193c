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
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            where = self.lazy[cmd_name][0]
            module, _, attribute = where.partition(":")
            command = getattr(importlib.import_module(module), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{where} is no click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list, as click writes it, from the summaries."""
        rows = [
            (name, self.commands.get(name) or click.Command(name, help=self.lazy[name][1]))
            for name in self.list_commands(ctx)
        ]
        rows = [(name, c) for name, c in rows if name in self.lazy or not c.hidden]
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in rows])
