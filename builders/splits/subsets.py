"""Writing built subsets as Hub repo folders: every folder of a build at once, or none.

    OUT/{source}-{level}-shift/
        README.md, changelog.json (when regenerated)
        {strategy}/train-00000-of-00001.parquet, build.json, scores.parquet, scores.png

A repo folder holds one config per strategy. Writing one config builds the complete new
folder beside the old one (the other configs linked in, the changelog and the card rendered
from every config's build.json) and swaps it in; all folders of a build are swapped together
(`hub.folder.atomic_dirs`), so a failure leaves every earlier output as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from builders import __version__
from builders.hub.changelog import CHANGELOG
from builders.hub.folder import (
    BUILD_JSON,
    PARQUET_NAME,
    SUBSET_FEATURES,
    atomic_dirs,
    dataset_sizes,
    link_tree,
    read_json,
    write_json,
    write_parquet,
)
from builders.hub.plots import dial_png, histogram_png, score_plot_title
from builders.hub.readme import CARD, METHOD, folder_card, load_path, repo_name, write_method
from builders.names import check_name
from builders.splits.config import BuildResult, SubsetResult


def build_record(
    res: BuildResult,
    sub: SubsetResult,
    command: str | None = None,
    scenario: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A subset config's `build.json`: parameters, this subset, the full corpus, every cut."""
    record: dict[str, Any] = {
        "toolkit_version": __version__,
        "command": command,
        "config": res.config_dict(),
        "subset": sub.to_dict(),
        "full": res.full.to_dict(),
        "cuts": {lv: c.to_dict() for lv, c in res.cuts.items()},
        "labels": _labels_record(sub),
        "levels": {
            s.level: {"labels": s.labels, "mentions": s.mentions, "sentences": s.sentences}
            for s in res.subsets
        },
        "verdicts": res.verdicts.to_dict() if res.verdicts is not None else None,
    }
    if res.leakage is not None:
        record["leakage"] = res.leakage_of(sub.level)
    if res.provenance is not None:
        record["provenance"] = res.provenance
    if scenario is not None:
        record["scenario"] = dict(scenario)
    return record


