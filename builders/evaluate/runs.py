"""Several trained models at once: the paper's Table 3 (macro F1 beside Familiarity, seen
share and r, one row per run) and Table 5 (the levels of one build: each level's F1 with a CI
over seeds beside its Familiarity, and whether F1 falls from low to high), and the measured
difficulty written into each level's build.json and card (METHOD.md section 9).

    runs = read_runs("runs.toml")        [[run]] name, predictions (one per seed), training
    done = evaluate_runs(store, runs, misc="keep", embedding=..., metric=...)
    done.table3(), done.table5(), record_difficulty(done)

A runs file is TOML:

    [[run]]
    name = "low"                                    # how tables name it
    training = "out/demo/pilener-sample-low-shift"  # a stored source, a level folder, a count file
    predictions = ["preds/low-s1", "preds/low-s2"]  # one file or folder per seed
    seeds = [1, 2]                                  # default 0, 1, ...
    model = "GLiNER, all-MiniLM-L6-v2 backbone"     # what was trained, for cards
    steps = 10000
    config = "familiarity"                          # the level folder's config, where it has several
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builders import __version__
from builders.defaults import LEVELS
from builders.deferred import np
from builders.errors import InputError, ScenarioError, opt
from builders.evaluate.evaluation import EvaluateRequest, Evaluation, evaluate
from builders.hub.folder import BUILD_JSON, MEASURED, atomic_dirs, link_tree, read_json, write_json
from builders.hub.manifest import config_entry
from builders.hub.outdir import OutLock
from builders.hub.readme import CARD, folder_card, load_path, repo_name

if TYPE_CHECKING:
    from builders.shift.embedder import Embedder
    from builders.store import Store

RUN_KEYS = {"name", "training", "predictions", "seeds", "model", "steps", "config"}


@dataclass(frozen=True)
class Run:
    """One trained setting: its predictions per seed and the data it was trained on."""

    name: str
    training: str
    predictions: tuple[str, ...]
    seeds: tuple[int, ...]
    model: str | None = None
    steps: int | None = None
    config: str | None = None


def read_runs(path: str | Path) -> list[Run]:
    """The `[[run]]` tables of a runs file, checked (unknown keys, one seed per predictions)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(f"{path}: not a readable TOML runs file ({exc})") from None
    tables = data.get("run")
    if not isinstance(tables, list) or not tables or set(data) != {"run"}:
        raise ScenarioError(f"{path}: a runs file holds [[run]] tables and nothing else")
    runs = []
    for i, t in enumerate(tables, start=1):
        where = f"{path}: run {i} ({t.get('name', 'unnamed')})"
        if set(t) - RUN_KEYS or not {"name", "training", "predictions"} <= set(t):
            raise ScenarioError(f"{where}: keys {sorted(t)}; it takes name, training, "
                                f"predictions and optionally {', '.join(sorted(RUN_KEYS - {'name', 'training', 'predictions'}))}")  # fmt: skip
        preds = t["predictions"] if isinstance(t["predictions"], list) else [t["predictions"]]
        seeds = t.get("seeds", list(range(len(preds))))
        if len(seeds) != len(preds) or len(set(seeds)) != len(seeds):
            raise ScenarioError(f"{where}: {len(preds)} predictions for seeds {seeds}; give one "
                                "predictions file or folder per seed, each seed once")  # fmt: skip
        runs.append(Run(str(t["name"]), str(t["training"]), tuple(map(str, preds)),
                        tuple(int(s) for s in seeds), t.get("model"), t.get("steps"), t.get("config")))  # fmt: skip
    if len({r.name for r in runs}) != len(runs):
        raise ScenarioError(f"{path}: two runs share a name")
    return runs


def ci95(values: Sequence[float]) -> list[float] | None:
    """Student's t 95% interval of the mean over seeds, within F1's bounds [0, 1]; None for
    one seed."""
    from scipy.stats import t

    if len(values) < 2:
        return None
    sem = float(np.std(values, ddof=1)) / len(values) ** 0.5
    mean = float(np.mean(values))
    if sem == 0:
        return [mean, mean]
    return [min(1.0, max(0.0, float(v))) for v in t.interval(0.95, len(values) - 1, mean, sem)]


