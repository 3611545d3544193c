"""Several trained models at once: the paper's Table 3 (one row per run) and Table 5 (the
levels of one build, and whether F1 falls from low to high), and the measured difficulty
written into each level's build.json and card (METHOD.md section 9). A runs file is TOML,
its relative paths read from its own folder:

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

import os
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
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
from builders.hub.readme import CARD, folder_card

if TYPE_CHECKING:
    from builders.shift.embedder import Embedder
    from builders.store import Store

#: What the card of a local folder (not a Hub repo) says above its `load_dataset` line.
LOCAL_CARD = "# a local folder: run from where it was written"
#: A run's keys and the types they take (predictions: a path or a list of paths).
RUN_KEYS: dict[str, type | tuple[type, ...]] = {
    "name": str, "training": str, "predictions": (str, list), "seeds": list, "model": str,
    "steps": int, "config": str,
}  # fmt: skip


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
    """The `[[run]]` tables of a runs file, checked, relative paths read from its folder (a
    training name that is no path stays a source name)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ScenarioError(f"{path}: not a readable TOML runs file ({exc})") from None
    tables = data.get("run")
    if (
        set(data) != {"run"}
        or not isinstance(tables, list)
        or not all(isinstance(t, dict) for t in tables)
    ):
        raise ScenarioError(f"{path}: a runs file holds [[run]] tables and nothing else")
    runs = [
        _run(t, f"{path}: run {i} ({t.get('name', 'unnamed')})", path.parent)
        for i, t in enumerate(tables, 1)
    ]
    if len({r.name for r in runs}) != len(runs):
        raise ScenarioError(f"{path}: two runs share a name")
    return runs


def _run(t: dict[str, Any], where: str, base: Path) -> Run:
    wrong = [
        f"unknown key {k!r}" if k not in RUN_KEYS else f"{k} = {v!r} is not of its type"
        for k, v in t.items()
        if k not in RUN_KEYS or not isinstance(v, RUN_KEYS[k]) or isinstance(v, bool)
    ]
    wrong += [f"no {k}" for k in ("name", "training", "predictions") if k not in t]  # fmt: skip
    if wrong:
        raise ScenarioError(f"{where}: {'; '.join(wrong)}. A run takes name, training, predictions "
                            "(text: a path, or a list of paths), and optionally seeds (a list of whole "
                            "numbers), model and config (text), steps (a whole number)")  # fmt: skip
    preds = t["predictions"] if isinstance(t["predictions"], list) else [t["predictions"]]
    seeds = t.get("seeds", list(range(len(preds))))
    if not preds or not all(isinstance(p, str) for p in preds):
        raise ScenarioError(f"{where}: predictions are no paths: {preds}")
    if (
        len(seeds) != len(preds)
        or len(set(seeds)) != len(seeds)
        or not all(type(s) is int for s in seeds)
    ):
        raise ScenarioError(f"{where}: {len(preds)} predictions for seeds {seeds}; give one "
                            "predictions file or folder per seed, each seed a whole number, once")  # fmt: skip
    training = _path(t["training"], base)
    return Run(t["name"], training if Path(training).exists() else t["training"],
               tuple(_path(p, base) for p in preds), tuple(seeds), t.get("model"), t.get("steps"), t.get("config"))  # fmt: skip


def _path(value: str, base: Path) -> str:
    """A path of the runs file (`NAME=PATH` keeps its name), `~` expanded, read from `base`."""
    name, sep, rest = value.rpartition("=") if re.match(r"^[\w.-]+=", value) else ("", "", value)
    return f"{name}{sep}{base / os.path.expanduser(rest)}"


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


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


@dataclass
class RunResult:
    """A run's evaluation per seed, summed up once (`summary`)."""

    run: Run
    seeds: list[Evaluation]

    @cached_property
    def summary(self) -> dict[str, Any]:
        """Macro F1 per seed, mean, spread and CI; each benchmark's mean F1; the sentences
        scored; Familiarity, seen share and Pearson r over the labels' F1 averaged over seeds."""
        first = self.seeds[0]
        f1s = [f for e in self.seeds if (f := e.macro_f1) is not None]
        pooled: dict[tuple[str, str], list[float | None]] = {}
        for e in self.seeds:
            for p in e.points:
                pooled.setdefault((p["benchmark"], p["label"]), []).append(p["f1"])
        views = (
            first.pooled(
                [{**p, "f1": _mean(pooled[p["benchmark"], p["label"]])} for p in first.points]
            )
            or {}
        )
        rep = first.context.report if first.context else None
        return {
            "name": self.run.name, "training": first.train.describe() if first.train else None,
            "model": self.run.model, "steps": self.run.steps, "seeds": list(self.run.seeds),
            "f1_by_seed": f1s, "f1": _mean(f1s), "f1_sd": float(np.std(f1s, ddof=1)) if len(f1s) > 1 else None,
            "ci": ci95(f1s), "benchmarks": {s.name: _mean([e.benchmark_f1[s.name] for e in self.seeds]) for s in first.scores},
            "sentences": {s.name: [s.scored, s.sentences] for s in first.scores if s.scored is not None},
            "familiarity": rep.union_macro if rep else None, "seen_share": rep.overlap if rep else None,
            "pearson": (views.get("pearson") or {}).get("r"),
        }  # fmt: skip

    @property
    def level(self) -> str | None:
        return (self.summary["training"] or {}).get("level")


