"""How a command fails: the library's errors (`BuildersError`, the store's typed errors
among them) and the OSErrors a user's machine causes become one line naming what, where and
the fix; anything else is a bug, shown with its traceback and a request to report it.

A command runs on the command line's `Surface` (`COMMAND_LINE`): the settings a library
message names (`opt("min_labels")`) read as the options that set them (`--min-labels`).
"""

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
    """The command line's names for the library's settings: `--` and the name with dashes
    (`min_labels` -> `--min-labels`: every command's option is its parameter's name), a flag
    alone where it is switched on (`--replace`), and a reader option as `-o key=value` unless
    `ingest` has an option of its own for it."""

    #: Reader options `ingest` takes as options of its own (`--columns X` for `-o columns=X`).
    READER_FLAGS: ClassVar[Mapping[str, str]] = {
        "columns": "--columns",
        "repair": "--repair or -o repair=true",
    }

    def option(self, name: str, value: object = None) -> str:
        flag = "--" + name.replace("_", "-")
        if value is False:
            return "--no-" + name.replace("_", "-")
        return flag if value is None or value is True else f"{flag} {value}"

    def reader_option(self, key: str, value: object = None) -> str:
        if key in self.READER_FLAGS:
            flag = self.READER_FLAGS[key]
            return flag if value is None or value is True else f"{flag} {value}"
        return f"-o {key}=" if value is None else f"-o {key}={value}"


COMMAND_LINE = CommandLine()


def handle_errors(f: Callable) -> Callable:
    """Turn the library's errors (`BuildersError`: the store's typed errors too, which it makes
    of DuckDB's damage, full-disk and memory errors) and the OSErrors a user's machine causes
    into one-line `click.ClickException`s. Anything else is a bug: its traceback is printed,
    with a request to report it."""

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
        except Exception as exc:
            raise _bug(exc) from exc

    return wrapper


class _Failure(click.ClickException):
    """A library error as the command line shows it: one line, its message as made on the
    command line's surface (naming options as `--min-labels`), made printable. Every type
    exits with status 1, as any failed command does (click's usage errors exit with 2); the
    error itself stays at hand (`error`) for a caller of the command's function."""

    def __init__(self, error: BuildersError):
        super().__init__(printable_message(str(error)))
        self.error = error


def failure(exc: BuildersError) -> click.ClickException:
    """The one place a library error, of whatever type, becomes the command's failure."""
    return _Failure(exc)


def _bug(exc: Exception) -> click.ClickException:
    """An exception the toolkit did not expect: its traceback on stderr, then one line asking
    for a report."""
    traceback.print_exception(exc, file=sys.stderr)
    return click.ClickException(
        f"unexpected {type(exc).__name__} (a bug in builders {__version__}): please report it "
        "with the command line and the traceback above"
    )


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
    """One line for an OSError the user's machine caused (disk full, read-only, permission):
    what, where and the fix; None for others (they are bugs: a traceback is shown)."""
    name = errno.errorcode.get(exc.errno or -1)
    if name not in _OS_FIXES:
        return None
    where = exc.filename if exc.filename is not None else "a file"
    return printable_message(f"{exc.strerror or name}: {where}: {_OS_FIXES[name]}.")
