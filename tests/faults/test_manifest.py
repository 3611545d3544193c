"""A build's levels come from one build, checked on read: its id in each build.json, the
manifest written last in --out, and `hub.manifest.check_levels` in publish, export-gliner
and scripts/verify_levels.py. A killed build, a file from another build or two builds' levels
read together are refused with one line naming them; a folder without manifest is read with
a note; the same inputs give the same manifest and build.json bytes."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner

from builders.cli.main import cli
from builders.errors import BuildersError, BuildersNote
from builders.hub.manifest import check_levels, file_sha256
from builders.hub.outdir import JOURNAL, MANIFEST, OutLock

MINILM = "all-MiniLM-L6-v2"
ROOT = Path(__file__).resolve().parents[2]
LEVELS = ("low", "medium", "high")
NAMES = [f"pilener-sample-{lv}-shift" for lv in LEVELS]
PARQUET = "train-00000-of-00001.parquet"
#: Another build of the same levels: more labels in the low level, the others' rows alike.
OTHER = ("--low-quantile", "0.98")


def build_args(db: Path, out: Path, *extra: str) -> list[str]:
    return [
        "build-splits", "--source", "pilener-sample", "--strategy", "max", "--model", MINILM,
        "--no-leakage", "--db", str(db), "--out", str(out), "-q", *extra,
    ]  # fmt: skip


def build(db: Path, out: Path, *extra: str) -> Path:
    res = CliRunner().invoke(cli, build_args(db, out, *extra))
    assert res.exit_code == 0, res.output
    return out


def levels(out: Path) -> list[Path]:
    return [out / name for name in NAMES]


def copy_out(out: Path, where: Path) -> Path:
    shutil.copytree(out, where)
    return where


def publish_dry_run(folders: list[Path]) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["publish", *map(str, folders), "--org", "org", "--dry-run"])
    return res.exit_code, res.output


def export(folder: Path, out: Path) -> tuple[int, str]:
    res = CliRunner().invoke(cli, ["export-gliner", str(folder), "--out", str(out)])
    return res.exit_code, res.output


def verify(folders: list[Path], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """scripts/verify_levels.py up to its manifest check (it refuses before any embedding)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import verify_levels
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    code = verify_levels.main([*map(str, folders), "--config", "max"])
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def db(sample_results: dict, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the session sample's store (its MiniLM vectors cached: nothing embeds)."""
    path = tmp_path_factory.mktemp("manifest") / "s.duckdb"
    shutil.copy(sample_results["db"], path)
    return path


@pytest.fixture(scope="module")
def base(db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build's three levels (max). Read only: tests copy it."""
    return build(db, tmp_path_factory.mktemp("base") / "out")


@pytest.fixture(scope="module")
def low_rebuilt(db: Path, base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`base` with its low level built again, alone, by another build. Read only."""
    out = copy_out(base, tmp_path_factory.mktemp("low-rebuilt") / "out")
    return build(db, out, "--levels", "low", *OTHER)


# ------------------------------------------------------------------ a build and its record
def test_a_build_records_its_id_and_its_files(base: Path) -> None:
    manifest = json.loads((base / MANIFEST).read_text(encoding="utf-8"))
    assert sorted(manifest["folders"]) == sorted(NAMES)
    rows = {name: file_sha256(base / name / "max" / PARQUET) for name in NAMES}
    ids = set()
    for name in NAMES:
        entry = manifest["folders"][name]["max"]
        record = json.loads((base / name / "max" / "build.json").read_text(encoding="utf-8"))
        assert record["build"]["levels"] == rows  # each level knows the others' rows
        assert entry["build"] == record["build"]["id"] and entry["levels"] == sorted(NAMES)
        files = {p.name: file_sha256(p) for p in (base / name / "max").iterdir()}
        assert entry["files"] == files and PARQUET in files and "build.json" in files
        ids.add(entry["build"])
    assert len(ids) == 1
    assert sorted(p.name for p in base.iterdir() if p.name.startswith(".")) == [MANIFEST]


def test_a_build_reads_back_clean_in_publish_export_and_check(base: Path, tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", BuildersNote)
        check_levels(levels(base), "max")
        check_levels(levels(base))
    code, output = publish_dry_run(levels(base))
    assert code == 0 and "note:" not in output, output
    assert output.count("would push org/pilener-sample-") == 3
    code, output = export(base / NAMES[0], tmp_path / "low.json")
    # no note about the build (its manifest); the export's own note on estimated tokens stays
    assert code == 0 and "not in a build manifest" not in output, output
    assert [x for x in output.splitlines() if x.startswith("note:")] == [
        "note: tokens are estimated high; --tokenizer with the encoder's tokenizer cuts rows "
        "only where it must"
    ], output
    assert (tmp_path / "low.json").exists()


def test_the_same_inputs_give_the_same_manifest_and_build_json(
    db: Path, base: Path, tmp_path: Path
) -> None:
    again = build(db, tmp_path / "out")
    assert (again / MANIFEST).read_bytes() == (base / MANIFEST).read_bytes()
    for name in NAMES:
        for file in ("build.json", PARQUET):
            assert (again / name / "max" / file).read_bytes() == (
                base / name / "max" / file
            ).read_bytes(), f"{name}/max/{file}"


# ------------------------------------------------------------------ a killed build
KILL_BETWEEN_SWAPS = """
import os, signal, sys
from builders.hub import folder
real, made = folder.swap_in, []
def swap_then_die(tmp, target):
    if made:
        os.kill(os.getpid(), signal.SIGKILL)
    made.append(target)
    return real(tmp, target)
folder.swap_in = swap_then_die
from builders.cli.main import cli
cli(sys.argv[1:])
"""


def test_a_build_killed_between_swaps_is_refused_until_the_next_build(
    db: Path, base: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = copy_out(base, tmp_path / "out")
    args = build_args(db, out, *OTHER)
    run = subprocess.run([sys.executable, "-c", KILL_BETWEEN_SWAPS, *args], cwd=ROOT)
    assert run.returncode == -signal.SIGKILL
    assert (out / JOURNAL).exists()  # the low level is the new build's, the others the old
    with pytest.raises(BuildersError, match="was interrupted") as err:
        check_levels(levels(out), "max")
    assert str(out) in str(err.value) and "run any build into it again" in str(err.value)
    assert "\n" not in str(err.value)
    code, output = publish_dry_run(levels(out))
    assert code == 1 and "was interrupted" in output and "would push" not in output, output
    code, output = export(out / NAMES[2], tmp_path / "high.json")
    assert code == 1 and "was interrupted" in output and not (tmp_path / "high.json").exists()
    code, err_text = verify(levels(out), capsys)
    assert code == 1 and "was interrupted" in err_text
    # the next build finishes the killed one's swaps first, then writes its own
    build(db, out)
    assert not (out / JOURNAL).exists()
    check_levels(levels(out), "max")
    assert (out / MANIFEST).read_bytes() == (base / MANIFEST).read_bytes()


RECORD_THEN_DIE = """
import os, signal, sys
from pathlib import Path
from builders.hub import folder
from builders.hub.manifest import config_entry
out = Path(sys.argv[1])
def die(*args):
    os.kill(os.getpid(), signal.SIGKILL)
folder.merge_manifest = die  # every swap made, the manifest not yet written
def entries(tmps):
    return {name: {"c": config_entry(t / "c")} for name, t in zip("ab", tmps)}
with folder.atomic_dirs([out / "a", out / "b"], entries) as tmps:
    for t in tmps:
        (t / "c").mkdir()
        (t / "c" / "build.json").write_text('{"build": {"id": "new", "levels": {"a": 1, "b": 2}}}')
"""


def test_a_run_killed_before_its_manifest_has_it_written_by_the_next_one(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    run = subprocess.run([sys.executable, "-c", RECORD_THEN_DIE, str(out)], cwd=ROOT)
    assert run.returncode == -signal.SIGKILL
    assert (out / JOURNAL).exists() and not (out / MANIFEST).exists()
    with pytest.raises(BuildersError, match="was interrupted"):
        check_levels([out / "a", out / "b"])
    with OutLock(out, "next run"):  # any run into --out finishes it
        pass
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "a", "b"]
    manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    assert {f: e["c"]["build"] for f, e in manifest["folders"].items()} == {"a": "new", "b": "new"}
    check_levels([out / "a", out / "b"])


# ------------------------------------------------------------------ files of two builds
def test_a_parquet_from_another_build_is_refused_naming_it(
    base: Path, low_rebuilt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = copy_out(base, tmp_path / "out")
    theirs = low_rebuilt / NAMES[0] / "max" / PARQUET
    ours = out / NAMES[0] / "max" / PARQUET
    assert file_sha256(theirs) != file_sha256(ours)
    shutil.copyfile(theirs, ours)
    with pytest.raises(BuildersError, match="differs from what its build") as err:
        check_levels(levels(out), "max")
    assert str(err.value).startswith(f"{ours}: ") and "\n" not in str(err.value)
    code, output = publish_dry_run(levels(out))
    assert code == 1 and str(ours) in output and "would push" not in output, output
    code, output = export(out / NAMES[0], tmp_path / "low.json")
    assert code == 1 and str(ours) in output, output
    code, err_text = verify(levels(out), capsys)
    assert code == 1 and str(ours) in err_text


def test_a_file_added_or_missing_is_refused_naming_it(base: Path, tmp_path: Path) -> None:
    out = copy_out(base, tmp_path / "out")
    extra = out / NAMES[1] / "max" / "train-00001-of-00002.parquet"
    shutil.copyfile(out / NAMES[1] / "max" / PARQUET, extra)
    with pytest.raises(BuildersError, match="not written by its build") as err:
        check_levels(levels(out))
    assert str(err.value).startswith(f"{extra}: ")
    extra.unlink()
    (out / NAMES[1] / "max" / "scores.png").unlink()
    with pytest.raises(BuildersError, match=r"scores\.png: missing"):
        check_levels(levels(out))


def test_levels_of_two_builds_read_together_are_refused_naming_both(
    low_rebuilt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = json.loads((low_rebuilt / MANIFEST).read_text(encoding="utf-8"))["folders"]
    low, medium = (manifest[n]["max"]["build"] for n in NAMES[:2])
    assert low != medium and manifest[NAMES[0]]["max"]["levels"] == [NAMES[0]]
    check_levels([low_rebuilt / NAMES[0]], "max")  # each level alone is as its build wrote it
    check_levels(levels(low_rebuilt)[1:], "max")
    with pytest.raises(BuildersError, match="levels of two builds") as err:
        check_levels(levels(low_rebuilt), "max")
    text = str(err.value)
    for part in (low_rebuilt / NAMES[0], low_rebuilt / NAMES[1], low, medium):
        assert str(part) in text
    code, output = publish_dry_run(levels(low_rebuilt))
    assert code == 1 and "levels of two builds" in output, output
    code, err_text = verify(levels(low_rebuilt), capsys)
    assert code == 1 and "levels of two builds" in err_text


def test_levels_built_by_separate_runs_are_refused_together(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--levels low,high`, then `--levels medium` into the same --out: neither build wrote
    the other's level, but their names make them one source's levels: refused together, each
    build's own levels still read."""
    out = build(db, tmp_path / "out", "--levels", "low,high")
    build(db, out, "--levels", "medium")
    manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))["folders"]
    assert manifest[NAMES[1]]["max"]["levels"] == [NAMES[1]]
    assert manifest[NAMES[0]]["max"]["build"] != manifest[NAMES[1]]["max"]["build"]
    check_levels([out / NAMES[0], out / NAMES[2]], "max")
    check_levels([out / NAMES[1]], "max")
    with pytest.raises(BuildersError, match="levels of two builds") as err:
        check_levels(levels(out), "max")
    assert str(out / NAMES[1] / "max") in str(err.value)
    code, output = publish_dry_run(levels(out))
    assert code == 1 and "levels of two builds" in output, output
    code, err_text = verify(levels(out), capsys)
    assert code == 1 and "levels of two builds" in err_text


def test_levels_of_other_sources_are_read_together(base: Path, tmp_path: Path) -> None:
    """Two sources' levels (built apart) are not one source's levels: read together."""
    out = copy_out(base, tmp_path / "out")
    manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    other = "other-sample-medium-shift"
    shutil.copytree(out / NAMES[1], out / other)
    entry = dict(manifest["folders"][NAMES[1]]["max"], build="0" * 16, levels=[other])
    manifest["folders"][other] = {"max": entry}
    (out / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    check_levels([out / NAMES[0], out / other], "max")


# ------------------------------------------------------------------ no manifest
def test_a_folder_without_manifest_is_read_with_a_note(base: Path, tmp_path: Path) -> None:
    out = copy_out(base, tmp_path / "out")
    (out / MANIFEST).unlink()  # a folder made by hand, downloaded, or by an older version
    with pytest.warns(BuildersNote, match="not in a build manifest") as notes:
        check_levels(levels(out), "max")
    assert len(notes) == 1
    code, output = publish_dry_run(levels(out))
    assert code == 0 and output.count("would push") == 3, output
    lines = [line for line in output.splitlines() if line.startswith("note:")]
    assert len(lines) == 1 and all(str(f / "max") in lines[0] for f in levels(out))
    code, output = export(out / NAMES[0], tmp_path / "low.json")
    assert code == 0 and "note: " in output and "not in a build manifest" in output


def test_a_damaged_manifest_is_refused_naming_it(base: Path, tmp_path: Path) -> None:
    out = copy_out(base, tmp_path / "out")
    (out / MANIFEST).write_text("{", encoding="utf-8")
    with pytest.raises(BuildersError, match="not a build manifest") as err:
        check_levels(levels(out))
    assert str(err.value).startswith(f"{out / MANIFEST}: ")