def _falls(values: Sequence[float | None]) -> bool:
    return None not in values and all(a > b for a, b in pairwise(values))  # type: ignore[operator]


@dataclass
class RunsResult:
    """Every run evaluated; Table 3 and Table 5 are read from it, once each."""

    runs: list[RunResult]
    misc: str
    notes: list[str] = field(default_factory=list)

    @cached_property
    def table3(self) -> list[dict[str, Any]]:
        return [r.summary for r in self.runs]

    @cached_property
    def table5(self) -> list[dict[str, Any]]:
        """Per build and config trained on: each level's summary, and whether F1 falls from low
        to high (the benchmarks that break it named); none, with a note, where levels were
        scored on different sentences or a level has two runs."""
        builds: dict[tuple[str, str], list[RunResult]] = {}
        for r in self.runs:
            t = r.summary["training"] or {}
            if t.get("build") and r.level in LEVELS:
                builds.setdefault((t["build"], str(t["config"])), []).append(r)
        out = []
        for (build, config), runs in builds.items():
            runs.sort(key=lambda r: LEVELS.index(str(r.level)))
            why = ("two runs of one level" if len({r.level for r in runs}) < len(runs) else
                   "its levels were scored on different benchmarks or sentences"
                   if len({str(r.summary["sentences"]) for r in runs}) > 1 else None)  # fmt: skip
            if why:
                self.notes.append(f"build {build} ({config}): {why}; no Table 5")
                continue
            levels = [{"level": r.level, **r.summary} for r in runs]
            broken = [
                n
                for n in levels[0]["benchmarks"]
                if not _falls([lv["benchmarks"][n] for lv in levels])
            ]
            falls = _falls([lv["f1"] for lv in levels]) if len(levels) > 1 else None
            out.append({"build": build, "config": config, "levels": levels, "falls": falls,
                        "broken": broken, "folders": [r.seeds[0].train.folder for r in runs]})  # type: ignore[union-attr]  # fmt: skip
        return out

    def to_dict(self) -> dict[str, Any]:
        t5 = [{k: v for k, v in g.items() if k != "folders"} for g in self.table5]
        return {
            "misc": self.misc, "table3": self.table3, "table5": t5,
            "runs": {r.run.name: [e.to_dict() for e in r.seeds] for r in self.runs},
            "notes": [*dict.fromkeys(n for r in self.runs for e in r.seeds for n in e.notes()), *self.notes],
        }  # fmt: skip


def evaluate_runs(
    store: Store,
    runs: Sequence[Run],
    *,
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
            evaluate(store, replace(request, predictions=(p,), training=run.training, config=run.config),
                     embedder=embedder, on_note=on_note, progress=progress)
            for p in run.predictions
        ]  # fmt: skip
        names = {tuple(s.name for s in e.scores) for e in seeds}
        if len(names) > 1:
            raise InputError(f"run {run.name!r}: its seeds predict different benchmarks: "
                             + "; ".join(", ".join(n) for n in sorted(names)))  # fmt: skip
        done.append(RunResult(run, seeds))
    return RunsResult(done, request.misc)


def record_difficulty(result: RunsResult) -> list[Path]:
    """Write each Table 5 level's measured difficulty into its config's build.json and card
    (named as it was); one build's level folders swap in together under their folder's lock,
    with their manifest entries. Returns the config folders written (FOLDER/CONFIG)."""
    written: list[Path] = []
    for group in result.table5:
        folders, config = group["folders"], group["config"]
        if len({f.parent for f in folders}) != 1:
            result.notes.append(
                f"build {group['build']}: its levels are not in one folder; not recorded"
            )
            continue
        with (
            OutLock(folders[0].parent, f"builders evaluate {opt('record')}", elsewhere=False),
            atomic_dirs(folders, partial(_manifest, config, folders)) as tmps,
        ):
            for tmp, folder, lv in zip(tmps, folders, group["levels"], strict=True):
                link_tree(folder, tmp, skip={config, CARD})
                (tmp / config).mkdir()
                link_tree(folder / config, tmp / config, skip={BUILD_JSON})
                record = _current(folder / config / BUILD_JSON, group["build"])
                write_json(
                    tmp / config / BUILD_JSON,
                    {**record, MEASURED: _measured(lv, group, result.misc)},
                )
                (tmp / CARD).write_text(folder_card(tmp, *_card_names(folder)), encoding="utf-8")
        written += [folder / config for folder in folders]
    return written


def _card_names(folder: Path) -> tuple[str, str]:
    """The repo name and `load_dataset` path the folder's card gives now (`org/name`, or the
    local folder as it was named; the folder's name where it has no card)."""
    card = (folder / CARD).read_text(encoding="utf-8") if (folder / CARD).is_file() else ""
    loads = re.search(r'load_dataset\("([^"]+)"', card)
    if loads is None:
        return folder.name, folder.name
    return (folder.name if LOCAL_CARD in card else loads.group(1)), loads.group(1)


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
        "benchmarks": level["benchmarks"], "sentences": level["sentences"],
        "familiarity": level["familiarity"], "misc": misc, "build": group["build"],
        "falls": group["falls"], "broken": group["broken"],
        "levels": [{"level": lv["level"], "f1": lv["f1"]} for lv in group["levels"]],
        "toolkit_version": __version__, "stale": False,
    }  # fmt: skip
