"""The options commands share, as decorators, checked when the command line is parsed. The
embedding and metric options reach the command as one spec each (`embedding`, `metric`)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from builders.cli.errors import COMMAND_LINE, failure
from builders.defaults import (
    BACKENDS,
    DB_ENV,
    DEFAULT_BACKEND,
    DEFAULT_DB,
    DEFAULT_MODEL,
    DEFAULT_PRECISION,
    DEFAULT_PROTOCOL,
    PRECISIONS,
    PROTOCOLS,
    SEED,
    TEMPERATURE,
    WEIGHTING,
    WEIGHTINGS,
    K,
)
from builders.errors import BuildersError, shown_on
from builders.labels import ZERO_SHOT, benchmarks
from builders.names import valid_org, valid_tag
from builders.shift.specs import SPECS, spec_fields

#: `click.option` with its default shown in `--help`.
option = functools.partial(click.option, show_default=True)


def stacked(*decorators: Callable) -> Callable:
    """The decorators as one, the first outermost (as if written one above the other)."""
    return lambda f: functools.reduce(lambda g, deco: deco(g), reversed(decorators), f)


#: `--json` and `--quiet`, shared by every command (sqlite-utils style).
output_options = stacked(
    click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print {command, version, config, result} as JSON on stdout.",
    ),
    click.option("--quiet", "-q", is_flag=True, help="No progress bars or notes on stderr."),
)

#: `--db`, `--json` and `--quiet`: what every command that opens the store takes.
common_options = stacked(
    option(
        "--db",
        type=click.Path(dir_okay=False, path_type=Path),
        default=DEFAULT_DB,
        envvar=DB_ENV,
        help=f"The DuckDB span store (env {DB_ENV}).",
    ),
    output_options,
)


def _spec_options(spec: str, options: dict[str, Callable]) -> Callable:
    """A decorator declaring `options` (field name -> its option) of the spec `spec` (`SPECS`):
    the command gets the spec whole, its other fields at their defaults. A spec's options may
    be declared in several places (`--help` lists them there)."""
    kind = SPECS[spec]
    assert set(options) <= set(spec_fields(kind)), f"not fields of {kind.__name__}"

    def decorate(f: Callable) -> Callable:
        command = _making_specs(f)
        command._spec_fields.update(dict.fromkeys(options, spec))  # type: ignore[attr-defined]
        return stacked(*options.values())(command)

    return decorate


def _making_specs(f: Callable) -> Callable:
    """`f` wrapped once to get the spec options' values as one spec each."""
    if hasattr(f, "_spec_fields"):
        return f
    fields: dict[str, str] = {}  # option name -> the spec it is a field of

    @functools.wraps(f)
    def command(*args: Any, **kwargs: Any) -> Any:
        given: dict[str, dict[str, Any]] = {}
        for name, spec in fields.items():
            given.setdefault(spec, {})[name] = kwargs.pop(name)
        try:  # made before `handle_errors` runs the command
            with shown_on(COMMAND_LINE):
                specs = {spec: SPECS[spec](**values) for spec, values in given.items()}
        except BuildersError as exc:
            raise failure(exc) from exc  # as `handle_errors` fails the command
        return f(*args, **kwargs, **specs)

    command._spec_fields = fields  # type: ignore[attr-defined]
    return command


#: --model, the `EmbeddingSpec`'s model (the runtime's options: `embedding_options`).
model_option = _spec_options(
    "embedding",
    {
        "model": option(
            "--model",
            default=DEFAULT_MODEL,
            help="Sentence-transformer: all-mpnet-base-v2 (the paper's), all-MiniLM-L6-v2 "
            "(fast), a local folder or a Hub name.",
        )
    },
)

#: --backend, --precision: every `EmbeddingSpec` field but the model.
embedding_options = _spec_options(
    "embedding",
    {
        "backend": option(
            "--backend",
            type=click.Choice(BACKENDS),
            default=DEFAULT_BACKEND,
            help="Embedding runtime: auto (the fastest installed one whose vectors equal "
            "torch's; LABELSHIFT_BACKEND pins it), torch, onnx or openvino (CPU).",
        ),
        "precision": option(
            "--precision",
            type=click.Choice(PRECISIONS),
            default=DEFAULT_PRECISION,
            help="Embedding precision: fp16 / bf16 for a GPU (torch), bf16 with openvino.",
        ),
    },
)


