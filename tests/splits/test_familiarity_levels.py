"""`build-splits --strategy familiarity` on the bundled real sample (2,217 Pile-NER passages,
368 types): levels ordered by construction, of one size (the largest that places them),
disjoint, at requested values, each level's Familiarity reproduced from its parquet by
independent code (scripts/verify_levels.py) under the build's model and its check model, the
gaps kept under both; refusals that write nothing."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from helpers import (
    LABELS_A,
    ROOT,
    assert_composition_reported,
    bio_corpus,
    json_result,
    written_composition,
)

from builders.cli.main import build_splits
from builders.errors import CannotBuild
from builders.hub.folder import subset_features, write_parquet
from builders.shift.specs import EmbeddingSpec
from builders.splits import SplitConfig, build
from builders.splits.strategies.familiarity import FamiliarityOptions
from builders.store import Store
from builders.store.ingest import ingest

MINILM, MPNET = "all-MiniLM-L6-v2", "all-mpnet-base-v2"
LEVELS = ("low", "medium", "high")
FOLDERS = [f"pilener-sample-{lv}-shift" for lv in LEVELS]


def _build(sample_results: dict, root: Path, check_model: str | None, min_gap: float) -> dict:
    db = root / "s.duckdb"
    shutil.copy(sample_results["db"], db)
    cfg = SplitConfig(
        "pilener-sample",
        "familiarity",
        embedding=EmbeddingSpec(MINILM),
        check_model=check_model,
        options=FamiliarityOptions(min_gap=min_gap),
    )
    with Store(db) as store:
        (res,) = build(store, cfg, root / "out")
    return {"db": db, "out": root / "out", "result": res}


@pytest.fixture(scope="session")
def familiarity_build(sample_results: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The sample's familiarity levels (MiniLM)."""
    return _build(sample_results, tmp_path_factory.mktemp("familiarity-build"), None, 0.05)


