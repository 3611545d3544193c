"""Dataset cards and the score histogram, rendered from the Jinja2 templates in `cards/`.

    render_card(name, {config: build.json}, license=..., source_origin=...)  -> README.md text
    render_fewnerd_card(name, summary.json, command=..., features=...)      -> README.md text

Rendering is pure: numbers in, markdown out (no clock, no files, no environment), so the same
build gives the same card; writing and pushing happen elsewhere. The score histogram the card
shows is drawn by `builders.plots`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

import jinja2
import yaml

from builders import __version__
from builders.hubfolder import SUBSET_FEATURES

#: Licence ids the Hub accepts in card metadata (the ones our sources can carry); others -> other.
# fmt: off
HUB_LICENSES = frozenset({
    "apache-2.0", "mit", "bsd-2-clause", "bsd-3-clause", "cc0-1.0", "cc-by-2.0", "cc-by-3.0",
    "cc-by-4.0", "cc-by-sa-3.0", "cc-by-sa-4.0", "cc-by-nc-2.0", "cc-by-nc-3.0", "cc-by-nc-4.0",
    "cc-by-nc-sa-3.0", "cc-by-nc-sa-4.0", "cc-by-nc-nd-4.0", "cc-by-nd-4.0", "gpl-3.0",
    "lgpl-3.0", "odc-by", "odbl", "pddl", "openrail", "other",
})
# fmt: on
TAGS = ["ner", "zero-shot", "label-shift", "familiarity", "synthetic"]
#: Citation keys in `cards/_citations.md.j2` for sources whose name starts with the prefix.
SOURCE_CITATIONS = {"pilener": "universalner", "nuner": "nuner", "fewnerd": "fewnerd"}
LEVEL_TEXT = {
    "low": "the training labels closest to the benchmark labels (easy transfer)",
    "medium": "training labels from the middle of the score distribution",
    "high": "the training labels furthest from the benchmark labels (hard transfer)",
}
_MAX_LISTED = 20  # labels named per changelog line
_LEVEL_ORDER = {"low": 0, "medium": 1, "high": 2}
_SIDE = {"ge": "≥", "le": "≤"}
_SECRET = re.compile(r"\bhf_[A-Za-z0-9]{8,}")
_SECRET_OPT = re.compile(r"(--(?:hf-)?token[= ])\S+")


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(
            lambda name: resources.files("cards").joinpath(name).read_text(encoding="utf-8")
        ),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters.update(f4=lambda x: "–" if x is None else f"{x:.4f}", g4=_g4, n=_n, cell=_cell)
    return env


def _g4(x: float) -> str:
    return f"{x:.4g}"


def _n(x: int | None) -> str:
    return "–" if x is None else f"{x:,}"


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


class _Dumper(yaml.SafeDumper):
    """Safe YAML without anchors: every config spells out its features."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def yaml_dump(obj: Any) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1000)


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
    for i in range(1, len(names)):
        if n < 10 ** (3 + i):
            return f"{names[i - 1]}<n<{names[i]}"
    return "n>1T"


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)


def rebuild_command(build: Mapping[str, Any]) -> str:
    """The build's recorded command, or one synthesised from its config (redacted)."""
    if build.get("command"):
        return redact(str(build["command"]))
    c = build["config"]
    args = ["build-splits", "--source", c["source"], "--strategy", c["strategy"]]
    bench = [b for b in c.get("benchmarks") or [] if b != "all"]
    if bench:
        args += ["--benchmarks", ",".join(bench)]
    if list(c.get("levels") or ()) != ["low", "medium", "high"]:
        args += ["--levels", ",".join(c["levels"])]
    args += ["--model", c["model"], "--k", str(c["k"]), "--temperature", str(c["temperature"])]
    for key, opt in (("low_q", "--low-quantile"), ("high_q", "--high-quantile")):
        if c.get(key) is not None:
            args += [opt, str(c[key])]
    if c.get("medium_q"):
        args += ["--medium-band", *(str(q) for q in c["medium_q"])]
    if c.get("profile"):
        args += ["--profile", c["profile"]]
    args += [
        flag
        for key, flag in (("per_benchmark", "--per-benchmark"), ("keep_misc", "--keep-misc"))
        if c.get(key)
    ]
    args += ["--seed", str(c["seed"])]
    return redact(" ".join(shlex.quote(a) for a in args))