#: The options of `MetricSpec`'s fields, in the order `--help` lists them.
_METRIC_OPTIONS = {
    "protocol": option(
        "--protocol",
        type=click.Choice(PROTOCOLS),
        default=DEFAULT_PROTOCOL,
        help="`ours` (METHOD.md) or `paper` (the Familiarity authors' code and label lists); "
        "both headline figures are reported either way.",
    ),
    "k": option(
        "--k",
        "-k",
        type=click.IntRange(min=1),
        default=K,
        help="Familiarity keeps the top K similarities (repeated by their mentions).",
    ),
    "weighting": option(
        "--weighting",
        type=click.Choice(WEIGHTINGS),
        default=WEIGHTING,
        help="Weights of the top K: zipf (1/k, the paper's), linear decay, or none.",
    ),
    "temperature": option(
        "--temperature",
        type=click.FloatRange(min=0, min_open=True),
        default=TEMPERATURE,
        help="Entropy softmax T.",
    ),
    "seed": option("--seed", type=int, default=SEED, help="Bootstrap seed."),
}


def metric_options(*names: str) -> Callable:
    """The options of these `MetricSpec` fields (`_METRIC_OPTIONS`), given to the command as
    `metric: MetricSpec`."""
    return _spec_options("metric", {name: _METRIC_OPTIONS[name] for name in names})


#: --source and --path: the training corpus, ingested first when needed (`ensure_ingested`).
source_options = stacked(
    click.option(
        "--source", required=True, help="Training corpus in the store (ingested if needed)."
    ),
    click.option("--path", help="Local files of the source, ingested first (no-op if unchanged)."),
)


def _some_benchmarks(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """`--benchmarks ''` (or only commas) names no benchmark: say so instead of failing later."""
    if not value.replace(",", "").strip():
        raise click.BadParameter("name at least one benchmark, or `all`")
    return value


def benchmarks_option(f: Callable) -> Callable:
    """`--benchmarks` and `--label-map`: the evaluation label sets."""
    f = click.option(
        "--label-map",
        type=click.Path(dir_okay=False, exists=True),
        help="Verbalisation map (raw tag -> label) for the benchmarks' tags: a JSON object or "
        "a TOML [verbalise] table; it comes before the packaged table.",
    )(f)
    return option(
        "--benchmarks",
        default="all",
        help="Comma-separated: `all` ("
        + ", ".join(ZERO_SHOT)
        + "), a packaged name ("
        + ", ".join(benchmarks())
        + "), a stored source (`mine`: its test split; `mine:dev`), a label file "
        "(`file:labels.txt`, one a line; `file:labels.json`, a list or label -> count), a "
        "Few-NERD part (`fewnerd-inter`, `fewnerd-intra:dev`); `NAME=...` names an entry.",
        callback=_some_benchmarks,
    )(f)


def parse_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    """`-o key=value` pairs; values parsed as JSON when they look like it (ints, bools)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="-o/--option")
        try:
            out[key.replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            out[key.replace("-", "_")] = value
    return out


def org_option(*decls: str, required: bool = False, help: str) -> Callable:
    """An option naming a Hub user or organisation (`--org` by default), checked on parsing."""
    return click.option(
        *(decls or ("--org",)),
        required=required,
        callback=_checked_by(valid_org, "--org"),
        metavar="ORG",
        help=help,
    )


def tag_option(help: str) -> Callable:
    """`--tag`, checked on parsing: a tag git would refuse fails before anything is built."""
    return click.option("--tag", callback=_checked_by(valid_tag, "--tag"), help=help)


def _checked_by(valid: Callable[[str], str], flag: str) -> Callable:
    """A click callback checking a value with `valid`; a refusal is click's bad parameter."""

    def check(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        try:
            with shown_on(COMMAND_LINE):
                return None if value is None else valid(value)
        except BuildersError as exc:
            raise click.BadParameter(str(exc).removeprefix(f"{flag} "), ctx, param) from None

    return check