@dataclass
class RunResult:
    """A run's evaluation per seed, and the F1 of each seed, benchmark and label."""

    run: Run
    seeds: list[Evaluation]

    @property
    def f1s(self) -> list[float]:
        return [e.macro_f1 for e in self.seeds if e.macro_f1 is not None]

    def per_benchmark(self) -> dict[str, float | None]:
        """Each benchmark's micro F1, the mean over seeds."""
        names = [s.name for s in self.seeds[0].scores]
        by = [{s.name: s.f1 for s in e.scores} for e in self.seeds]
        return {n: _mean([b.get(n) for b in by]) for n in names}

    def pooled(self) -> Evaluation:
        """The first seed's evaluation with every label's F1 the mean over seeds (the points
        Table 3's r is read from)."""
        first = self.seeds[0]
        f1: dict[tuple[str, str], list[float | None]] = {}
        for e in self.seeds:
            for p in e.points():
                f1.setdefault((p["benchmark"], p["label"]), []).append(p["f1"])
        points = [{**p, "f1": _mean(f1[(p["benchmark"], p["label"])])} for p in first.points()]
        return replace(first, _points=points)

    def summary(self) -> dict[str, Any]:
        first, f1s = self.seeds[0], self.f1s
        train = first.train.describe() if first.train else None
        views = self.pooled().views() or {}
        rep = first.context.report if first.context else None
        return {
            "name": self.run.name, "training": train, "model": self.run.model,
            "steps": self.run.steps, "seeds": list(self.run.seeds), "f1_by_seed": f1s,
            "f1": _mean(f1s), "f1_sd": float(np.std(f1s, ddof=1)) if len(f1s) > 1 else None,
            "ci": ci95(f1s), "per_benchmark": self.per_benchmark(),
            "familiarity": rep.union_macro if rep else None, "seen_share": rep.overlap if rep else None,
            "pearson": (views.get("pearson") or {}).get("r"),
        }  # fmt: skip


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


@dataclass
class RunsResult:
    """Every run evaluated; Table 3 and Table 5 read from it."""

    runs: list[RunResult]
    misc: str
    notes: list[str] = field(default_factory=list)

    def table3(self) -> list[dict[str, Any]]:
        return [r.summary() for r in self.runs]

    def builds(self) -> dict[tuple[str, str], list[RunResult]]:
        """Runs trained on levels of one build: (build id, config) -> its runs, easy first."""
        out: dict[tuple[str, str], list[RunResult]] = {}
        for r in self.runs:
            t = r.seeds[0].train
            desc = t.describe() if t is not None else {}
            if desc.get("build") and desc.get("level") in LEVELS:
                out.setdefault((desc["build"], str(desc["config"])), []).append(r)
        return {k: sorted(v, key=lambda r: LEVELS.index(_level(r))) for k, v in out.items()}

    def table5(self) -> list[dict[str, Any]]:
        """Per build: each level's F1 (CI over seeds) beside its Familiarity, and whether F1
        falls from low to high over the macro and per benchmark (those that break it named)."""
        return [g for key, runs in self.builds().items() if (g := self._group(key, runs))]

    def _group(self, key: tuple[str, str], runs: list[RunResult]) -> dict[str, Any] | None:
        levels = [{"level": _level(r), **r.summary()} for r in runs]
        if len({lv["level"] for lv in levels}) != len(levels):
            self.notes.append(f"build {key[0]} ({key[1]}): two runs of one level; no Table 5")
            return None
        names = list(levels[0]["per_benchmark"])
        broken = [n for n in names if not _falls([lv["per_benchmark"].get(n) for lv in levels])]
        falls = _falls([lv["f1"] for lv in levels]) if len(levels) > 1 else None
        return {
            "build": key[0],
            "config": key[1],
            "levels": levels,
            "falls": falls,
            "broken": broken,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "misc": self.misc,
            "table3": self.table3(),
            "table5": self.table5(),
            "runs": {r.run.name: [e.to_dict() for e in r.seeds] for r in self.runs},
            "notes": self.notes,
        }