def _fam_meta(rep: Mapping[str, Any], full: Mapping[str, Any] | None) -> dict[str, Any]:
    s = rep["summary"]
    out: dict[str, Any] = {
        "macro": _r(rep["macro"]),
        "vb_0.5": _r(s["vb_0.5"]),
        "vb_1": _r(s["vb_1"]),
        "ci_95": [_r(s["ci_low"]), _r(s["ci_high"])],
        "exact_overlap": _r(rep["overlap"]["union"]),
    }
    if full is not None:
        out["full_corpus_macro"] = _r(full["macro"])
    out["benchmarks"] = {}
    for b, value in rep["per_benchmark"].items():
        bs = rep["benchmark_summaries"][b]
        row = {
            "familiarity": _r(value),
            "vb_0.5": _r(bs["vb_0.5"]),
            "ci_95": [_r(bs["ci_low"]), _r(bs["ci_high"])],
            "exact_overlap": _r(rep["overlap"][b]),
        }
        if full is not None:
            row["full_corpus"] = _r(full["per_benchmark"].get(b))
        out["benchmarks"][b] = row
    return out


def subset_metadata(
    name: str,
    builds: Mapping[str, Mapping[str, Any]],
    license_: str = "other",
    source_origin: str | None = None,
) -> dict[str, Any]:
    """The card's YAML: Hub fields, configs (entropy default), typed features, Familiarity."""
    configs = list(builds)
    first = builds[configs[0]]
    features = SUBSET_FEATURES._to_yaml_list()  # the same list `datasets` writes
    rows = max(int(b["subset"]["sentences"]) for b in builds.values())
    meta: dict[str, Any] = {
        "license": license_id(license_),
        "language": ["en"],
        "task_categories": ["token-classification"],
        "task_ids": ["named-entity-recognition"],
        "size_categories": [size_category(rows)],
    }
    if source_origin:
        meta["source_datasets"] = [source_origin]
    meta["tags"] = list(TAGS)
    meta["pretty_name"] = f"{first['config']['source']} {first['subset']['level']} label shift"
    meta["configs"] = [
        {
            "config_name": c,
            "data_files": [{"split": "train", "path": f"{c}/train-*"}],
            **({"default": True} if i == 0 else {}),
        }
        for i, c in enumerate(configs)
    ]
    meta["dataset_info"] = [
        {
            "config_name": c,
            "features": features,
            "splits": [
                {
                    "name": "train",
                    "num_bytes": int(builds[c]["num_bytes"]),
                    "num_examples": int(builds[c]["subset"]["sentences"]),
                }
            ],
        }
        for c in configs
    ]
    meta["label_shift"] = {
        "source": first["config"]["source"],
        "level": first["subset"]["level"],
        "cuts": {
            c: {
                "side": b["subset"]["selection"]["side"],
                "quantiles": list(b["subset"]["selection"]["quantiles"]),
                "thresholds": [float(t) for t in b["subset"]["selection"]["thresholds"]],
                "labels": int(b["subset"]["labels"]),
            }
            for c, b in builds.items()
        },
    }
    meta["familiarity"] = {
        c: {
            "model": b["config"]["model"],
            "k": b["config"]["k"],
            "weighting": b["config"]["weighting"],
            **_fam_meta(b["subset"]["familiarity"], (b.get("full") or {}).get("familiarity")),
        }
        for c, b in builds.items()
    }
    return meta


def _rule_text(cut: Mapping[str, Any], symbol: str) -> str:
    q, t = cut["quantiles"], cut["thresholds"]
    if cut["side"] == "between":
        return f"q({q[0]:g}) = {t[0]:.4g} ≤ {symbol} ≤ q({q[1]:g}) = {t[1]:.4g}"
    return f"{symbol} {_SIDE[cut['side']]} q({q[0]:g}) = {t[0]:.4g}"