@pytest.fixture(scope="session")
def checked_build(sample_results: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Levels placed under MiniLM and the paper's model (`--check-model`) at the default gap:
    placed under MiniLM alone, medium and high were 0.050 apart under the paper's model; at
    the largest size placed under both, 0.047 apart on the rows written."""
    return _build(sample_results, tmp_path_factory.mktemp("checked-build"), MPNET, 0.05)


def _parquet_counts(folder: Path) -> Counter:
    counts: Counter = Counter()
    table = pq.read_table(next((folder / "familiarity").glob("train-*.parquet")))
    for spans in table.column("spans").to_pylist():
        counts.update(s["label"] for s in spans)
    return counts


def test_levels_fall_by_the_gap_with_one_size_and_no_shared_label(familiarity_build) -> None:
    res = familiarity_build["result"]
    union = [s.familiarity.union_macro for s in res.subsets]
    assert [s.level for s in res.subsets] == list(LEVELS)
    assert union[0] - union[1] >= 0.05 and union[1] - union[2] >= 0.05
    assert res.verdicts.falls["union"]["falls"] and not res.verdicts.failed
    counts = [_parquet_counts(familiarity_build["out"] / f) for f in FOLDERS]
    sizes = [sum(c.values()) for c in counts]
    assert max(sizes) - min(sizes) <= 0.01 * max(sizes)
    assert sizes == [s.mentions for s in res.subsets]
    for a in range(3):
        for b in range(a + 1, 3):
            assert not set(counts[a]) & set(counts[b])
    assert all(len(c) >= 3 for c in counts)
    # a level draws at most K mentions of a label; more only where the sentences of its whole
    # labels hold them (kept, never stripped), and build.json counts those
    for sub, c in zip(res.subsets, counts, strict=True):
        over = sub.selection["written"]["over_cap"]
        assert all(n <= 1000 or n == 1000 + over[lab] for lab, n in c.items())


def _verify(build: dict, capsys: pytest.CaptureFixture[str]) -> str:
    """scripts/verify_levels.py on a build's folders: its output (it must end OK)."""
    import sys

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import verify_levels
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert verify_levels.main([str(build["out"] / f) for f in FOLDERS]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("verdict: OK")
    return out


def test_independent_code_reproduces_every_figure(familiarity_build, capsys) -> None:
    out = _verify(familiarity_build, capsys)
    assert out.count(f"{MINILM}: union") == 3  # every level
    # and what makes the levels comparable, recomputed from the parquet rows
    assert out.count("sentences also in another level") == 3


def test_what_makes_levels_comparable_is_what_the_parquet_holds(familiarity_build) -> None:
    """sentences_shared, effective_labels and the largest label's share, as the result, every
    build.json and every card report them, are what the written rows give."""
    want = assert_composition_reported(familiarity_build["result"].subsets, "familiarity")
    assert all(w["sentences_shared"] > 0 for w in want.values())  # Pile-NER passages are long


@pytest.mark.slow
def test_levels_placed_with_a_check_model_keep_every_gap_under_both(checked_build, capsys) -> None:
    """Recomputed from the parquet rows, every level's Familiarity under each model is
    build.json's, and consecutive levels are --min-gap apart under each (verify_levels)."""
    out = _verify(checked_build, capsys)
    assert out.count(f"{MINILM}: union") == 3 and out.count(f"{MPNET}: union") == 3
    for model in (MINILM, MPNET):
        line = next(x for x in out.splitlines() if x.startswith(f"levels under {model}:"))
        low, medium, high = (float(x.split()[-1]) for x in line.split(":")[1].split(","))
        assert low - medium >= 0.05 and medium - high >= 0.05, line
    # a plan not kept fell short on its written rows, and was larger than the one kept
    selection = checked_build["result"].subsets[0].selection
    for plan in selection.get("plans_not_kept", []):
        assert plan["shortfall"] > 0 and plan["planned"] > selection["level_mentions"]


@pytest.mark.slow
def test_the_check_model_is_reported_and_judged(checked_build) -> None:
    res = checked_build["result"]
    [check] = res.verdicts.check
    assert check["model"] == f"sentence-transformers/{MPNET}"
    values = list(check["falls"]["union"]["values"].values())
    assert check["holds"] and values[0] > values[1] > values[2]
    assert [s.checks[0].union_macro for s in res.subsets] == values
    assert all(gap >= 0.05 for gap in check["gaps"].values()) and not res.verdicts.failed
    build_json = json.loads(
        (checked_build["out"] / FOLDERS[0] / "familiarity" / "build.json").read_text()
    )
    assert build_json["config"]["check_model"] == [MPNET]
    [reported] = build_json["subset"]["check_familiarity"]
    assert reported["model"] == check["model"] and reported["union_macro"] == values[0]
    planned = build_json["subset"]["selection"]["planned_check_familiarity"]
    # the plan is the window's; the level written keeps whole sentences fitted to its size,
    # so its figure may differ from the plan, within the targets' tolerance
    assert planned[check["model"]] == pytest.approx(values[0], abs=0.02)
    card = (checked_build["out"] / FOLDERS[0] / "README.md").read_text()
    assert f"check model** `sentence-transformers/{MPNET}`" in card
    assert "The order over the union holds under both models: **yes**" in card


def test_the_folders_load_and_say_how_they_were_built(familiarity_build) -> None:
    from datasets import load_dataset

    folder = familiarity_build["out"] / FOLDERS[1]
    ds = load_dataset(str(folder), "familiarity", split="train")
    assert ds.num_rows == familiarity_build["result"].subsets[1].sentences
    card = (folder / "README.md").read_text()
    assert "**by their Familiarity** ([METHOD.md](METHOD.md) section 8)" in card
    assert (folder / "METHOD.md").read_text() == (ROOT / "docs" / "METHOD.md").read_text()
    assert "| **medium** |" in card
    scores = pq.read_table(folder / "familiarity" / "scores.parquet").to_pydict()
    assert set(scores) == {"label", "mentions", "rank", "gain", "max", "selected"}
    assert sorted(r for r in scores["rank"] if r >= 0) == list(range(368))


def test_the_same_inputs_give_the_same_bytes(familiarity_build, tmp_path: Path) -> None:
    cfg = SplitConfig("pilener-sample", "familiarity", embedding=EmbeddingSpec(MINILM))
    with Store(familiarity_build["db"]) as store:
        build(store, cfg, tmp_path)
    for folder in FOLDERS:
        for path in sorted((familiarity_build["out"] / folder).rglob("*")):
            if path.is_file():
                again = tmp_path / folder / path.relative_to(familiarity_build["out"] / folder)
                assert again.read_bytes() == path.read_bytes(), path


def _cli(db: Path, out: Path, *args: str):
    base = ["--source", "pilener-sample", "--model", MINILM, "--db", str(db), "--out", str(out)]
    return CliRunner().invoke(build_splits, [*base, "--strategy", "familiarity", *args])


def test_targets_are_met_or_refused_with_the_range(familiarity_build, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    shutil.copy(familiarity_build["db"], db)
    low, medium, high = (s.familiarity.union_macro for s in familiarity_build["result"].subsets)
    targets = (round(low - 0.01, 2), round(medium, 2), round(high - 0.01, 2))
    res = _cli(db, tmp_path / "out", "--targets", ",".join(map(str, targets)), "--json", "-q")
    assert res.exit_code == 0, res.output
    [summary] = json_result(res.output)
    got = [s["familiarity"]["union_macro"] for s in summary["subsets"]]
    assert all(abs(g - t) <= 0.02 for g, t in zip(got, targets, strict=True)), (got, targets)
    assert [s["selection"]["target"] for s in summary["subsets"]] == list(targets)

    refused = _cli(db, tmp_path / "refused", "--targets", "0.99,0.5,0.1")
    assert refused.exit_code == 1
    assert "reach Familiarity" in refused.output and "Nothing was written" in refused.output
    assert not (tmp_path / "refused").exists()


def test_the_default_size_is_the_largest_that_places_the_levels(
    familiarity_build, tmp_path: Path
) -> None:
    """A size 15% larger than the default's does not place the levels (the default was 10,139
    mentions on a corpus where 11,659 placed them as well)."""
    db = tmp_path / "s.duckdb"
    shutil.copy(familiarity_build["db"], db)
    size = familiarity_build["result"].subsets[0].selection["level_mentions"]
    res = _cli(db, tmp_path / "out", "--level-mentions", str(int(size * 1.15)))
    assert res.exit_code == 1, res.output
    assert "Nothing was written" in res.output and not (tmp_path / "out").exists()


def test_the_default_builds_measured_figures_build_as_targets(
    familiarity_build, tmp_path: Path
) -> None:
    """Targets the default levels meet are met, at the default's size."""
    db = tmp_path / "s.duckdb"
    shutil.copy(familiarity_build["db"], db)
    default = familiarity_build["result"].subsets
    targets = ",".join(f"{s.familiarity.union_macro:.4f}" for s in default)
    res = _cli(db, tmp_path / "out", "--targets", targets, "--json", "-q")
    assert res.exit_code == 0, res.output
    [summary] = json_result(res.output)
    for got, was in zip(summary["subsets"], default, strict=True):
        assert got["selection"]["level_mentions"] == was.selection["level_mentions"]
        assert abs(got["familiarity"]["union_macro"] - was.familiarity.union_macro) <= 0.02


def test_a_corpus_of_eight_labels_is_refused_with_why(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        ingest(store, "columns", bio_corpus(tmp_path / "c.txt", LABELS_A[:8], 400), name="tiny")
    res = CliRunner().invoke(
        build_splits,
        ["--source", "tiny", "--strategy", "familiarity", "--model", MINILM, "--db", str(db),
         "--out", str(tmp_path / "out"), "--no-leakage"],
    )  # fmt: skip
    assert res.exit_code == 1
    assert "8 labels cannot give 3 disjoint levels of at least 3 labels each" in res.output
    assert not (tmp_path / "out").exists()


def test_a_quantile_build_whose_order_fails_points_to_the_familiarity_strategy(
    sample_results: dict,
) -> None:
    from builders.splits.strategies.quantile import ORDER_REMEDY

    for strategy in ("entropy", "max"):
        v = sample_results[strategy].verdicts
        order_failed = not all(f["falls"] for f in v.falls.values())
        # a pointer is a note; the failed check it follows is the limitation
        assert (ORDER_REMEDY in v.notes) == order_failed
        assert ORDER_REMEDY not in v.failed


def test_levels_named_in_any_order_are_placed_easy_to_hard(familiarity_build) -> None:
    cfg = SplitConfig(
        "pilener-sample", "familiarity", embedding=EmbeddingSpec(MINILM), levels=("high", "low")
    )
    with Store(familiarity_build["db"]) as store:
        (res,) = build(store, cfg, None)
    low, high = res.subsets
    assert (low.level, high.level) == ("low", "high")
    assert low.familiarity.union_macro - high.familiarity.union_macro >= 0.05


def test_the_cards_load_line_works_as_printed(
    familiarity_build, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built with a relative --out, the card's python block runs from where the build ran."""
    import re

    monkeypatch.chdir(tmp_path)
    cfg = SplitConfig(
        "pilener-sample", "familiarity", embedding=EmbeddingSpec(MINILM), levels=("low", "high")
    )
    with Store(familiarity_build["db"]) as store:
        (res,) = build(store, cfg, Path("runs/out"))
    card = (tmp_path / "runs/out/pilener-sample-low-shift/README.md").read_text()
    block = re.search(r"```python\n(.*?)```", card, re.S)
    assert block and 'load_dataset("runs/out/pilener-sample-low-shift"' in block[1]
    scope: dict = {}
    exec(block[1], scope)  # the card's own lines
    assert scope["ds"].num_rows == res.subsets[0].sentences
    assert "builders export-gliner runs/out/pilener-sample-low-shift --config" in card


def test_rows_written_as_they_come_equal_the_rows_held_in_memory(
    familiarity_build, tmp_path: Path
) -> None:
    """A build with `out` streams each level's rows to its parquet file (a large corpus's
    levels are never held in memory); without `out` they are kept as a table. Same rows, the
    same counts, the capped labels' included."""
    cfg = SplitConfig("pilener-sample", "familiarity", embedding=EmbeddingSpec(MINILM))
    with Store(familiarity_build["db"]) as store:
        (held,) = build(store, cfg)
    written = familiarity_build["result"]
    assert any(lv.caps for lv in held.levels)  # some label is kept in part
    for mem, disk in zip(held.subsets, written.subsets, strict=True):
        assert mem.rows is not None and mem.rows_file is None
        assert disk.rows is None and disk.rows_file is not None
        table = pq.read_table(disk.rows_file)
        assert table.equals(mem.rows.cast(table.schema))
        write_parquet(mem.rows, tmp_path / "held.parquet", subset_features())
        assert (tmp_path / "held.parquet").read_bytes() == disk.rows_file.read_bytes()
        assert (mem.sentences, mem.mentions, mem.label_counts) == (
            disk.sentences,
            disk.mentions,
            disk.label_counts,
        )


def _table_row(output: str, first: str) -> list[str]:
    """The cells of the printed table's row whose first cell is `first`."""
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if cells and cells[0] == first:
            return cells
    raise AssertionError(f"no row {first!r} in:\n{output}")


def test_what_the_build_prints_agrees_with_what_it_wrote(familiarity_build, tmp_path: Path) -> None:
    """The table's title states the levels' sizes as written (never a planned size the rows
    pass), its rows the written figures, and the leakage lines name every benchmark."""
    db = tmp_path / "s.duckdb"
    shutil.copy(familiarity_build["db"], db)
    res = _cli(db, tmp_path / "out")
    assert res.exit_code == 0, res.output
    folders = {lv: tmp_path / "out" / f for lv, f in zip(LEVELS, FOLDERS, strict=True)}
    want = written_composition(folders, "familiarity")
    title = next(line for line in res.stdout.splitlines() if "label-shift subsets" in line)
    sizes = [int(_table_row(res.stdout, lv)[2].replace(",", "")) for lv in LEVELS]
    planned = familiarity_build["result"].subsets[0].selection["level_mentions"]
    assert max(sizes) <= planned  # fitted to the size on what they write, never past it
    assert f"levels of {min(sizes):,}-{max(sizes):,} mentions, {planned:,} planned," in title
    for lv in LEVELS:
        w, cells = want[lv], _table_row(res.stdout, lv)
        largest = f"{w['largest_label']['label']} {w['largest_label']['share']:.1%}"
        assert cells[4:7] == [f"{w['sentences_shared']:,}", f"{w['effective_labels']:.1f}", largest]
    assert "<name>" not in res.output
    not_scanned = ["crossner-literature", "crossner-music", "crossner-politics", "crossner-science"]
    line = next(
        x for x in res.output.splitlines() if x.startswith("leakage:") and "not scanned" in x
    )
    assert all(name in line for name in not_scanned), line


def test_a_pointer_to_the_familiarity_strategy_is_a_note(
    sample_results: dict, tmp_path: Path
) -> None:
    """An entropy build whose order fails: the failed check is a `limitation:`, the pointer
    to `--strategy familiarity` a `note:`."""
    from builders.splits.strategies.quantile import ORDER_REMEDY

    db = tmp_path / "s.duckdb"
    shutil.copy(sample_results["db"], db)
    res = CliRunner().invoke(
        build_splits,
        ["--source", "pilener-sample", "--model", MINILM, "--db", str(db), "--out",
         str(tmp_path / "out"), "--strategy", "entropy", "--medium-band", "0.45", "0.55"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert any(x.startswith("limitation: Familiarity does not fall") for x in lines)
    assert f"note: {ORDER_REMEDY}" in lines
    assert not [x for x in lines if x.startswith("limitation:") and "--strategy familiarity" in x]


def test_written_levels_short_of_the_gap_are_placed_again_smaller(
    familiarity_build, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the written levels of the largest size miss --min-gap (the plan has no slack
    there), the levels are placed again 5% smaller, and the card and build.json say so; the
    plan not kept is recorded with its shortfall. At a size given by --level-mentions the size
    is kept and the gap widened instead."""
    import builders.splits.strategies.familiarity as familiarity

    real = familiarity._gap_shortfall
    calls: list[int] = []

    def first_short(cfg, table, sims, fitted):  # the first plan's written levels fall short
        calls.append(len(calls))
        return 0.004 if len(calls) == 1 else real(cfg, table, sims, fitted)

    monkeypatch.setattr(familiarity, "_gap_shortfall", first_short)
    db = tmp_path / "s.duckdb"
    shutil.copy(familiarity_build["db"], db)
    largest = familiarity_build["result"].subsets[0].selection["level_mentions"]
    cfg = SplitConfig("pilener-sample", "familiarity", embedding=EmbeddingSpec(MINILM))
    with Store(db) as store:
        (res,) = build(store, cfg, tmp_path / "out")
    sel = res.subsets[0].selection
    assert sel["size"] == "stepped" and sel["level_mentions"] == int(largest * 0.95)
    assert sel["plans_not_kept"] == [{"planned": largest, "min_gap": 0.05, "shortfall": 0.004}]
    assert not res.verdicts.failed
    card = (tmp_path / "out" / FOLDERS[0] / "README.md").read_text()
    assert "whose written levels keep the gaps" in card

    calls.clear()
    given = replace(cfg, options=FamiliarityOptions(level_mentions=int(largest * 0.8)))
    with Store(db) as store:
        (res,) = build(store, given, None)
    sel = res.subsets[0].selection
    assert sel["level_mentions"] == int(largest * 0.8) and sel["size"] == "given"
    assert sel["placed_with_gap"] == pytest.approx(0.05 + 0.004 + 0.002)


def test_a_given_size_whose_gap_never_holds_on_the_rows_is_refused(
    familiarity_build, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a size given by --level-mentions the gap is widened where the written levels fall
    short; when no placement's written levels keep it, the build is refused with the closest
    one's figures under every model, and nothing is written (README: "or refuses")."""
    import builders.splits.strategies.familiarity as familiarity

    monkeypatch.setattr(familiarity, "_gap_shortfall", lambda *a: 0.2)  # never holds
    db = tmp_path / "s.duckdb"
    shutil.copy(familiarity_build["db"], db)
    size = familiarity_build["result"].subsets[0].selection["level_mentions"] // 2
    cfg = SplitConfig(
        "pilener-sample",
        "familiarity",
        embedding=EmbeddingSpec(MINILM),
        options=FamiliarityOptions(level_mentions=size),
    )
    with Store(db) as store, pytest.raises(CannotBuild) as refused:
        build(store, cfg, tmp_path / "out")
    text = str(refused.value)
    assert "the levels written miss --min-gap 0.05 in the one placement tried" in text
    assert f"({size:,} planned), gives sentence-transformers/all-MiniLM-L6-v2: low " in text
    assert "Nothing was written. Options that help: --targets" in text
    assert not (tmp_path / "out").exists()


def test_the_dials_legend_gives_the_written_levels_familiarity(
    familiarity_build: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`scores.png` names each level by the Familiarity of the rows it wrote (what the card
    and the table say), the window's beside it as planned where the two differ: the legend
    gave the planned figure alone (a --targets build's low level: 0.532, where it wrote 0.526)."""
    from matplotlib.axes import Axes

    from builders.splits.strategies import strategy

    labels: list[str] = []
    real = Axes.hlines

    def recorded(self: Axes, *args: object, **kwargs: object) -> object:
        labels.append(str(kwargs.get("label")))
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Axes, "hlines", recorded)
    res = familiarity_build["result"]
    strategy("familiarity").plot(res, "low", "title")
    want = []
    for sub in res.subsets:
        written, planned = (
            f"{sub.familiarity.union_macro:.3f}",
            f"{res.cuts[sub.level].familiarity:.3f}",
        )
        want.append(
            f"{sub.level} shift ({written}"
            + (f", planned {planned})" if planned != written else ")")
        )
    assert labels == want
    assert any("planned" in lab for lab in labels)  # the sample's levels differ from their windows
