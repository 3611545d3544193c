"""Progress bars go to a terminal only: piped into a log (CI, `| tee`), a bar's carriage
returns put the next message on the bar's line (`make demo 2>&1 | cat` showed the ingest bar
and the `ingested` line as one)."""

from __future__ import annotations

import io
import sys

import pytest

from builders.progress import progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("stream", "shown"), [(io.StringIO(), False), (_Terminal(), True)])
def test_a_bar_is_drawn_on_a_terminal_only(
    monkeypatch: pytest.MonkeyPatch, stream: io.StringIO, shown: bool
) -> None:
    monkeypatch.setattr(sys, "stderr", stream)
    with progress_bar("ingest x", quiet=False, unit=" sent") as update:
        update(5)
    print("x: ingested", file=sys.stderr)
    text = stream.getvalue()
    assert ("\r" in text) is shown
    assert text.endswith("x: ingested\n")
    if not shown:
        assert text == "x: ingested\n"


@pytest.mark.parametrize(("stream", "shown"), [(io.StringIO(), False), (_Terminal(), True)])
def test_the_embedding_bar_likewise(
    monkeypatch: pytest.MonkeyPatch, stream: io.StringIO, shown: bool
) -> None:
    monkeypatch.setattr(sys, "stderr", stream)
    with progress_bar("embedding", total=10, unit=" labels") as update:
        update(10)
    assert ("labels" in stream.getvalue()) is shown


def test_quiet_draws_nothing_even_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = _Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    with progress_bar("embedding", quiet=True, total=10, unit=" labels") as update:
        update(10)
    with progress_bar("ingest x", quiet=True) as update:
        update(5)
    assert stream.getvalue() == ""


def test_in_a_notebook_the_bar_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """A notebook's stderr is no terminal, yet tqdm.auto draws its widget there (outside a
    notebook, as here, tqdm.auto is the text bar: it writes to stderr)."""
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setitem(sys.modules, "ipykernel", object())
    with progress_bar("embedding", total=10, unit=" labels") as update:
        update(10)
    assert "labels" in stream.getvalue()
