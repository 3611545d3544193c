"""The scenarios file: what the project publishes, parsed from `scenarios.toml`.

    [defaults]                      model, k, benchmarks, seed, ... shared by every scenario
    [[scenario]]                    name, source, strategy, levels (kind = "splits", default)
    [[scenario]]                    name, kind = "fewnerd", mode = "intra" | "inter"

A scenario owns its input (`source`, `path`, `options`, `ingest_label_map`, `ingest`,
`revision`, stored as `store_as`); scenarios storing one input agree on all of these. Each
parameter is taken from the scenario, else `[defaults]`, else the built-in default below.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from builders.defaults import SEED, K
from builders.errors import ScenarioError, Surface
from builders.names import check_name, is_hub_id
from builders.shift.specs import EmbeddingSpec, flat
from builders.splits.config import SplitConfig

KINDS = ("splits", "fewnerd")
#: Keys of a `splits` scenario and their defaults: SplitConfig's parameters but
#: `per_benchmark`; `check_model` kept as written (a name or a list), so that scenarios
#: recorded before it took a list keep their keys.
SPLIT_KEYS: dict[str, Any] = {
    k: list(v) if isinstance(v, tuple) else v
    for k, v in SplitConfig.defaults().items()
    if k != "per_benchmark"
} | {"benchmarks": "all", "check_model": None}
#: Keys of a `fewnerd` scenario and their defaults (`FewnerdRequest.from_dict` reads them).
FEWNERD_KEYS = flat(
    {"mode": None, "assignment": "official", "seed": SEED, "k": K, "familiarity": True}
    | {"embedding": EmbeddingSpec()},
    ("mode", "assignment", "seed", "model", "k", "familiarity", "backend", "precision"),
)
COMMON_KEYS = {
    "name", "kind", "source", "path", "store_as", "options", "ingest_label_map", "ingest",
    "revision", "description", "publish",
}  # fmt: skip
#: How a scenario takes new input (`ingest`): its `path` is the whole input, or is added to.
INGEST_MODES = ("replace", "append")
#: The keys that say how a scenario's input is read: scenarios storing one source share them.
INPUT_KEYS = ("source", "path", "options", "ingest_label_map", "ingest", "revision")


class ScenarioKeys(Surface):
    """A scenario's settings named as its keys (`min_labels`, `` `min_gap` 0.05``); others
    (`--db`, reader options) as the surface around it names them."""

    helping = "Scenario keys that help"

    def __init__(self, sc: Scenario, around: Surface):
        self.keys = frozenset(SPLIT_KEYS if sc.kind == "splits" else FEWNERD_KEYS)
        self.around = around

    def option(self, name: str, value: object = None) -> str:
        if name not in self.keys:
            return self.around.option(name, value)
        return f"`{name}`" if value is None or value is True else f"`{name}` {value}"

    def reader_option(self, key: str, value: object = None) -> str:
        return self.around.reader_option(key, value)


@dataclass(frozen=True)
class Scenario:
    """One published build: a source, how it is read, and the build parameters."""

    name: str
    source: str
    kind: str = "splits"
    path: str | None = None
    store_as: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    ingest_label_map: str | None = None  # the ingest's `--label-map` (a path)
    ingest: str = "replace"  # or `append`
    revision: str | None = None  # a Hub dataset's branch, tag or commit (default: main)
    params: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    publish: bool = True

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ScenarioError(
                f"scenario {self.name!r}: unknown kind {self.kind!r}. Valid: {', '.join(KINDS)}"
            )
        if self.ingest not in INGEST_MODES:
            raise ScenarioError(
                f"scenario {self.name!r}: unknown ingest {self.ingest!r}. "
                f"Valid: {', '.join(INGEST_MODES)}"
            )
        if self.kind == "fewnerd" and self.params.get("mode") not in ("intra", "inter"):
            raise ScenarioError(
                f'scenario {self.name!r}: kind = "fewnerd" needs mode = "intra" or "inter"'
            )

    @property
    def stored(self) -> str:
        """The name the source is stored under (and the prefix of its folders)."""
        return self.store_as or self.source

    def folders(self) -> list[str]:
        if self.kind == "fewnerd":
            return [f"fewnerd-{self.params['mode']}"]
        return [f"{self.stored}-{lv}-shift" for lv in self.params["levels"]]

    def to_dict(self) -> dict[str, Any]:
        """The scenario as asked (a run's id hashes it): `revision` only when given, so that
        the runs of scenarios written before it keep their ids."""
        d = {**asdict(self), "options": dict(self.options), "params": dict(self.params)}
        if d["revision"] is None:
            del d["revision"]
        return d


@dataclass
class ScenarioBook:
    scenarios: list[Scenario]
    out: Path


def load_scenarios(path: str | Path) -> ScenarioBook:
    """Read a scenarios file; relative `path`s and `out` are relative to the file's folder."""
    path = Path(path)
    if not path.is_file():
        raise ScenarioError(f"{path}: no scenarios file here (give one with --scenarios)")
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from exc
    return parse_scenarios(doc, base=path.parent, origin=str(path))


def parse_scenarios(
    doc: Mapping[str, Any], base: Path = Path("."), origin: str = "scenarios"
) -> ScenarioBook:
    defaults = dict(doc.get("defaults", {}))
    out = base / os.path.expandvars(str(defaults.pop("out", "out")))  # an absolute one wins
    entries = doc.get("scenario", [])
    if not isinstance(entries, list) or not entries:
        raise ScenarioError(f"{origin}: no [[scenario]] tables")
    scenarios: list[Scenario] = []
    for i, raw in enumerate(entries, start=1):
        name = raw.get("name")
        if not name:
            raise ScenarioError(f"{origin}: scenario #{i} has no name")
        kind = raw.get("kind", "splits")
        keys = SPLIT_KEYS if kind == "splits" else FEWNERD_KEYS
        unknown = sorted(set(raw) - set(keys) - COMMON_KEYS)
        if unknown:
            raise ScenarioError(
                f"{origin}: scenario {name!r}: unknown key {unknown[0]!r}. "
                f"Valid: {', '.join(sorted(set(keys) | COMMON_KEYS))}"
            )
        params = {k: raw.get(k, defaults.get(k, v)) for k, v in keys.items()}
        if kind == "splits":
            params["levels"] = list(params["levels"])
            b = params["benchmarks"]
            params["benchmarks"] = [
                _relative(x.strip(), base)
                for x in (b.split(",") if isinstance(b, str) else list(b))
            ]
            if params["label_map"] is not None:
                params["label_map"] = str(base / os.path.expanduser(str(params["label_map"])))
            if params["medium_band"] is not None:
                params["medium_band"] = list(params["medium_band"])
        scenarios.append(
            Scenario(
                name=name,
                kind=kind,
                source=raw.get("source") or ("fewnerd" if kind == "fewnerd" else ""),
                **_input_keys(raw, defaults, base),
                params=params,
                description=raw.get("description", ""),
                publish=bool(raw.get("publish", True)),
            )
        )
        if not scenarios[-1].source:
            raise ScenarioError(f"{origin}: scenario {name!r} has no source")
        check_name(
            scenarios[-1].stored, f"{origin}: scenario {name!r}: source name", "set `store_as`"
        )
    names = [s.name for s in scenarios]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ScenarioError(f"{origin}: scenario name {dup[0]!r} is used twice")
    _check_shared_inputs(scenarios, origin)
    return ScenarioBook(scenarios, out)


def _input_keys(raw: Mapping[str, Any], defaults: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """How a scenario's input is read (`INPUT_KEYS` but its source, and `store_as`), its
    paths taken from the scenarios file's folder."""
    return {
        "path": _relative_path(raw.get("path"), base, hub=True),
        "store_as": raw.get("store_as"),
        "options": dict(raw.get("options", {})),
        "ingest_label_map": _relative_path(raw.get("ingest_label_map"), base),
        "ingest": raw.get("ingest", defaults.get("ingest", "replace")),
        "revision": None if raw.get("revision") is None else str(raw["revision"]),
    }


def _check_shared_inputs(scenarios: list[Scenario], origin: str) -> None:
    """Scenarios that store their input under one name read it the same way."""
    first: dict[str, Scenario] = {}
    for sc in scenarios:
        other = first.setdefault(sc.stored, sc)
        for key in INPUT_KEYS if other is not sc else ():
            a, b = getattr(other, key), getattr(sc, key)
            if a != b:
                raise ScenarioError(
                    f"{origin}: scenarios {other.name!r} and {sc.name!r} both store their input "
                    f"as {sc.stored!r} but disagree on `{key}` ({a!r} and {b!r}): give them the "
                    f"same `{key}`, or store one apart with `store_as`"
                )


def _relative(entry: str, base: Path) -> str:
    """A `file:PATH` benchmark entry (`NAME=file:PATH` too), PATH read from `base`."""
    name, sep, rest = entry.rpartition("=") if "=file:" in entry else ("", "", entry)
    if not rest.startswith("file:"):
        return entry
    path = base / os.path.expanduser(rest[len("file:") :])
    return f"{name}{sep}file:{path}"


def _relative_path(value: Any, base: Path, *, hub: bool = False) -> str | None:
    """A scenario's file path: `~` and $VARS expanded, read from `base`; left as written when
    absolute, holding an unset $VAR, or (with `hub`) a Hub dataset id with nothing of that
    name beside the file."""
    if value is None:
        return None
    p = os.path.expanduser(os.path.expandvars(str(value)))
    if "$" in p or Path(p).is_absolute():
        return p
    if hub and is_hub_id(p) and not Path(p).suffix and not (base / p).exists():
        return p
    return str(base / p)