def _labels_record(sub: SubsetResult) -> list[dict[str, Any]]:
    """The labels this subset keeps with their mentions in it, most frequent first."""
    rows = sorted(sub.label_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [{"label": lab, "mentions": n} for lab, n in rows]


def write_results(
    out: Path,
    results: list[BuildResult],
    *,
    command: str | None = None,
    scenario: Mapping[str, Any] | None = None,
    changelogs: Mapping[str, list[dict[str, Any]]] | None = None,
    org: str | None = None,
) -> list[Path]:
    """Write every subset of `results` into its repo folder under `out`, all or none.

    Args:
        command: the command line recorded in build.json and shown in the card.
        scenario: the scenario record kept in build.json (regeneration).
        changelogs: folder name -> its new changelog; other folders keep theirs.
        org: the Hub user or organisation the folders are for: the card's `load_dataset`
            line then names `org/folder` (otherwise the folder).
    """
    jobs = [
        (out / check_name(sub.name, "folder name"), res, sub)
        for res in results
        for sub in res.subsets
    ]
    with atomic_dirs([folder for folder, _, _ in jobs]) as tmps:
        for tmp, (folder, res, sub) in zip(tmps, jobs, strict=True):
            log = (changelogs or {}).get(folder.name)
            record = build_record(res, sub, command, scenario)
            names = (repo_name(folder, org), load_path(folder, org))
            _stage(tmp, folder, res, sub, record, log, names)
    for folder, _, sub in jobs:
        sub.path = str(folder)
    return [folder for folder, _, _ in jobs]


def _stage(
    tmp: Path,
    folder: Path,
    res: BuildResult,
    sub: SubsetResult,
    record: dict[str, Any],
    changelog: list[dict[str, Any]] | None,
    names: tuple[str, str],
) -> None:
    """The complete new repo folder in `tmp`: the other configs, this one, changelog, and the
    card of every config, for the repo (or folder) `names[0]`, loaded from `names[1]`."""
    strategy = res.config.strategy
    skip = {strategy, CARD, METHOD} | ({CHANGELOG} if changelog is not None else set())
    link_tree(folder, tmp, skip=skip)
    _write_config(tmp / strategy, res, sub, record)
    if changelog is not None:
        write_json(tmp / CHANGELOG, changelog)
    write_method(tmp)
    (tmp / CARD).write_text(folder_card(tmp, *names), encoding="utf-8")


def _write_config(where: Path, res: BuildResult, sub: SubsetResult, record: dict[str, Any]) -> None:
    """One strategy config: rows, every label's score, the histogram and build.json."""
    assert sub.rows is not None, "a subset to write carries its rows"
    where.mkdir()
    parquet = where / PARQUET_NAME.format(split="train")
    write_parquet(sub.rows, parquet, SUBSET_FEATURES)
    sizes = dataset_sizes({"train": [parquet]}, SUBSET_FEATURES)  # the card's dataset_info
    record.update(num_bytes=sizes["train"], download_size=sizes["download_size"])
    level = next(lv for lv in res.levels if lv.level == sub.level)
    score_table = pa.table(
        {
            "label": pa.array(res.table.labels, pa.string()),
            "mentions": pa.array(res.table.mentions, pa.int64()),
            **_score_columns(res),
            "selected": pa.array(level.selected_mask(), pa.bool_()),
        }
    )
    pq.write_table(score_table, where / "scores.parquet", compression="zstd")
    (where / "scores.png").write_bytes(_plot(res, sub.level))
    write_json(where / BUILD_JSON, record)


def _plot(res: BuildResult, level: str) -> bytes:
    """The config's picture: the score histogram with the cuts, or for the `familiarity`
    strategy the Familiarity of windows along the ranking with the levels' windows."""
    cfg = res.config
    title = score_plot_title(
        cfg.source, cfg.strategy, res.scores.size, list(res.benchmarks), cfg.model, level
    )
    if cfg.strategy == "familiarity":
        windows = {lv: (p.offset, p.offset + p.size, p.familiarity) for lv, p in res.cuts.items()}
        targets = {lv: p.target for lv, p in res.cuts.items()}
        return dial_png(res.curve, windows, level=level, title=title, targets=targets)
    return histogram_png(
        res.scores.ravel(),
        {lv: list(c.thresholds) for lv, c in res.cuts.items()},
        cfg.strategy,
        level=level,
        title=title,
        sides={lv: c.side for lv, c in res.cuts.items()},
    )


def _score_columns(res: BuildResult) -> dict[str, pa.Array]:
    """`score` per label; under the paper protocol `score <benchmark>` per benchmark; for
    the `familiarity` strategy the ranking's `rank`, `gain` (Familiarity per mention when the
    ranking took it, 0 after its greedy part) and `max` (closest similarity)."""
    if res.ranking is not None:
        return {
            "rank": pa.array(res.ranking["rank"], pa.int64()),
            "gain": pa.array(res.ranking["gain"], pa.float64()),
            "max": pa.array(res.ranking["max"], pa.float64()),
        }
    if res.scores.ndim == 1:
        return {"score": pa.array(res.scores, pa.float64())}
    return {
        f"score {name}": pa.array(res.scores[:, b], pa.float64())
        for b, name in enumerate(res.benchmarks)
    }


def selected_labels(folder: Path, strategy: str) -> list[str] | None:
    """The labels a written config kept (from its scores.parquet), or None if there is none."""
    path = folder / strategy / "scores.parquet"
    if not path.exists():
        return None
    t = pq.read_table(path, columns=["label", "selected"])
    return [
        lab
        for lab, s in zip(
            t.column("label").to_pylist(), t.column("selected").to_pylist(), strict=True
        )
        if s
    ]


def old_build(folder: Path, strategy: str) -> dict[str, Any] | None:
    """The build.json of a written config, or None."""
    rec = read_json(folder / strategy / BUILD_JSON)
    return rec if isinstance(rec, dict) else None
