"""Errors typed by what went wrong, and messages that name the setting that fixes them the
way the user sets it: the library (`min_labels=`), the command line (`--min-labels`) or a
scenario (`min_labels`). The rest of the suite compares messages as the command line shows
them (tests/conftest.py); these tests are marked `library_surface` where they need the
library's names, or need to see that a command sets the command line's names itself."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from helpers import LABELS_A, bio_corpus

import builders
import builders.errors as errors
from builders.cli.errors import COMMAND_LINE, handle_errors
from builders.cli.main import cli
from builders.errors import (
    BuildersError,
    ConflictingOptions,
    InvalidValue,
    LevelsUnreachable,
    Surface,
    opt,
    options_that_help,
    reader_opt,
    shown_on,
)
from builders.scenarios.book import Scenario, ScenarioKeys, load_scenarios
from builders.scenarios.regenerate import regenerate
from builders.shift.specs import EmbeddingSpec
from builders.splits.config import SplitConfig
from builders.store import Store
from builders.store.ingest import ingest

ROOT = Path(builders.__file__).parent

pytestmark = pytest.mark.library_surface


def _error_types() -> list[type[BaseException]]:
    return [
        v
        for v in vars(errors).values()
        if isinstance(v, type) and issubclass(v, BaseException) and not issubclass(v, Warning)
    ]


def test_every_error_type_is_a_builders_error() -> None:
    """`except BuildersError` catches every error the toolkit raises on purpose."""
    types = _error_types()
    assert len(types) > 20
    assert all(issubclass(t, BuildersError) for t in types), types


def _untyped(path: Path) -> list[int]:
    """Lines of `path` that make a bare `BuildersError` (raised or built to raise later)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", "")) == "BuildersError"
    ]


def test_no_bare_builders_error_is_raised() -> None:
    """A new error is typed by what went wrong (a type of `builders.errors`, which a caller
    can catch apart); `BuildersError` is only their base."""
    found = {
        str(p.relative_to(ROOT)): lines
        for p in sorted(ROOT.rglob("*.py"))
        if (lines := _untyped(p))
    }
    assert not found, f"bare BuildersError(...) made at: {found}"


#: Non-CLI modules' strings (docstrings aside) that still spell a command-line flag, by
#: module: recorded commands that rebuild a folder (build.json, the card, a scenario's key),
#: pip command lines, notes kept in the store and the verdicts of a card (their bytes do not
#: depend on where the build ran), and `builders ...` commands a message suggests. The count
#: may only go down: a message names a setting with `opt(...)`, never with its flag.
FLAG_STRINGS = {
    "fewnerd/splits.py": 4,  # FewnerdRequest.command_line, recorded in the folder
    "hub/cards.py": 1,  # the recorded command of an older build.json
    "hub/export.py": 1,  # "one written by export-gliner --benchmark"
    "scenarios/book.py": 1,  # "give one with --scenarios"
    "scenarios/rebuild.py": 1,  # the recorded rebuild command (Few-NERD: FewnerdRequest)
    "shift/benchmarks.py": 1,  # a benchmark without sentences: `builders ingest ...`
    "shift/models.py": 2,  # pip command lines
    # regenerate's own --allow-shrink (its fix names the Python spelling beside), and the
    # `builders ingest ... --replace` that reads a benchmark's local copy into the store
    "scenarios/inputs.py": 3,
    "sources/table.py": 1,  # the columns source's description (listed by `sources`, cards)
    "splits/config.py": 2,  # SplitConfig.command_line, recorded in build.json
    "splits/leakage.py": 1,  # a refused decontamination's `builders ingest SOURCE --path ...`
    "splits/levels.py": 1,  # a verdict of the card
    "splits/provenance.py": 3,  # the recorded ingest command (--path, --revision, --name)
    "splits/strategies/familiarity.py": 1,  # a progress stage
    "splits/strategies/quantile.py": 1,  # the order remedy, a note of the card
    "store/batches.py": 1,  # an ingest note kept in the store
    "store/catalogue.py": 4,  # the `builders ingest ...` command that adds a source
    "store/db.py": 1,  # the `builders ingest ...` command that makes a store
    "store/failures.py": 1,  # the `builders stats --db ...` command that folds a .wal in
}
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


