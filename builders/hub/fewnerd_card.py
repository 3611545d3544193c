"""The dataset card of a Few-NERD split folder (`fewnerd-intra`, `fewnerd-inter`).

    render_fewnerd_card(name, summary.json, command=..., features=...)  -> README.md text

Pure, like `builders.hub.cards`: the template is `cards/fewnerd.md.j2`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from builders import __version__
from builders.hub.templating import (
    card_header,
    environment,
    familiarity_meta,
    redact,
    yaml_dump,
)


def render_fewnerd_card(
    name: str,
    summary: Mapping[str, Any],
    *,
    command: str | None,
    features: list[Any],
    version: str = __version__,
) -> str:
    """The README.md of a Few-NERD split folder (`fewnerd-intra`, `fewnerd-inter`), pure.

    Args:
        name: folder name or Hub repo id.
        summary: the folder's `summary.json` (`SplitBuild.summary()` plus `familiarity`, a
            Familiarity report of the validation and test types against the train types).
        command: the command that rebuilds the folder.
        features: `features(fine_names)._to_yaml_list()` of `builders.fewnerd.folder`, the
            same list its parquet files carry, so `load_dataset` gets the ClassLabel columns.
        version: toolkit version that built it.
    """
    parts = summary["parts"]
    by_part: dict[str, list[str]] = {p: [] for p in parts}
    for typ, part in summary.get("assignment_map", {}).items():
        by_part.setdefault(part, []).append(typ)
    meta = _metadata(summary, features)
    text = (
        environment()
        .get_template("fewnerd.md.j2")
        .render(
            yaml_header=yaml_dump(meta),
            name=name,
            title=meta["pretty_name"],
            s=summary,
            parts=[{"split": p, **parts[p], "types_of": by_part.get(p, [])} for p in parts],
            rep=summary.get("familiarity"),
            command=redact(command) if command else None,
            version=version,
            citations=["fewnerd", "familiarity"],
        )
    )
    return redact(text)


def _metadata(summary: Mapping[str, Any], features: list[Any]) -> dict[str, Any]:
    """The card's YAML: Hub fields, the one config with its splits, typed features, Familiarity."""
    parts = summary["parts"]
    meta = card_header(
        license_="cc-by-sa-4.0",
        rows=sum(int(p["sentences"]) for p in parts.values()),
        source_datasets=["DFKI-SLT/few-nerd"],
        tags=["ner", "few-shot", "zero-shot", "few-nerd", "label-shift", "familiarity"],
        pretty_name=f"Few-NERD {summary['mode'].upper()} (rebuilt)",
    )
    meta |= {
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": p, "path": f"data/{p}-*"} for p in parts],
            }
        ],
        "dataset_info": {
            "features": features,
            "splits": [{"name": p, "num_examples": int(parts[p]["sentences"])} for p in parts],
        },
    }
    if summary.get("familiarity"):
        meta["familiarity"] = familiarity_meta(summary["familiarity"])
    return meta
