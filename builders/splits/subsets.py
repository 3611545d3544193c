"""Writing built subsets as Hub repo folders: every folder of a build at once, or none.

    OUT/{source}-{level}-shift/
        README.md, changelog.json (when regenerated)
        {strategy}/train-00000-of-00001.parquet, build.json, scores.parquet, scores.png

A repo folder holds one config per strategy. Writing one config builds the complete new
folder beside the old one (the other configs linked in, the changelog and the card rendered
from every config's build.json) and swaps it in; all folders of a build are swapped together
(`hub.folder.atomic_dirs`), so a failure leaves every earlier output as it was.

Each config's build.json names its build, `build: {id, levels: {folder: sha256 of its rows}}`
(the id is made from the levels' rows and the configs: the same inputs give the same id), and
once every folder is in place the build's entries are merged into `OUT/.labelshift-manifest.json`
(`hub.manifest`), so a reader can check that the levels it reads come from one build.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from builders import __version__
from builders.deferred import pa, pq
from builders.hub.changelog import CHANGELOG
from builders.hub.folder import (
    BUILD_JSON,
    MEASURED,
    PARQUET_NAME,
    atomic_dirs,
    dataset_sizes,
    link_or_copy,
    link_tree,
    read_json,
    subset_features,
    write_json,
    write_parquet,
)
from builders.hub.manifest import config_entry, file_sha256
from builders.hub.outdir import OutLock
from builders.hub.plots import score_plot_title
from builders.hub.readme import CARD, METHOD, folder_card, load_path, repo_name, write_method
from builders.names import check_name
from builders.splits.config import BuildResult, SubsetResult
from builders.splits.strategies import strategy


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
            s.level: {
                "labels": s.labels,
                "mentions": s.mentions,
                "sentences": s.sentences,
                **(s.composition or {}),
            }
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
    """Write every subset of `results` into its repo folder under `out`, all or none, then
    record them in `out`'s manifest (`hub.manifest`), holding `out`'s lock.

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
    folders = [folder for folder, _, _ in jobs]

    def manifest(tmps: list[Path]) -> dict[str, Any]:
        return {
            folder.name: {res.config.strategy: config_entry(tmp / res.config.strategy)}
            for tmp, (folder, res, _) in zip(tmps, jobs, strict=True)
        }

    with OutLock(out, command or "builders build-splits"), atomic_dirs(folders, manifest) as tmps:
        records = [build_record(res, sub, command, scenario) for _, res, sub in jobs]
        staged = list(zip(tmps, jobs, records, strict=True))
        rows = {  # the rows first: the build's id is made from them
            folder.name: _write_config(tmp / res.config.strategy, res, sub, record)
            for tmp, (folder, res, sub), record in staged
        }
        ident = build_id(results, rows)
        for tmp, (folder, res, _), record in staged:
            record["build"] = {"id": ident, "levels": {s.name: rows[s.name] for s in res.subsets}}
            _keep_measured(record, old_build(folder, res.config.strategy))
            write_json(tmp / res.config.strategy / BUILD_JSON, record)
            names = (repo_name(folder, org), load_path(folder, org))
            log = (changelogs or {}).get(folder.name)
            _finish(tmp, folder, res.config.strategy, log, names)
    for folder, res, sub in jobs:
        sub.path = str(folder)
        if sub.rows is None:
            sub.rows_file = folder / res.config.strategy / PARQUET_NAME.format(split="train")
    return folders


def _keep_measured(record: dict[str, Any], old: Mapping[str, Any] | None) -> None:
    """A level's measured difficulty stays with it, marked stale once its rows are another
    build's than the one measured (METHOD.md section 9)."""
    measured = (old or {}).get(MEASURED)
    if measured:
        record[MEASURED] = {**measured, "stale": measured.get("build") != record["build"]["id"]}


def build_id(results: list[BuildResult], rows: Mapping[str, str]) -> str:
    """A build's id: a hash of what it wrote (each level folder's rows, by their sha256) and
    of what was asked (each result's config), so the same inputs give the same id."""
    blob = json.dumps(
        {"rows": dict(rows), "configs": [res.config_dict() for res in results]},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def _finish(
    tmp: Path,
    folder: Path,
    strategy: str,
    changelog: list[dict[str, Any]] | None,
    names: tuple[str, str],
) -> None:
    """The rest of the new repo folder in `tmp`, around its new config: the other configs,
    the changelog, and the card of every config, for the repo (or folder) `names[0]`, loaded
    from `names[1]`."""
    skip = {strategy, CARD, METHOD} | ({CHANGELOG} if changelog is not None else set())
    link_tree(folder, tmp, skip=skip)
    if changelog is not None:
        write_json(tmp / CHANGELOG, changelog)
    write_method(tmp)
    (tmp / CARD).write_text(folder_card(tmp, *names), encoding="utf-8")


def _write_config(where: Path, res: BuildResult, sub: SubsetResult, record: dict[str, Any]) -> str:
    """One strategy config but its build.json: rows, every label's score and the histogram;
    the rows' sizes go in `record`. Returns the rows' sha256."""
    where.mkdir()
    parquet = where / PARQUET_NAME.format(split="train")
    if sub.rows_file is not None:  # written while the build ran
        link_or_copy(str(sub.rows_file), str(parquet))
    else:
        assert sub.rows is not None, "a subset to write carries its rows"
        write_parquet(sub.rows, parquet, subset_features())
    sizes = dataset_sizes({"train": [parquet]}, subset_features())  # the card's dataset_info
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
    return file_sha256(parquet)


def _plot(res: BuildResult, level: str) -> bytes:
    """The config's picture: the score histogram with the cuts, or for the `familiarity`
    strategy the Familiarity of windows along the ranking with the levels' windows."""
    cfg = res.config
    title = score_plot_title(
        cfg.source, cfg.strategy, res.scores.size, list(res.benchmarks), cfg.embedding.model, level
    )
    return strategy(cfg.strategy).plot(res, level, title)


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
    return t.filter(t.column("selected")).column("label").to_pylist()


def old_build(folder: Path, strategy: str) -> dict[str, Any] | None:
    """The build.json of a written config, or None."""
    rec = read_json(folder / strategy / BUILD_JSON)
    return rec if isinstance(rec, dict) else None
