"""The `builders` command line: a thin click layer over the library, one module per command
group. The group is lazy (`lazy.LazyGroup`): a command's module loads only when it is used."""

from __future__ import annotations

import signal
import warnings

import click

from builders import __version__
from builders.cli.lazy import LazyGroup
from builders.cli.output import printable_message
from builders.errors import BuildersWarning

#: Every command: name -> (`module:attribute`, the first sentence of its help), which `builders
#: --help` lists without importing the module (tests/cli/test_lazy.py keeps it true).
COMMANDS = {
    "sources": (
        "builders.cli.store:sources_cmd",
        "List the sources that can be loaded, their kind, default origin and reader options.",
    ),
    "ingest": (
        "builders.cli.store:ingest_cmd",
        "Load SOURCE into the span store, all splits in one transaction.",
    ),
    "labels": (
        "builders.cli.store:labels_cmd",
        "List SOURCE's labels, their raw tags and counts, most frequent first.",
    ),
    "stats": (
        "builders.cli.store:stats_cmd",
        "Show what the store holds and verify its checksums.",
    ),
    "familiarity": (
        "builders.cli.familiarity:familiarity_cmd",
        "How familiar is a training corpus with the benchmarks? (before you report zero-shot F1)",
    ),
    "leakage": (
        "builders.cli.leakage:leakage_cmd",
        "Is my zero-shot score zero-shot? Benchmark sentences and mentions in a training corpus.",
    ),
    "evaluate": (
        "builders.cli.evaluate:evaluate_cmd",
        "Score a model's predictions on the benchmarks and put each label's F1 in context.",
    ),
    "predict": (
        "builders.cli.evaluate:predict_cmd",
        "Predict the benchmarks' test sets with a local GLiNER model, for `builders evaluate`.",
    ),
    "build-splits": (
        "builders.cli.splits:build_splits",
        "Build low / medium / high label-shift subsets of a training corpus.",
    ),
    "fewnerd-splits": (
        "builders.cli.fewnerd:fewnerd_splits_cmd",
        "Rebuild Few-NERD INTRA / INTER train/validation/test parts from a stored source.",
    ),
    "fewnerd-episodes": (
        "builders.cli.fewnerd:fewnerd_episodes_cmd",
        "Sample N-way K~2K-shot episodes (greedy, Few-NERD's Algorithm 1) from one part.",
    ),
    "export": (
        "builders.cli.export:export_cmd",
        "Export a built FOLDER as GLiNER json or flair's column files.",
    ),
    "export-gliner": (
        "builders.cli.export:export_gliner_cmd",
        "Export a built FOLDER or a stored corpus as GLiNER training json.",
    ),
    "publish": (
        "builders.cli.publish:publish_cmd",
        "Push dataset repo folders to the Hugging Face Hub, one commit per repo.",
    ),
    "regenerate": (
        "builders.cli.publish:regenerate_cmd",
        "Rebuild the published scenarios listed in scenarios.toml; reuse what has not changed.",
    ),
    "cache": (
        "builders.cli.cache:cache_cmd",
        "Show the per-user embedding cache and the label vectors it holds.",
    ),
}


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="builders")
def cli() -> None:
    """Label-shift toolkit for zero-shot NER.

    Load corpora and benchmarks into one DuckDB span store, measure Familiarity, build
    low / medium / high label-shift training subsets and publish them.

    Example: builders ingest pilener-sample && builders labels pilener-sample --top 20
    """


def _exit_on_sigterm() -> None:
    """SIGTERM ends the run as Ctrl-C does: through every `finally` (temporary folders and a
    half-made store removed)."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)


def _print_our_warnings() -> None:
    """The toolkit's warnings (`BuildersWarning`) print as one line, `warning: ...` or
    `note: ...`; others as Python prints them."""
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):  # type: ignore[no-untyped-def]
        if issubclass(category, BuildersWarning):
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
    load_command("build-splits")(prog_name="build-splits")


def __getattr__(name: str) -> click.Command:
    """`from builders.cli.main import build_splits`, loaded now."""
    if name == "build_splits":
        return load_command("build-splits")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_command(name: str) -> click.Command:
    """The command `name` of `builders` (its module imported)."""
    command = cli.get_command(click.Context(cli), name)
    assert command is not None, name
    return command


def all_commands() -> dict[str, click.Command]:
    """Every command of `builders` by name, their modules imported."""
    return {name: load_command(name) for name in cli.list_commands(click.Context(cli))}
