"""The one progress bar: tqdm on stderr, on a terminal or in a notebook only."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(
    desc: str, quiet: bool = False, total: int | None = None, unit: str = "it"
) -> Iterator[Callable[[int], None]]:
    """A tqdm bar's `update(n)`, a no-op when quiet or not on a terminal or in a notebook (in
    a log, its carriage returns would put the next message on its line)."""
    if quiet or not (sys.stderr.isatty() or "ipykernel" in sys.modules):
        yield lambda n: None
        return
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True) as bar:
        yield bar.update
