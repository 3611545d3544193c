"""The dataset card of a Few-NERD split folder (`fewnerd-intra`, `fewnerd-inter`).

    render_fewnerd_card(name, summary.json, command=..., features=...)  -> README.md text

Pure, like `builders.hub.cards`: the template is `cards/fewnerd.md.j2`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from builders import __version__
from builders.defaults import split_rank
from builders.hub.templating import (
    card_header,
    card_yaml,
    dataset_info,
    environment,
    familiarity_meta,
    redact,
)

if TYPE_CHECKING:
    from datasets import Features


def render_fewnerd_card(
    name: str,
    summary: Mapping[str, Any],
    *,
    command: str | None,
    features: Features,
    version: str = __version__,
    load_from: str | None = None,
) -> str:
    """The README.md of a Few-NERD split folder `name` (or Hub repo id) from its `summary.json`;
    `features`: those its parquet files carry (so `load_dataset` gets the ClassLabel columns)."""
    # train, validation, test, whatever order summary.json (sorted keys) has them in
    parts = dict(sorted(summary["parts"].items(), key=lambda kv: split_rank(kv[0])))
    summary = {**summary, "parts": parts}
    by_part: dict[str, list[str]] = {p: [] for p in parts}
    for typ, part in summary.get("assignment_map", {}).items():
        by_part.setdefault(part, []).append(typ)
    text = (
        environment()
        .get_template("fewnerd.md.j2")
        .render(
            yaml_header=Markup(_metadata(summary, features)),
            name=name,
            load_from=load_from or name,
            local="/" not in name,  # not for a Hub repo
            title=_pretty_name(summary),
            s=summary,
            parts=[{"split": p, **parts[p], "types_of": by_part.get(p, [])} for p in parts],
            rep=summary.get("familiarity"),
            command=redact(command) if command else None,
            version=version,
            citations=["fewnerd", "familiarity"],
        )
    )
    return redact(text)


def _pretty_name(summary: Mapping[str, Any]) -> str:
    return f"Few-NERD {summary['mode'].upper()} (rebuilt)"


def _metadata(summary: Mapping[str, Any], features: Features) -> str:
    """The card's YAML: Hub fields, the one config's splits, features and sizes, Familiarity."""
    parts = summary["parts"]
    header = card_header(
        license_="cc-by-sa-4.0",
        rows=sum(int(p["sentences"]) for p in parts.values()),
        source_datasets=["DFKI-SLT/few-nerd"],
        tags=["ner", "few-shot", "zero-shot", "few-nerd", "label-shift", "familiarity"],
        pretty_name=_pretty_name(summary),
    )
    configs = {"default": {"data_files": [{"split": p, "path": f"data/{p}-*"} for p in parts]}}
    splits = {p: (int(parts[p]["num_bytes"]), int(parts[p]["sentences"])) for p in parts}
    info = dataset_info(features, splits, summary.get("download_size"))
    extra = {}
    if summary.get("familiarity"):
        extra["familiarity"] = familiarity_meta(summary["familiarity"])
    return card_yaml(header, configs, {"default": info}, extra)
