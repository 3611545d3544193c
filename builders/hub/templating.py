"""What both dataset cards share: the Jinja2 environment over `cards/`, the YAML header built
through the libraries' own types, and the Hub metadata helpers. Pure.

    yaml = card_yaml(card_header(...), configs, {config: dataset_info(...)}, extra)
    environment().get_template("subset.md.j2").render(yaml_header=yaml, ...)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from builders.names import printable

if TYPE_CHECKING:  # `datasets` and jinja2 are imported where a card is built (slow imports)
    import jinja2
    from datasets import DatasetInfo, Features

#: Licence ids the Hub accepts in card metadata (the ones our sources can carry); others -> other.
# fmt: off
HUB_LICENSES = frozenset({
    "apache-2.0", "mit", "bsd-2-clause", "bsd-3-clause", "cc0-1.0", "cc-by-2.0", "cc-by-3.0",
    "cc-by-4.0", "cc-by-sa-3.0", "cc-by-sa-4.0", "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0",
    "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0", "cc-by-nc-nd-4.0", "cc-by-nd-4.0", "gpl-3.0",
    "lgpl-3.0", "odc-by", "odbl", "pddl", "openrail", "other",
})
# fmt: on

_SECRET = re.compile(r"\bhf_[A-Za-z0-9]{8,}")
_SECRET_OPT = re.compile(r"(--(?:hf-)?token[= ])\S+")


@cache
def environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(card_text),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        finalize=_shown,
    )
    env.filters.update(
        f4=lambda x: "–" if x is None else f"{x:.4f}",
        g4=lambda x: f"{x:.4g}",
        n=lambda x: "–" if x is None else f"{x:,}",
        pct=lambda x: "–" if x is None else f"{100 * x:.1f}",  # F1 as papers give it
        cell=cell,
    )
    env.policies["json.dumps_kwargs"] = {"sort_keys": False}  # a strategy's `cut_meta`: as written
    return env


def _shown(value: Any) -> Any:
    """Every value a card shows, control characters escaped (newlines and tabs stay: macros and
    the YAML header render text of many lines)."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return printable(value, keep_lines=True)
    return value


def card_text(name: str) -> str:
    """A file of the card templates: package data `builders.cards`, else (a source tree beside a
    non-editable install) the checkout's top-level `cards/`."""
    try:
        return resources.files("builders.cards").joinpath(name).read_text(encoding="utf-8")
    except ModuleNotFoundError:
        checkout = Path(__file__).resolve().parents[2] / "cards"
        return (checkout / name).read_text(encoding="utf-8")


def cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def dataset_info(
    features: Features, splits: Mapping[str, tuple[int, int]], download_size: int | None
) -> DatasetInfo:
    """A config's `dataset_info`: its features and, per split, (`num_bytes`, `num_examples`)."""
    from datasets import DatasetInfo, SplitDict, SplitInfo

    split_dict = SplitDict()
    for name, (num_bytes, num_examples) in splits.items():
        split_dict.add(
            SplitInfo(name=name, num_bytes=int(num_bytes), num_examples=int(num_examples))
        )
    return DatasetInfo(
        features=features,
        splits=split_dict,
        download_size=download_size,
        dataset_size=sum(int(b) for b, _ in splits.values()),
    )


def card_yaml(
    header: Mapping[str, Any],
    configs: Mapping[str, Mapping[str, Any]],
    infos: Mapping[str, DatasetInfo],
    extra: Mapping[str, Any],
) -> str:
    """The card's YAML, written by the libraries that read it (`DatasetCardData`,
    `MetadataConfigs`, `DatasetInfosDict`), so `load_dataset` reads back what was written;
    `extra` (our own keys) last."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCardData

    data = DatasetCardData(**header)
    MetadataConfigs({name: dict(c) for name, c in configs.items()}).to_dataset_card_data(data)
    DatasetInfosDict(infos).to_dataset_card_data(data)
    for key, value in extra.items():
        data[key] = value
    text = data.to_yaml()
    if "&id" in text:  # an anchor would hide a config's features from a plain reader
        raise ValueError("card YAML with anchors: a value is shared between two keys")
    return text + "\n"


def redact(text: str) -> str:
    """Hide anything that looks like a Hub token (a card must never carry one)."""
    return _SECRET_OPT.sub(r"\1***", _SECRET.sub("hf_***", text))


def license_id(license_: str | None) -> str:
    lic = (license_ or "").strip().lower()
    return lic if lic in HUB_LICENSES else "other"


def size_category(n: int) -> str:
    """The Hub's `size_categories` bucket for n rows (n<1K, 1K<n<10K, ..., n>1T)."""
    names = ["1K", "10K", "100K", "1M", "10M", "100M", "1B", "10B", "100B", "1T"]
    if n < 1_000:
        return "n<1K"
    k = len(str(n)) - 4  # n has k + 4 digits: names[k] <= n < names[k + 1]
    return f"{names[k]}<n<{names[k + 1]}" if k + 1 < len(names) else "n>1T"


def r4(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def card_header(
    *,
    license_: str | None,
    rows: int,
    source_datasets: list[str] | None,
    tags: list[str],
    pretty_name: str,
) -> dict[str, Any]:
    """The Hub fields every card's YAML starts with (licence, task, size, sources, tags)."""
    meta: dict[str, Any] = {
        "license": license_id(license_),
        "language": ["en"],
        "task_categories": ["token-classification"],
        "task_ids": ["named-entity-recognition"],
        "size_categories": [size_category(rows)],
    }
    if source_datasets:
        meta["source_datasets"] = list(source_datasets)
    meta["tags"] = list(tags)
    meta["pretty_name"] = pretty_name
    return meta


def familiarity_meta(
    rep: Mapping[str, Any], full: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A Familiarity report for a card's YAML, rounded, the full corpus's beside it if given."""
    s = rep["summary"]
    out: dict[str, Any] = {
        "model": rep["model"],
        "k": rep["k"],
        "weighting": rep["weighting"],
        "protocol": rep.get("protocol", "ours"),
        "union_macro": r4(rep["union_macro"]),
        "paper_figure": r4(rep["paper_figure"]),
        "vb_0.5": r4(s["vb_0.5"]),
        "vb_1": r4(s["vb_1"]),
        "ci_95": [r4(s["ci_low"]), r4(s["ci_high"])],
        "exact_overlap": r4(rep["overlap"]),
    }
    if full is not None:
        out["full_corpus_union_macro"] = r4(full["union_macro"])
        out["full_corpus_paper_figure"] = r4(full["paper_figure"])
    out["benchmarks"] = {}
    for name, b in rep["per_benchmark"].items():
        row = {
            "familiarity": r4(b["familiarity"]),
            "vb_0.5": r4(b["summary"]["vb_0.5"]),
            "ci_95": [r4(b["summary"]["ci_low"]), r4(b["summary"]["ci_high"])],
            "exact_overlap": r4(b["overlap"]),
        }
        if full is not None:
            row["full_corpus"] = r4(full["per_benchmark"][name]["familiarity"])
        out["benchmarks"][name] = row
    return out