def _level(r: RunResult) -> str:
    t = r.seeds[0].train
    return str(t.describe()["level"]) if t is not None else ""


def _falls(values: Sequence[float | None]) -> bool:
    return None not in values and all(a > b for a, b in pairwise(values))  # type: ignore[operator]


def evaluate_runs(
    store: Store,
    runs: Sequence[Run],
    *,
    misc: str = "keep",
    embedder: Embedder,
    request: EvaluateRequest,
    on_note: Callable[[str], None] | None = None,
    progress: bool = False,
) -> RunsResult:
    """Evaluate every seed of every run with `request`'s settings (its predictions and
    training replaced by the run's); one embedder for all."""
    done = []
    for run in runs:
        seeds = [
            evaluate(store, replace(request, predictions=(p,), training=run.training,
                                    config=run.config, misc=misc),
                     embedder=embedder, on_note=on_note, progress=progress)
            for p in run.predictions
        ]  # fmt: skip
        names = {tuple(s.name for s in e.scores) for e in seeds}
        if len(names) > 1:
            raise InputError(f"run {run.name!r}: its seeds predict different benchmarks: "
                             + "; ".join(", ".join(n) for n in sorted(names)))  # fmt: skip
        done.append(RunResult(run, seeds))
    return RunsResult(done, misc)


def record_difficulty(result: RunsResult, org: str | None = None) -> list[Path]:
    """Write each Table 5 level's measured difficulty into its config's build.json and
    re-render its card (for `org`, as build-splits --org does); the level folders of one build
    are swapped in together, holding their folder's lock, with their manifest entries.
    Returns the folders written."""
    written: list[Path] = []
    for key, runs in result.builds().items():
        group = result._group(key, runs)
        trains = [r.seeds[0].train for r in runs]
        folders = [t.folder for t in trains if t is not None and t.folder is not None]
        if group is None or len(folders) != len(runs) or len({f.parent for f in folders}) != 1:
            result.notes.append(f"build {key[0]}: its levels are not in one folder; not recorded")
            continue
        config = key[1]

        with (
            OutLock(folders[0].parent, "builders evaluate --record"),
            atomic_dirs(folders, partial(_manifest, config, folders)) as tmps,
        ):
            for tmp, folder, lv in zip(tmps, folders, group["levels"], strict=True):
                link_tree(folder, tmp, skip={config, CARD})
                (tmp / config).mkdir()
                link_tree(folder / config, tmp / config, skip={BUILD_JSON})
                record = _current(folder / config / BUILD_JSON, key[0])
                record[MEASURED] = _measured(lv, group, result.misc)
                write_json(tmp / config / BUILD_JSON, record)
                card = folder_card(tmp, repo_name(folder, org), load_path(folder, org))
                (tmp / CARD).write_text(card, encoding="utf-8")
        written += folders
    return written


def _current(path: Path, build: str) -> dict[str, Any]:
    """The level's build.json as it is now, which must be the build that was evaluated."""
    record = read_json(path)
    now = ((record or {}).get("build") or {}).get("id")
    if now != build:
        raise InputError(f"{path}: now of build {now}, not {build} as evaluated (rebuilt "
                         f"meanwhile?); evaluate it again before {opt('record')}")  # fmt: skip
    return dict(record)


def _manifest(config: str, folders: list[Path], tmps: list[Path]) -> dict[str, Any]:
    return {f.name: {config: config_entry(t / config)} for t, f in zip(tmps, folders, strict=True)}


def _measured(level: dict[str, Any], group: dict[str, Any], misc: str) -> dict[str, Any]:
    """What a level's build.json records of its measured difficulty."""
    return {
        "model": level["model"], "steps": level["steps"], "seeds": level["seeds"],
        "f1": level["f1"], "ci": level["ci"], "f1_by_seed": level["f1_by_seed"],
        "per_benchmark": level["per_benchmark"], "familiarity": level["familiarity"],
        "misc": misc, "build": group["build"], "falls": group["falls"], "broken": group["broken"],
        "levels": [{"level": lv["level"], "f1": lv["f1"]} for lv in group["levels"]],
        "toolkit_version": __version__, "stale": False,
    }  # fmt: skip