def _config_view(config: str, b: Mapping[str, Any]) -> dict[str, Any]:
    cfg, sub = b["config"], b["subset"]
    full = b.get("full")
    rep = sub["familiarity"]
    frep = full["familiarity"] if full else None
    symbol = "e" if cfg["strategy"] == "entropy" else "m"
    cuts = b.get("cuts") or {sub["level"]: sub["selection"]}
    bench_rows = [
        {
            "name": name,
            "value": value,
            "vb": rep["benchmark_summaries"][name]["vb_0.5"],
            "ci": (
                rep["benchmark_summaries"][name]["ci_low"],
                rep["benchmark_summaries"][name]["ci_high"],
            ),
            "overlap": rep["overlap"][name],
            "full": frep["per_benchmark"].get(name) if frep else None,
            "full_vb": frep["benchmark_summaries"][name]["vb_0.5"] if frep else None,
            "full_overlap": frep["overlap"].get(name) if frep else None,
            "top": [
                {"label": lab, "sim": sim, "count": cnt}
                for lab, sim, cnt in rep.get("top_training_labels", {}).get(name, [])
            ],
        }
        for name, value in rep["per_benchmark"].items()
    ]
    return {
        "name": config,
        "cfg": cfg,
        "sub": sub,
        "full": full,
        "rep": rep,
        "frep": frep,
        "symbol": symbol,
        "rule": _rule_text(sub["selection"], symbol),
        "cuts": [
            {
                "level": lv,
                "rule": _rule_text(c, symbol),
                "count": c["count"],
                "this": lv == sub["level"],
            }
            for lv, c in sorted(cuts.items(), key=lambda kv: _LEVEL_ORDER.get(kv[0], 9))
        ],
        "profile": sub["selection"].get("profile", "custom"),
        "benchmarks": bench_rows,
        "n_eval": rep["summary"]["n"],
        "short_of_k": int(sub["mentions"]) < int(cfg["k"]),
        "command": rebuild_command(b),
        "version": b.get("toolkit_version", "unknown"),
    }


def changelog_entry(
    version: str,
    old: Mapping[str, Mapping[str, Any]],
    new: Mapping[str, Mapping[str, Any]],
    note: str | None = None,
) -> dict[str, Any]:
    """One changelog entry for `render_card`: what changed per config between two sets of builds.

    `old` and `new` map config name -> build.json; a config present on one side only is listed
    as added or removed. The result is `{"version", "note", "changes": {config: {metric:
    [before, after]}}}` with metrics rows, mentions, labels and familiarity (the macro).
    """
    changes: dict[str, dict[str, list[Any]]] = {}
    for c in sorted(set(old) | set(new), key=lambda n: (n != "entropy", n)):
        before, after = old.get(c), new.get(c)
        changes[c] = {
            m: [_metric(before, m), _metric(after, m)]
            for m in ("rows", "mentions", "labels", "familiarity")
        }
    return {"version": version, "note": note, "changes": changes}


def _metric(build: Mapping[str, Any] | None, metric: str) -> Any:
    if build is None:
        return None
    sub = build["subset"]
    if metric == "familiarity":
        return _r(sub["familiarity"]["macro"])
    return int(sub["sentences" if metric == "rows" else metric])


def _fmt(x: Any) -> str:
    if x is None:
        return "–"
    return f"{x:.4f}" if isinstance(x, float) else f"{x:,}"


