"""The one progress bar: tqdm on stderr, on a terminal or in a notebook only."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(
    desc: str, quiet: bool = False, total: int | None = None, unit: str = "it"
) -> Iterator[Callable[[int], None]]:
    """A tqdm bar counting `unit`s (their rate and, given `total`, the time left); yields its
    `update(n)`, a no-op when quiet. Drawn on a terminal, or in a notebook (where tqdm.auto
    draws a widget), only: piped into a log, a bar's carriage returns would put the next
    message on its line."""
    if quiet or not (sys.stderr.isatty() or "ipykernel" in sys.modules):
        yield lambda n: None
        return
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True) as bar:
        yield bar.update
