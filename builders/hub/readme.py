"""A repo folder's README.md, rendered from the folder's own files for a given repo id.

    folder_card(folder, "my-org/pilener-low-shift")  -> README.md text

Writing a folder and publishing it both render through here, so the card a folder holds and
the card pushed for the same repo id are the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from builders.errors import InputError
from builders.hub.cards import render_card
from builders.hub.changelog import CHANGELOG
from builders.hub.fewnerd_card import render_fewnerd_card
from builders.hub.folder import BUILD_JSON, SUMMARY_JSON, configs_of, read_json
from builders.hub.templating import card_text
from builders.names import valid_org
from builders.sources import SOURCES

CARD = "README.md"
#: The specification every card cites ("METHOD.md section N"), shipped beside it.
METHOD = "METHOD.md"


def write_method(folder: Path) -> None:
    """Put the toolkit's METHOD.md (packaged with the card templates) into a repo folder, so
    that a card's references resolve wherever it is published."""
    text = card_text(METHOD)
    (Path(folder) / METHOD).write_text(text, encoding="utf-8")


def repo_name(folder: Path, org: str | None) -> str:
    """The name a card uses: `org/folder` for a Hub repo, else the folder's name."""
    return f"{valid_org(org)}/{folder.name}" if org else folder.name


def load_path(folder: Path, org: str | None) -> str:
    """What a card's `load_dataset` line names: the Hub repo `org/folder`, else the folder as
    given, or its name where that is absolute (a card never shows one)."""
    if org:
        return repo_name(folder, org)
    return folder.as_posix() if not folder.is_absolute() else folder.name


def folder_card(
    folder: Path,
    name: str,
    load_from: str | None = None,
    year: int | None = None,
    changelog: list[dict[str, Any]] | None = None,
) -> str:
    """The card of a subset or Few-NERD repo folder for the repo (or folder) `name`; see
    `render_card` (`changelog` default: the folder's `changelog.json`)."""
    folder = Path(folder)
    if (folder / SUMMARY_JSON).is_file():
        return _fewnerd_card(folder, name, load_from or name)
    configs = configs_of(folder) if folder.is_dir() else []
    if not configs:
        raise InputError(
            f"{folder}: no {BUILD_JSON} in any config folder and no {SUMMARY_JSON}; "
            "is it a folder written by build-splits or fewnerd-splits?"
        )
    builds = {c: read_json(folder / c / BUILD_JSON) for c in configs}
    source = builds[configs[0]]["config"]["source"]
    spec = SOURCES.get(source)  # a store name given with `ingest --name` has no spec
    return render_card(
        name,
        builds,
        license=spec.license if spec else "unknown",
        source_origin=spec.origin if spec else None,
        changelog=read_json(folder / CHANGELOG) if changelog is None else changelog,
        load_from=load_from,
        year=year,
    )


def _fewnerd_card(folder: Path, name: str, load_from: str) -> str:
    import pyarrow.parquet as pq
    from datasets import Features

    summary = read_json(folder / SUMMARY_JSON)
    files = sorted((folder / "data").glob("*.parquet"))
    if not isinstance(summary, dict) or not files:
        raise InputError(f"{folder}: {SUMMARY_JSON} unreadable or no data/*.parquet")
    features = Features.from_arrow_schema(pq.read_schema(files[0]))
    return render_fewnerd_card(
        name,
        summary,
        command=summary.get("command"),
        features=features,
        version=summary.get("toolkit_version", "unknown"),
        load_from=load_from,
    )