def _changelog_view(changelog: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for entry in changelog or []:
        rows = []
        for config, metrics in (entry.get("changes") or {}).items():
            for metric, (before, after) in metrics.items():
                if before == after:
                    continue
                if before is None or after is None:
                    delta = "added" if before is None else "removed"
                elif isinstance(before, float) or isinstance(after, float):
                    delta = f"{after - before:+.4f}"
                else:
                    delta = f"{after - before:+,}"
                rows.append(
                    {
                        "config": config,
                        "metric": metric,
                        "before": _fmt(before),
                        "after": _fmt(after),
                        "delta": delta,
                    }
                )
        labels = []
        for config, d in (entry.get("details") or {}).items():
            for key, verb in (("labels_added", "added"), ("labels_removed", "removed")):
                names = list(d.get(key) or [])
                if names:
                    shown = ", ".join(_cell(n) for n in names[:_MAX_LISTED])
                    more = len(names) - _MAX_LISTED
                    labels.append(
                        f"`{config}`: {len(names):,} label{'s' if len(names) > 1 else ''} "
                        f"{verb}: {shown}" + (f" and {more:,} more" if more > 0 else "")
                    )
        out.append(
            {
                "version": str(entry["version"]),
                "note": entry.get("note"),
                "rows": rows,
                "compared": bool(entry.get("changes")),
                "labels": labels,
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
) -> str:
    """The README.md of a subset repo folder (pure).

    Args:
        name: the folder name (`pilener-low-shift`) or the Hub repo id (`org/pilener-low-shift`),
            used in the title and the `load_dataset` example.
        builds: config name -> that config's parsed `build.json`; the first is the default
            (pass `entropy` first, as `hubfolder.configs_of` orders them).
        license: the source's licence id, inherited; ids the Hub does not know become `other`.
        source_origin: the source's Hub dataset id, listed in `source_datasets`, or None.
        changelog: entries `{"version", "note", "changes": {config: {metric: [before, after]}},
            "details": {config: {"labels_added": [...], "labels_removed": [...]}}}` (see
            `changelog_entry`; `note` and `details` optional), newest first. Only version
            strings are shown, never dates, so the card stays a function of its inputs.
    """
    if not builds:
        raise ValueError("render_card needs at least one config's build.json")
    configs = list(builds)
    first = builds[configs[0]]
    source = first["config"]["source"]
    meta = subset_metadata(name, builds, license, source_origin)
    cites = ["familiarity"] + [
        key for prefix, key in SOURCE_CITATIONS.items() if source.startswith(prefix)
    ]
    views = [_config_view(c, builds[c]) for c in configs]
    text = (
        environment()
        .get_template("subset.md.j2")
        .render(
            yaml_header=yaml_dump(meta),
            name=name,
            title=name.rsplit("/", 1)[-1],
            level=first["subset"]["level"],
            level_text=LEVEL_TEXT.get(first["subset"]["level"], first["subset"]["level"]),
            source=source,
            source_origin=source_origin,
            license=meta["license"],
            source_license=license,
            configs=views,
            versions=sorted({v["version"] for v in views}),
            full=first.get("full"),
            changelog=_changelog_view(changelog),
            citations=cites,
        )
    )
    return redact(text)


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
        summary: the folder's `summary.json` (`SplitBuild.summary()` plus `familiarity`).
        command: the command that rebuilds the folder.
        features: `features(fine_names)._to_yaml_list()` of `builders.fewnerd_export`, the
            same list its parquet files carry, so `load_dataset` gets the ClassLabel columns.
        version: toolkit version that built it.
    """
    splits = {"train": "train", "dev": "validation", "test": "test"}
    parts = {p: summary["parts"][p] for p in splits if p in summary["parts"]}
    total = sum(int(p["sentences"]) for p in parts.values())
    fam = summary.get("familiarity")
    meta: dict[str, Any] = {
        "license": "cc-by-sa-4.0",
        "language": ["en"],
        "task_categories": ["token-classification"],
        "task_ids": ["named-entity-recognition"],
        "size_categories": [size_category(total)],
        "source_datasets": ["DFKI-SLT/few-nerd"],
        "tags": ["ner", "few-shot", "zero-shot", "few-nerd", "label-shift", "familiarity"],
        "pretty_name": f"Few-NERD {summary['mode'].upper()} (rebuilt)",
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": splits[p], "path": f"data/{splits[p]}-*"} for p in parts],
            }
        ],
        "dataset_info": {
            "features": features,
            "splits": [
                {"name": splits[p], "num_examples": int(parts[p]["sentences"])} for p in parts
            ],
        },
    }
    if fam:
        meta["familiarity"] = {
            "model": fam["model"],
            "k": fam["k"],
            "weighting": fam["weighting"],
            **{
                splits[p]: {
                    "mean": _r(fam[p]["mean"]),
                    "vb_0.5": _r(fam[p]["vb_0.5"]),
                    "vb_1": _r(fam[p]["vb_1"]),
                    "ci_95": [_r(fam[p]["ci_low"]), _r(fam[p]["ci_high"])],
                    "exact_overlap": _r(fam[p]["exact_overlap"]),
                }
                for p in ("dev", "test")
                if fam.get(p)
            },
        }
    by_part: dict[str, list[str]] = {p: [] for p in parts}
    for typ, part in summary.get("assignment_map", {}).items():
        by_part.setdefault(part, []).append(typ)
    text = (
        environment()
        .get_template("fewnerd.md.j2")
        .render(
            yaml_header=yaml_dump(meta),
            name=name,
            title=meta["pretty_name"],
            s=summary,
            parts=[
                {"part": p, "split": splits[p], **parts[p], "types_of": by_part.get(p, [])}
                for p in parts
            ],
            fam=fam,
            fam_rows=[(splits[p], fam[p]) for p in ("dev", "test") if fam and fam.get(p)],
            command=redact(command) if command else None,
            version=version,
            citations=["fewnerd", "familiarity"],
        )
    )
    return redact(text)
