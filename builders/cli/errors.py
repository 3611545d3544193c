"""How a command fails: the library's errors (`BuildersError`, the store's typed errors
among them) and the OSErrors a user's machine causes become one line naming what, where and
the fix; anything else is a bug, shown with its traceback and a request to report it."""

from __future__ import annotations

import errno
import functools
import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

from builders import __version__
from builders.cli.output import printable_message
from builders.errors import BuildersError


def handle_errors(f: Callable) -> Callable:
    """Turn the library's errors (`BuildersError`: the store's typed errors too, which it makes
    of DuckDB's damage, full-disk and memory errors) and the OSErrors a user's machine causes
    into one-line `click.ClickException`s. Anything else is a bug: its traceback is printed,
    with a request to report it."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return f(*args, **kwargs)
        except click.ClickException:  # a usage error or one already made clean
            raise
        except BuildersError as exc:
            raise click.ClickException(printable_message(str(exc))) from exc
        except OSError as exc:
            message = os_error_message(exc)
            if message is None:
                raise
            raise click.ClickException(message) from exc
        except Exception as exc:
            raise _bug(exc) from exc

    return wrapper


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