def _flag_strings(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return sum(
        1
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and _FLAG.search(node.value)
    )


def test_library_modules_spell_no_new_flags() -> None:
    counts = Counter(
        {
            str(p.relative_to(ROOT)): n
            for p in sorted(ROOT.rglob("*.py"))
            if p.relative_to(ROOT).parts[0] != "cli" and (n := _flag_strings(p))
        }
    )
    more = {m: n for m, n in counts.items() if n > FLAG_STRINGS.get(m, 0)}
    assert not more, f"flags spelt outside the command line (use builders.errors.opt): {more}"
    fewer = {m: counts[m] for m, n in FLAG_STRINGS.items() if counts[m] < n}
    assert not fewer, f"fewer flag strings than allowed: lower FLAG_STRINGS to {fewer}"


def test_a_setting_is_named_for_where_the_user_sets_it() -> None:
    library = (opt("min_labels"), opt("replace", True), opt("name", "NAME"), opt("db"))
    assert library == ("min_labels=", "replace=True", "name=NAME", "Store(path)")
    assert reader_opt("tags", "outer") == "options={'tags': 'outer'}"
    assert reader_opt("columns") == "options['columns']"
    assert options_that_help() == "Options that help"
    with shown_on(COMMAND_LINE):
        assert (opt("min_labels"), opt("replace", True), opt("name", "NAME")) == (
            "--min-labels",
            "--replace",
            "--name NAME",
        )
        assert opt("db") == "--db" and opt("max_label_share", "0.3") == "--max-label-share 0.3"
        assert reader_opt("tags", "outer") == "-o tags=outer"
        assert reader_opt("columns", "tag,token") == "--columns tag,token"
        assert reader_opt("repair", True) == "--repair or -o repair=true"
        sc = Scenario("s", "columns", params={})
        with shown_on(ScenarioKeys(sc, COMMAND_LINE)):
            assert opt("min_gap", "0.05") == "`min_gap` 0.05"
            assert opt("check_model", "m") == "`check_model` m"
            assert opt("replace", True) == "--replace"  # no key of a scenario: as around it
            assert reader_opt("sep", "space") == "-o sep=space"
            assert options_that_help() == "Scenario keys that help"
        assert options_that_help() == "Options that help"
    assert opt("min_labels") == "min_labels="  # left as it was


def test_a_library_caller_is_told_the_argument_not_the_flag(tmp_path: Path) -> None:
    with pytest.raises(InvalidValue) as err:
        SplitConfig("x", min_labels=0)
    assert str(err.value) == "min_labels= and min_mentions= must be >= 1, got 0 and 100"
    with pytest.raises(ConflictingOptions) as err:
        SplitConfig.from_dict({"source": "x", "strategy": "entropy", "targets": (0.5, 0.3, 0.1)})
    assert (
        "targets= is an option of the familiarity strategy (levels placed by Familiarity): use strategy=familiarity"
        in str(err.value)
    )
    with pytest.raises(ConflictingOptions, match=r"^backend=onnx runs precision=fp32, not fp16; "):
        EmbeddingSpec(backend="onnx", precision="fp16")
    f = tmp_path / "a.txt"
    f.write_text("EU\tB-ORG\nsagt\tO\n\n", encoding="utf-8")
    with Store(tmp_path / "s.duckdb") as store:
        with pytest.raises(ConflictingOptions, match=r"^replace=True and append=True exclude"):
            ingest(store, "columns", f, replace=True, append=True)
        ingest(store, "columns", f, name="r")
        g = tmp_path / "b.txt"
        g.write_text("EU\tB-ORG\n\n", encoding="utf-8")
        with pytest.raises(errors.IngestRefused) as refused:
            ingest(store, "columns", g, name="r")
    assert "Pass replace=True to replace what is stored, append=True to add to it" in str(
        refused.value
    )
    assert "--" not in str(refused.value)


def test_a_file_whose_layout_reads_two_ways_names_the_reader_option(tmp_path: Path) -> None:
    f = tmp_path / "words.txt"
    f.write_text("the cat\nsat on\n\n", encoding="utf-8")
    with Store(tmp_path / "s.duckdb") as store, pytest.raises(errors.AmbiguousFormat) as err:
        ingest(store, "columns", f)
    assert "say it with options={'columns': 'token,tag'} or options={'columns': 'tag,token'}" in (
        str(err.value)
    )
    assert isinstance(err.value, errors.SourceFormatError | errors.AmbiguousInput)


def test_a_command_names_its_options_and_exits_1(tmp_path: Path) -> None:
    """The command line sets its names itself (this test runs on the library's surface), in
    the command and in an option's check, and a library error exits with status 1."""
    f = tmp_path / "a.txt"
    f.write_text("EU\tB-ORG\n\n", encoding="utf-8")
    args = ["ingest", "columns", "--path", str(f), "--db", str(tmp_path / "s.duckdb")]
    res = CliRunner().invoke(cli, [*args, "--replace", "--append"])
    assert res.exit_code == 1, res.output
    assert "Error: --replace and --append exclude each other: choose one" in res.output
    res = CliRunner().invoke(cli, ["build-splits", "--source", "x", "--org", "no org"])
    assert res.exit_code == 2
    assert "'--org': must be a user or organisation name like `my-org`, got 'no org'" in (
        res.output
    )
    # a spec is made of its options before the command runs (`cli.options._making_specs`)
    for command in ("familiarity", "build-splits", "leakage", "fewnerd-splits --mode inter"):
        args = [*command.split(), "--source", "x", "--backend", "onnx", "--precision", "fp16"]
        res = CliRunner().invoke(cli, args)
        assert res.exit_code == 1, (command, res.output)
        assert "Error: --backend onnx runs --precision fp32, not fp16; use --backend torch" in (
            res.output
        ), command


def _instance(kind: type[BaseException]) -> BuildersError:
    """An error of `kind` with the message "what went wrong"."""
    extra = {
        "SourceFormatError": ("f.txt", 3, "what went wrong"),
        "AmbiguousFormat": ("f.txt", 3, "what went wrong"),
        "UnknownNameError": ("thing", "x", ["a"]),
        "SourceNotStored": ("what went wrong", "src"),
        "SplitNotStored": ("what went wrong", "src", "test"),
        "LevelsUnreachable": ("what went wrong", 0.1, 0.2),
        "PublishError": ("what went wrong", [], ["org/a"]),
    }
    error = kind(*extra.get(kind.__name__, ("what went wrong",)))
    assert isinstance(error, BuildersError)
    return error


@pytest.mark.parametrize("kind", _error_types(), ids=lambda t: t.__name__)
def test_the_command_line_shows_every_error_type_as_one_line(kind: type[BuildersError]) -> None:
    error = _instance(kind)

    @click.command()
    @handle_errors
    def fails() -> None:
        raise error

    res = CliRunner().invoke(fails, [])
    assert res.exit_code == 1
    assert res.output == f"Error: {error}\n"


def test_a_reworded_error_keeps_its_type_and_attributes() -> None:
    error = LevelsUnreachable("no placement", 0.1, 0.4, alone=True)
    again = error.reworded(f"scenario 's': {error}")
    assert again is error and str(again) == "scenario 's': no placement"
    assert (again.low, again.high, again.alone) == (0.1, 0.4, True)


SCENARIO = """
[defaults]
out = "out"
model = "all-MiniLM-L6-v2"
benchmarks = "crossner-ai"
min_labels = 1
min_mentions = 1

[[scenario]]
name = "wrong"
source = "columns"
store_as = "shards"
path = "shards"
strategy = "entropy"
level_mentions = 100
"""


def test_a_scenario_is_told_its_keys(tmp_path: Path) -> None:
    """A build a scenario asks for is refused naming the scenario's keys (a library caller
    of `regenerate` and the command line alike), its type kept."""
    shards = tmp_path / "shards"
    shards.mkdir()
    bio_corpus(shards / "a1.txt", LABELS_A, 20)
    (tmp_path / "scenarios.toml").write_text(SCENARIO, encoding="utf-8")
    book = load_scenarios(tmp_path / "scenarios.toml")
    with Store(tmp_path / "s.duckdb") as store:
        for around in (Surface(), COMMAND_LINE):
            with shown_on(around), pytest.raises(ConflictingOptions) as err:
                regenerate(store, book.scenarios, book.out)
            assert str(err.value) == (
                "scenario 'wrong': `level_mentions` is an option of the familiarity strategy (levels placed by Familiarity): use "
                "`strategy` familiarity"
            )
