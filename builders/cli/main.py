"""The `builders` command line: a thin click layer over the library.

One module per command group: `store` (sources, ingest, labels, stats), `familiarity`, `splits`
(build-splits), `leakage` (leakage), `fewnerd` (fewnerd-splits, fewnerd-episodes), `export`
(export-gliner) and `publish` (publish, regenerate); `common` holds what they share.
"""

from __future__ import annotations

import click

from builders import __version__
from builders.cli.cache import cache_cmd
from builders.cli.export import export_gliner_cmd
from builders.cli.familiarity import familiarity_cmd
from builders.cli.fewnerd import fewnerd_episodes_cmd, fewnerd_splits_cmd
from builders.cli.leakage import leakage_cmd
from builders.cli.publish import publish_cmd, regenerate_cmd
from builders.cli.splits import build_splits
from builders.cli.store import ingest_cmd, labels_cmd, sources_cmd, stats_cmd


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="builders")
def cli() -> None:
    """Label-shift toolkit for zero-shot NER.

    Load corpora and benchmarks into one DuckDB span store, measure Familiarity, build
    low / medium / high label-shift training subsets and publish them.

    Example: builders ingest pilener-sample && builders labels pilener-sample --top 20
    """


for _command in (
    sources_cmd,
    ingest_cmd,
    labels_cmd,
    stats_cmd,
    familiarity_cmd,
    leakage_cmd,
    build_splits,
    fewnerd_splits_cmd,
    fewnerd_episodes_cmd,
    export_gliner_cmd,
    publish_cmd,
    regenerate_cmd,
    cache_cmd,
):
    cli.add_command(_command)


def _exit_on_sigterm() -> None:
    """SIGTERM (a `kill`, a job scheduler's stop) ends the run as Ctrl-C does: through every
    `finally`, so temporary folders and a half-made store are removed (kill -9 cannot be
    caught: the next run that takes the folder's lock cleans up after it)."""
    import signal

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def _print_our_warnings() -> None:
    """The toolkit's warnings (`BuildersWarning`: what a run went on without) print as one
    line, `warning: ...` or `note: ...`; others as Python prints them."""
    import warnings

    from builders.errors import BuildersWarning

    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # type: ignore[no-untyped-def]
        if issubclass(category, BuildersWarning):
            from builders.cli.common import printable_message

            click.echo(f"{category.prefix}: {printable_message(str(message))}", err=True)
            return
        shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show


def main() -> None:
    _exit_on_sigterm()
    _print_our_warnings()
    cli(prog_name="builders")


def build_splits_main() -> None:
    """Entry point of the stand-alone `build-splits` command."""
    _exit_on_sigterm()
    _print_our_warnings()
    build_splits(prog_name="build-splits")
