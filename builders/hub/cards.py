"""The dataset card of a subset repo folder, rendered from the Jinja2 templates in `cards/`.

    render_card(name, {config: build.json}, license=..., source_origin=...)  -> README.md text

Pure (no clock, no files, no environment): the same build gives the same card.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from builders.defaults import LEVELS, SCORE_SYMBOLS
from builders.hub.changelog import describe_inputs
from builders.hub.folder import subset_features
from builders.hub.templating import (
    card_header,
    card_yaml,
    cell,
    dataset_info,
    environment,
    familiarity_meta,
    license_id,
    redact,
)
from builders.names import quoted
from builders.sources import NAME_CREDITS

TAGS = ["ner", "zero-shot", "label-shift", "familiarity"]
LEVEL_TEXT = {
    "low": "the training labels closest to the benchmark labels (easy transfer)",
    "medium": "training labels from the middle of the score distribution",
    "high": "the training labels furthest from the benchmark labels (hard transfer)",
}
_MAX_LISTED = 20  # labels named per changelog line
_LABELS_SHOWN = 40  # a level's labels named in its card


def subset_yaml(
    builds: Mapping[str, Mapping[str, Any]],
    license_: str = "other",
    source_origin: str | None = None,
) -> str:
    """The card's YAML: Hub fields, configs (the first default), `dataset_info` per config,
    Familiarity."""
    configs = list(builds)
    first = builds[configs[0]]
    header = card_header(
        license_=license_,
        rows=max(int(b["subset"]["sentences"]) for b in builds.values()),
        source_datasets=[source_origin] if source_origin else None,
        tags=TAGS + (["synthetic"] if _source(first).get("annotation") == "llm" else []),
        pretty_name=f"{first['config']['source']} {first['subset']['level']} label shift",
    )
    data_configs = {
        c: {
            "data_files": [{"split": "train", "path": f"{c}/train-*"}],
            **({"default": True} if i == 0 else {}),
        }
        for i, c in enumerate(configs)
    }
    infos = {
        c: dataset_info(
            subset_features(),
            {"train": (int(b["num_bytes"]), int(b["subset"]["sentences"]))},
            b.get("download_size"),
        )
        for c, b in builds.items()
    }
    familiarity = {
        c: familiarity_meta(b["subset"]["familiarity"], (b.get("full") or {}).get("familiarity"))
        for c, b in builds.items()
    }
    for c, b in builds.items():
        checks = _checks(b)
        if checks:
            familiarity[c]["check_models"] = [familiarity_meta(rep, full) for rep, full in checks]
    label_shift = {
        "source": first["config"]["source"],
        "level": first["subset"]["level"],
        # how each config chose its level: its strategy's `cut_meta`
        "cuts": {c: dict(json.loads(str(_card(b).cut_meta(b)))) for c, b in builds.items()},
    }
    extra = {"label_shift": label_shift, "familiarity": familiarity}
    return card_yaml(header, data_configs, infos, extra)


def _card(b: Mapping[str, Any]) -> Any:
    """The config's strategy's card text (`cards/_strategy_NAME.md.j2`), which alone reads the
    strategy's selection keys."""
    return environment().get_template(f"_strategy_{b['config']['strategy']}.md.j2").module


