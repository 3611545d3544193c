"""The splitting strategies' one seam: a registry of modules behind one protocol, and nothing
outside them branching on a strategy's name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import builders
from builders.errors import BuildersError
from builders.splits import SplitConfig
from builders.splits.strategies import NAMES, every, strategy
from builders.splits.strategies.base import Strategy
from builders.splits.strategies.familiarity import FamiliarityOptions
from builders.splits.strategies.quantile import QuantileOptions

ROOT = Path(builders.__file__).parent
HOME = ROOT / "splits" / "strategies"
#: The paper's label scores share their strategies' names: `shift/scoring.py` computes and
#: cuts scores by score kind (`SCORES`), below the splitter; no other module may compare.
SCORES = ROOT / "shift" / "scoring.py"


def _name_comparisons(path: Path) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}: {hit}"
        for hit in _name_comparisons_text(path.read_text(encoding="utf-8"))
    ]


def _name_comparisons_text(text: str) -> list[str]:
    """`cfg.strategy == "familiarity"`, `strategy != "max"`, `s.strategy in ("entropy", ...)`:
    a strategy compared with a strategy's name (a metric called `familiarity` is not one)."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if _looked_up_by_name(node):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
            continue
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        named = any(
            isinstance(c, ast.Constant) and c.value in NAMES
            for side in sides
            for c in [side, *getattr(side, "elts", [])]
        )
        if named and any("strategy" in ast.unparse(side) for side in sides):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _looked_up_by_name(node: ast.AST) -> bool:
    """`{"entropy": "e", "max": "m"}.get(cfg.strategy)` or `{...}[strategy]`: a table keyed by
    strategies' names, read with a strategy."""
    if isinstance(node, ast.Subscript):
        table, key = node.value, [node.slice]
    elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "get" and node.args:
        table, key = node.func.value, node.args[:1]  # type: ignore[attr-defined]
    else:
        return False
    named = isinstance(table, ast.Dict) and any(
        isinstance(k, ast.Constant) and k.value in NAMES for k in table.keys
    )
    return named and "strategy" in ast.unparse(key[0])


def test_nothing_outside_a_strategy_branches_on_its_name() -> None:
    found = [
        hit
        for path in sorted(ROOT.rglob("*.py"))
        if HOME not in path.parents and path != SCORES
        for hit in _name_comparisons(path)
    ]
    assert not found, "branch on a strategy's name outside builders/splits/strategies:\n" + (
        "\n".join(found)
    )


def test_the_scan_finds_a_branch() -> None:
    """The check can fail: lines like the old pipeline's and verdicts' are caught."""
    for text in (
        'if cfg.strategy == "familiarity": pass',
        'x = s.strategy != "max"',
        'symbol = {"entropy": "e", "max": "m"}.get(cfg["strategy"], "")',
        'symbol = {"entropy": "e"}[res.config.strategy]',
    ):
        assert _name_comparisons_text(text), text
    assert not _name_comparisons_text('if m in ("familiarity",): pass')  # a metric's name


def test_the_registry_names_every_strategy_once() -> None:
    assert NAMES == ("entropy", "max", "familiarity", "random")  # entropy first: the default
    for name, s in zip(NAMES, every(), strict=True):
        assert isinstance(s, Strategy) and s.name == name and strategy(name) is s
    with pytest.raises(KeyError):
        strategy("stratified")


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        (
            "entropy",
            {"targets": "0.6,0.5,0.4"},
            "--targets is an option of the familiarity strategy",
        ),
        (
            "max",
            {"level_mentions": 500},
            "--level-mentions is an option of the familiarity strategy",
        ),
        ("familiarity", {"match": "mentions"}, "--match is an option of the quantile strategies"),
        ("familiarity", {"medium_band": (0.4, 0.6)}, "--medium-band is an option of the quantile"),
        ("entropy", {"match": "mentions", "max_label_share": 0.5}, "0.5 with --match mentions"),
    ],
)
def test_a_strategy_refuses_the_options_of_another(name: str, options: dict, message: str) -> None:
    """Each strategy owns its options; given with another strategy they are refused, naming
    the strategy that reads them."""
    with pytest.raises(BuildersError, match=message):
        SplitConfig.from_dict({"source": "pilener-sample", "strategy": name, **options})


def test_each_strategy_states_its_promises() -> None:
    fam = SplitConfig("pilener-sample", "familiarity", options=FamiliarityOptions(min_gap=0.07))
    ent = SplitConfig("pilener-sample", "entropy")
    assert strategy("familiarity").promised_gap(fam) == 0.07
    assert strategy("entropy").promised_gap(ent) is None
    assert strategy("entropy").order_remedy and strategy("familiarity").order_remedy is None
    assert (fam.label_share_bound, ent.label_share_bound) == (0.3, None)
    assert "--min-gap" in fam.command_line() and "--min-gap" not in ent.command_line()


def test_a_strategys_options_are_nested_and_read_flat_both_ways() -> None:
    """A strategy's options are its own dataclass in `SplitConfig.options`; build.json's flat
    spelling (every strategy's keys, another's at their defaults) reads back to the same
    config, and another strategy's options object is refused."""
    cfg = SplitConfig.from_dict({"source": "x", "strategy": "familiarity", "min_gap": 0.07})
    assert cfg.options == FamiliarityOptions(min_gap=0.07)
    flat = cfg.to_dict()
    assert flat["min_gap"] == 0.07 and flat["low_quantile"] is None and "options" not in flat
    assert SplitConfig.from_dict(flat) == cfg
    with pytest.raises(BuildersError, match="QuantileOptions given for strategy 'familiarity'"):
        SplitConfig("x", "familiarity", options=QuantileOptions())
