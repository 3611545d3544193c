"""Dataset cards, rendered from the Jinja2 templates in the top-level `cards/` package.

Rendering is pure: numbers in, markdown out. Writing and pushing happen elsewhere.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import jinja2
import yaml

from builders import __version__
from builders.hubfolder import PARQUET_NAME, SUBSET_FEATURES


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(
            lambda name: resources.files("cards").joinpath(name).read_text(encoding="utf-8")
        ),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=False,
        autoescape=False,
    )


def yaml_dump(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False, allow_unicode=True, width=1000)


def subset_metadata(
    name: str, builds: dict[str, dict[str, Any]], license_: str = "other"
) -> dict[str, Any]:
    """The card's YAML: configs (one per strategy, entropy default) and typed features."""
    configs = list(builds)
    features = SUBSET_FEATURES._to_yaml_list()  # the same list `datasets` writes
    return {
        "license": license_,
        "task_categories": ["token-classification"],
        "task_ids": ["named-entity-recognition"],
        "configs": [
            {
                "config_name": c,
                "data_files": [
                    {
                        "split": "train",
                        "path": f"{c}/{PARQUET_NAME.format(split='train').replace('00000-of-00001', '*')}",
                    }
                ],
                **({"default": True} if i == 0 else {}),
            }
            for i, c in enumerate(configs)
        ],
        "dataset_info": [
            {
                "config_name": c,
                "features": features,
                "splits": [
                    {
                        "name": "train",
                        "num_bytes": builds[c]["num_bytes"],
                        "num_examples": builds[c]["subset"]["sentences"],
                    }
                ],
            }
            for c in configs
        ],
    }


def render_provisional_card(name: str, builds: dict[str, dict[str, Any]]) -> str:
    """A short card for a freshly built subset folder (the publisher renders the full one)."""
    first = next(iter(builds.values()))
    meta = subset_metadata(name, builds)
    return (
        environment()
        .get_template("provisional.md.j2")
        .render(
            yaml_header=yaml_dump(meta),
            name=name,
            level=first["subset"]["level"],
            source=first["config"]["source"],
            version=__version__,
            configs=list(builds),
            builds=builds,
        )
    )