def _cuts_view(b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every level of the build: its cut, labels, mentions and Familiarity."""
    sub = b["subset"]
    cuts = b.get("cuts") or {sub["level"]: sub["selection"]}
    levels = b.get("levels") or {}
    versus = (b.get("verdicts") or {}).get("versus_full") or {}
    return [
        {
            "level": lv,
            "this": lv == sub["level"],
            "cut": c,
            "familiarity": versus.get(lv, {}).get("familiarity"),
            "labels": (levels.get(lv) or {}).get("labels"),
            "mentions": (levels.get(lv) or {}).get("mentions"),
        }
        for lv, c in sorted(cuts.items(), key=lambda i: LEVELS.index(i[0]) if i[0] in LEVELS else 9)
    ]


def _config_view(config: str, b: Mapping[str, Any]) -> dict[str, Any]:
    cfg, sub, levels = b["config"], b["subset"], b.get("levels") or {}
    full = b.get("full")
    symbol = SCORE_SYMBOLS[cfg["strategy"]][1] if cfg["strategy"] in SCORE_SYMBOLS else ""
    return {
        "name": config,
        "cfg": cfg,
        "sub": sub,
        "full": full,
        "rep": sub["familiarity"],
        "frep": full["familiarity"] if full else None,
        "checks": _checks(b),
        "verdict_checks": _listed((b.get("verdicts") or {}).get("check")),
        "card": _card(b),
        "sel": sub["selection"],
        "symbol": symbol,
        "cuts": _cuts_view(b),
        "max_label_share": sub["selection"].get("max_label_share"),
        "protocol": cfg.get("protocol", "ours"),
        "labels": b.get("labels") or [],
        "labels_shown": (b.get("labels") or [])[:_LABELS_SHOWN],
        "verdicts": b.get("verdicts"),
        "verdict_levels": [
            lv for lv in LEVELS if lv in ((b.get("verdicts") or {}).get("shares") or {})
        ],
        "level_rows": {
            lv: {"labels": c["labels"], "mentions": c["mentions"]} for lv, c in levels.items()
        },
        # what makes the levels comparable beside their Familiarity (METHOD.md section 4), easy
        # to hard; none in a build.json written before they were recorded
        "composition": [
            {"level": lv, **levels[lv]}
            for lv in LEVELS
            if lv in levels and "sentences_shared" in levels[lv]
        ],
        "n_eval": sub["familiarity"]["summary"]["n"],
        "short_of_k": int(sub["mentions"]) < int(cfg["k"]),
        "command": redact(str(b.get("command") or f"build-splits --source {cfg['source']}")),
        "recipe": (b.get("provenance") or {}).get("recipe", []),
        "runtime": _runtime(b),
        "version": b.get("toolkit_version", "unknown"),
        "leakage": b.get("leakage"),
        "measured": b.get("measured_difficulty"),
        "build_id": (b.get("build") or {}).get("id"),
    }


def _listed(value: Any) -> list[Any]:
    """A build.json entry per check model as a list: older builds hold one model's dict."""
    if not value:
        return []
    return [value] if isinstance(value, Mapping) else list(value)


def _checks(b: Mapping[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each check model's report of the subset, with the full corpus's beside it."""
    subs = _listed(b["subset"].get("check_familiarity"))
    fulls = _listed((b.get("full") or {}).get("check_familiarity"))
    return [(rep, fulls[i] if i < len(fulls) else None) for i, rep in enumerate(subs)]


def _runtime(b: Mapping[str, Any]) -> str:
    """The runtime that embedded the labels and its weights' hash (`torch fp32, weights
    cdaaf2fbbd76`: the end of the embedding cache's key)."""
    model = (b.get("provenance") or {}).get("model") or {}
    if not model.get("backend"):
        return "–"
    runtime = f"{model['backend']} {model.get('precision', '')}".strip()
    weights = str(model.get("cache_key") or "").rsplit("|", 1)[-1]
    return f"{runtime}, weights `{weights}`" if "|" in str(model.get("cache_key")) else runtime


def _delta(before: Any, after: Any) -> str:
    if before is None or after is None:
        return "added" if before is None else "removed"
    if isinstance(before, float) or isinstance(after, float):
        return f"{after - before:+.4f}"
    return f"{after - before:+,}"


def _changelog_view(changelog: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for entry in changelog or []:
        rows = [
            {"config": c, "metric": m, "before": a, "after": b, "delta": _delta(a, b)}
            for c, metrics in (entry.get("changes") or {}).items()
            for m, (a, b) in metrics.items()
            if a != b
        ]
        labels = []
        for config, d in (entry.get("details") or {}).items():
            groups = [
                (verb, [cell(quoted(n)) for n in d.get(f"labels_{verb}") or []])
                for verb in ("added", "removed")
            ]
            for key, verb in (("moved_in", "from"), ("moved_out", "to")):
                pairs = sorted((d.get(key) or {}).items())  # quoted: a label may be `medium`
                shown = [f"{cell(quoted(n))} ({verb} {lv})" for n, lv in pairs]
                groups.append(("moved between levels", shown))
            for what, shown in groups:
                if shown:
                    more = len(shown) - _MAX_LISTED
                    labels.append(
                        f"`{config}`: {len(shown):,} label{'s' if len(shown) > 1 else ''} "
                        f"{what}: {', '.join(shown[:_MAX_LISTED])}"
                        + (f" and {more:,} more" if more > 0 else "")
                    )
        out.append(
            {
                "version": str(entry["version"]),
                "note": entry.get("note"),
                "rows": rows,
                "compared": bool(entry.get("changes")),
                "labels": labels,
                "inputs": [cell(x) for x in describe_inputs(entry.get("input") or {})],
            }
        )
    return out


def render_card(
    name: str,
    builds: Mapping[str, Mapping[str, Any]],
    *,
    license: str,
    source_origin: str | None,
    changelog: Sequence[Mapping[str, Any]] | None = None,
    load_from: str | None = None,
    year: int | None = None,
) -> str:
    """The README.md of a subset repo folder `name` (or Hub repo id), pure.

    `builds`: config -> its build.json, the default first (`configs_of` order); `license`:
    the source's licence id (unknown to the Hub: `other`); `changelog`: `hub.changelog`'s
    entries, newest first; `load_from`: what the `load_dataset` and `export-gliner` lines name
    (default `name`).
    """
    if not builds:
        raise ValueError("render_card needs at least one config's build.json")
    first = next(iter(builds.values()))
    about = _source_vars(first, license, source_origin)
    level = first["subset"]["level"]
    views = [_config_view(c, b) for c, b in builds.items()]
    sections: dict[str, dict[str, Any]] = {}  # one per strategy's card text, as configs come
    for v in views:
        sections.setdefault(v["card"].section, {"card": v["card"], "configs": []})
        sections[v["card"].section]["configs"].append(v)
    text = (
        environment()
        .get_template("subset.md.j2")
        .render(
            yaml_header=Markup(
                subset_yaml(builds, about["source_license"], about["source_origin"])
            ),
            name=name,
            load_from=load_from or name,
            local="/" not in name,  # not for a Hub repo
            title=name.rsplit("/", 1)[-1],
            level=level,
            level_text=LEVEL_TEXT.get(level, level),
            dataset_bibtex=dataset_bibtex(name, first, year),
            **about,
            configs=views,
            sections=list(sections.values()),
            versions=sorted({v["version"] for v in views}),
            full=first.get("full"),
            changelog=_changelog_view(changelog),
            # (config, failed checks and notes) of each config whose verdicts have any
            limitations=[
                (v["name"], v["verdicts"]["failed"] + v["verdicts"]["notes"])
                for v in views
                if v["verdicts"] and (v["verdicts"]["failed"] or v["verdicts"]["notes"])
            ],
        )
    )
    return redact(text)


def _source_vars(
    first: Mapping[str, Any], license: str, source_origin: str | None
) -> dict[str, Any]:
    """Template variables about the source: its licence, Hub origin and citation keys (the
    build's record of what was read, else the registry's defaults), annotation and inputs."""
    source, src = first["config"]["source"], _source(first)
    if src:
        license = src.get("license") or license
        source_origin = src.get("hub_dataset") if src.get("read_from_hub") else None
        cites = src.get("credits", [])
    else:  # keys in `cards/_citations.md.j2` by the source's name
        cites = [key for prefix, key in NAME_CREDITS.items() if source.startswith(prefix)]
    return {
        "source": source,
        "source_origin": source_origin,
        "license": license_id(license),
        "source_license": license,
        "citations": ["familiarity", *cites],
        "annotation": src.get("annotation", "unknown"),
        "source_text": _source_text(source, src),
        "read_from": _read_from(src),
        "inputs": _inputs(src),
    }


def _source(build: Mapping[str, Any]) -> dict[str, Any]:
    return dict((build.get("provenance") or {}).get("source") or {})


def _inputs(src: Mapping[str, Any]) -> list[str]:
    """The inputs' file names, each once; a Hub dataset's split with the commit it was read
    at (`org/name/train @ 1a2b3c4d5e6f`)."""
    names = [
        f"{i['input']} @ {i['revision'][:12]}"
        if i.get("revision")
        else i["input"].rstrip("/").rsplit("/", 1)[-1]
        for s in (src.get("splits") or {}).values()
        for i in s.get("inputs", [])
    ]
    return list(dict.fromkeys(names))


def _read_from(src: Mapping[str, Any]) -> str | None:
    splits = src.get("splits") or {}
    if not splits:
        return None
    parts = [f"{split} ({s['sentences']:,} sentences)" for split, s in splits.items()]
    where = "its Hub dataset" if src.get("read_from_hub") else "local files"
    return f"{where}: {', '.join(parts)}"


def _source_text(source: str, src: Mapping[str, Any]) -> str:
    """What the rows come from, saying where the input is not the registered Hub dataset."""
    if not src:
        return f"`{source}` as stored by the toolkit."
    spec, hub = src.get("spec"), src.get("hub_dataset")
    text = f"`{source}`, read by the toolkit's `{spec}` source" if spec else f"`{source}`"
    if hub and src.get("read_from_hub"):
        return text + f" from its Hub dataset [{hub}](https://huggingface.co/datasets/{hub})."
    names = ", ".join(f"`{n}`" for n in _inputs(src)) or "local files"
    if hub:
        return (
            text + f" from {names}. The `{spec}` source stands for the Hub dataset "
            f"[{hub}](https://huggingface.co/datasets/{hub}); these files are a copy or an "
            "excerpt of it, not necessarily the whole of it (the counts above are what was read)."
        )
    return text + f" from {names}."


def dataset_bibtex(name: str, build: Mapping[str, Any], year: int | None = None) -> str:
    """A BibTeX entry for this dataset; the organisation as author and the Hub URL when `name`
    is a repo id, and the `year` `publish` passes (a build records no date)."""
    import re

    key = re.sub(r"[^A-Za-z0-9]+", "_", name.rsplit("/", 1)[-1]).strip("_").lower()
    version = build.get("toolkit_version", "unknown")
    org = name.split("/", 1)[0] if "/" in name else None
    url = f"https://huggingface.co/datasets/{name}" if org else None
    lines = [
        f"@misc{{{key},",
        f"  title        = {{{{{name}}}: a {build['subset']['level']} label-shift subset of "
        f"{build['config']['source']}}},",
        *([f"  author       = {{{{{org}}}}},"] if org else []),
        *([f"  year         = {{{year}}},"] if year is not None else []),
        *([f"  url          = {{{url}}},", f"  howpublished = {{\\url{{{url}}}}},"] if url else []),
        f"  note         = {{Built with labelshift-builders {version}}}",
        "}",
    ]
    return "\n".join(lines)
