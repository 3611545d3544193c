"""`--strategy random` (METHOD.md section 8): the random label-shift control on the bundled
sample. Levels of whole labels drawn with a seed, disjoint, of one size (a `familiarity` build's
by default), the same bytes for the same seed, and a card that says they are a control."""

from __future__ import annotations

import ast
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import builders
from builders.errors import BuildersError
from builders.shift.specs import EmbeddingSpec
from builders.splits import SplitConfig, build
from builders.splits.strategies.random import RandomOptions
from builders.store import Store

MINI = EmbeddingSpec("all-MiniLM-L6-v2")  # the session sample store holds its vectors


def _random(store: Store, out: Path | None, **options: Any) -> Any:
    cfg = SplitConfig.from_dict(
        {"source": "pilener-sample", "strategy": "random", "leakage": False, **options}
        | {"model": MINI.model}
    )
    (res,) = build(store, cfg, out)
    return res


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, sample_results: dict) -> Iterator[Store]:
    """A copy of the session's sample store (its MiniLM vectors stored)."""
    db = tmp_path_factory.mktemp("random") / "s.duckdb"
    shutil.copy(sample_results["db"], db)
    with Store(db) as s:
        yield s


def test_levels_are_disjoint_whole_labels_of_one_size(store: Store) -> None:
    res = _random(store, None, level_mentions=2000)
    mentions = dict(zip(res.table.labels, res.table.mentions.tolist(), strict=True))
    kept = [set(s.label_counts) for s in res.subsets]
    assert not (kept[0] & kept[1]) and not (kept[1] & kept[2]) and not (kept[0] & kept[2])
    for sub in res.subsets:  # every mention of every label the level keeps
        assert sub.label_counts == {lab: mentions[lab] for lab in sub.label_counts}
        assert sub.selection["draw"] == "random" and sub.selection["size"] == "given"
    sizes = [s.mentions for s in res.subsets]
    largest = max(max(s.label_counts.values()) for s in res.subsets)
    assert max(sizes) <= 2000 and 2000 - min(sizes) < largest  # within one label


def test_the_default_size_is_the_familiarity_build_s(store: Store) -> None:
    fam = build(store, SplitConfig("pilener-sample", "familiarity", embedding=MINI, leakage=False))
    res = _random(store, None)
    size = min(s.mentions for s in fam[0].subsets)
    assert {s.selection["level_mentions"] for s in res.subsets} == {size}
    assert {s.selection["size"] for s in res.subsets} == {"familiarity"}


def test_same_seed_same_bytes_and_the_card(store: Store, tmp_path: Path) -> None:
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        _random(store, tmp_path / name, level_mentions=2000, seed=seed)
    files = sorted(
        p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file()
    )
    assert files and all(
        (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files
    )
    level = Path("pilener-sample-low-shift/random")
    rows = level / "train-00000-of-00001.parquet"  # what was drawn (build.json names the seed)
    assert (tmp_path / "a" / rows).read_bytes() != (tmp_path / "c" / rows).read_bytes()
    card = (tmp_path / "a" / "pilener-sample-low-shift" / "README.md").read_text()
    assert "is a **random label-shift control**" in card
    assert "not ordered by shift" in card and "`--seed 0`" in card
    assert "the size asked for, `--level-mentions`" in card
    assert "strategy: random\n      seed: 0\n      level_mentions: 2000" in card
    assert (
        json.loads((tmp_path / "a" / level / "build.json").read_text())["cuts"]["high"]["seed"] == 0
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_label_share": 0.5}, "--max-label-share caps labels"),
        ({"targets": "0.6,0.5,0.4"}, "--targets is an option of the familiarity strategy"),
        ({"match": "mentions"}, "--match is an option of the quantile strategies"),
        ({"level_mentions": 10}, "--level-mentions 10 is below --min-mentions"),
    ],
)
def test_random_owns_its_options(options: dict, message: str) -> None:
    with pytest.raises(BuildersError, match=message):
        SplitConfig.from_dict({"source": "pilener-sample", "strategy": "random", **options})


def test_random_options_read_flat_both_ways() -> None:
    flat = {"source": "pilener-sample", "strategy": "random", "level_mentions": 500}
    cfg = SplitConfig.from_dict(flat)
    assert cfg.options == RandomOptions(level_mentions=500)
    assert SplitConfig.from_dict(cfg.to_dict()) == cfg


#: What the strategies' selections hold that is theirs (build.json `subset.selection` and
#: `cuts`): only their card text (`cards/_strategy_NAME.md.j2`) reads them.
SELECTION_KEYS = {
    "familiarity": {"ranking", "planned_familiarity", "label_cap", "capped_labels", "min_gap"},
    "quantile": {"side", "quantiles", "thresholds", "matched", "matched_to", "profile"},
    "random": {"draw", "seed", "level_mentions"},
}


def test_hub_reads_no_strategy_s_selection_key() -> None:
    hub = Path(builders.__file__).parent / "hub"
    keys = set().union(*SELECTION_KEYS.values())
    found = [
        f"{p.name}:{node.lineno} {node.value!r}"
        for p in sorted(hub.glob("*.py"))
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and node.value in keys
    ]
    assert not found, f"builders/hub reads a strategy's selection key: {found}"
