"""How a command fails: a library error or an OSError the user's machine causes is one line
naming what, where and the fix; anything else is a bug, shown with its traceback."""

from __future__ import annotations

import errno
import functools
import sys
import traceback
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import click

from builders import __version__
from builders.cli.output import printable_message
from builders.errors import BuildersError, Surface, shown_on


class CommandLine(Surface):
    """The library's settings as options: `min_labels` -> `--min-labels`, a flag alone where it
    is switched on, a reader option as `-o key=value` unless `ingest` has an option for it."""

    #: Reader options `ingest` takes as options of its own (`--columns X` for `-o columns=X`).
    READER_FLAGS: ClassVar[Mapping[str, str]] = {
        "columns": "--columns",
        "repair": "--repair or -o repair=true",
    }

    def option(self, name: str, value: object = None) -> str:
        flag = ("--no-" if value is False else "--") + name.replace("_", "-")
        return flag if value is None or isinstance(value, bool) else f"{flag} {value}"

    def reader_option(self, key: str, value: object = None) -> str:
        if key in self.READER_FLAGS:
            flag = self.READER_FLAGS[key]
            return flag if value is None or value is True else f"{flag} {value}"
        return f"-o {key}=" if value is None else f"-o {key}={value}"


COMMAND_LINE = CommandLine()


def handle_errors(f: Callable) -> Callable:
    """The library's errors and the OSErrors a user's machine causes as one-line
    `click.ClickException`s; anything else is a bug."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with shown_on(COMMAND_LINE):
                return f(*args, **kwargs)
        except click.ClickException:  # a usage error or one already made clean
            raise
        except BuildersError as exc:
            raise failure(exc) from exc
        except OSError as exc:
            message = os_error_message(exc)
            if message is None:
                raise
            raise click.ClickException(message) from exc
        except Exception as exc:  # a bug: its traceback, then a request to report it
            traceback.print_exception(exc, file=sys.stderr)
            raise click.ClickException(
                f"unexpected {type(exc).__name__} (a bug in builders {__version__}): please "
                "report it with the command line and the traceback above"
            ) from exc

    return wrapper


def failure(exc: BuildersError) -> click.ClickException:
    """A library error, of whatever type, as the command's one printable line (exit status 1)."""
    return click.ClickException(printable_message(str(exc)))


#: What the user can do about an OSError they can cause, by errno name.
_OS_FIXES = {
    "ENOSPC": "free space there, or point --out / --db (or TMPDIR) at another disk",
    "EDQUOT": "free space within your quota, or point --out / --db at another disk",
    "EROFS": "the file system is read-only: pass --out / --db a writable place",
    "EACCES": "you may not write there: pass --out / --db a folder you can write to",
    "EPERM": "you may not write there: pass --out / --db a folder you can write to",
    "EIO": "the disk reported an error: check it, then run the command again",
    "EFBIG": "a file grew past the largest this system lets it be (`ulimit -f`, or the file "
    "system's own limit): raise the limit, or point --out / --db at another disk",
}


def os_error_message(exc: OSError) -> str | None:
    """One line for an OSError the user's machine caused (disk full, read-only, permission);
    None for others (bugs)."""
    name = errno.errorcode.get(exc.errno or -1)
    if name not in _OS_FIXES:
        return None
    where = exc.filename if exc.filename is not None else "a file"
    return printable_message(f"{exc.strerror or name}: {where}: {_OS_FIXES[name]}.")
