"""Typed reader options: an unknown key or a bad value is a clean error naming the key and the
valid ones, before anything is read; `sources` and `ingest --help` list every reader's options."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import json_result

from builders.cli.main import cli
from builders.errors import BuildersError
from builders.sources import SOURCES, get_source, reader_options


@pytest.mark.parametrize(
    ("source", "options", "message"),
    [
        (
            "columns",
            {"tokencol": -1},
            "unknown option 'tokencol' for the columns reader; valid options: columns, scheme, "
            "sep, repair, comments, tags",
        ),
        (
            "columns",
            {"tag_col": 5},
            "unknown option 'tag_col' for the columns reader (the layout is given with "
            "--columns, e.g. --columns tag,token); valid options: columns, scheme, sep, repair, comments, tags",
        ),
        (
            "columns",
            {"scheme": "bilou"},
            "option scheme='bilou' of the columns reader: expected one of auto, bio, bioes, io",
        ),
        (
            "columns",
            {"repair": "maybe"},
            "option repair='maybe' of the columns reader: expected true or false",
        ),
        (
            "columns",
            {"columns": "token,token"},
            "option of the columns reader: columns='token,token': name every column, exactly "
            "one 'token' and one 'tag' (e.g. token,tag or tag,token or token,pos,chunk,tag), "
            "or say auto",
        ),
        (
            "nuner",
            {"workers": "two"},
            "option workers='two' of the nuner reader: expected an integer",
        ),
        ("nuner", {"workers": 4}, "option of the nuner reader: workers=4: give 0 or 1"),
        (
            "gliner",
            {"repair": True},
            "the gliner reader takes no options (got 'repair')",
        ),
        (
            "fewnerd",
            {"schem": "io"},
            "unknown option 'schem' for the fewnerd reader (did you mean 'scheme'?); valid "
            "options: columns, scheme, sep, repair, comments, tags",
        ),
    ],
)
def test_bad_options_are_refused_before_reading(
    data_dir: Path, source: str, options: dict, message: str
) -> None:
    with pytest.raises(BuildersError) as err:
        get_source(source).plan(data_dir / "crossner/ai-test.txt", None, options)
    assert str(err.value) == message


def test_hub_reader_options_are_checked_too(tmp_path: Path) -> None:
    with pytest.raises(BuildersError, match="unknown option 'tag_column' for the hf reader"):
        get_source("hf").plan("org/name", None, {"tag_column": "x"})


def test_values_are_converted_and_defaults_filled(data_dir: Path) -> None:
    plan = get_source("columns").plan(
        data_dir / "crossner/ai-test.txt", None, {"repair": "true", "sep": "tab"}
    )
    # comments and tags at their defaults are left out: fingerprints of inputs read before
    # these options existed stay as they were
    assert dict(plan.options) == {"columns": "auto", "scheme": "auto", "sep": "\t", "repair": True}
    assert dict(plan.user_options) == {"repair": True, "sep": "\t"}
    plan = get_source("columns").plan(data_dir / "crossner/ai-test.txt", None, {"tags": "Outer"})
    assert dict(plan.options)["tags"] == "outer" and "comments" not in plan.options


def test_every_reader_declares_its_options() -> None:
    for spec in SOURCES.values():
        cls = reader_options(spec.module)
        described = cls.describe()
        assert all(o["help"] for o in described), spec.module
        # the registry's own options pass the reader's check
        cls.parse(dict(spec.options), spec.module)


def test_cli_shows_options_and_refuses_bad_ones(db: Path, data_dir: Path) -> None:
    runner = CliRunner()
    env = {"LABELSHIFT_DB": str(db)}
    help_text = runner.invoke(cli, ["ingest", "--help"]).output
    assert "Reader options" in help_text and "columns (text, default auto)" in help_text
    listed = runner.invoke(cli, ["sources", "--json"], env=env).output
    rows = {r["source"]: r for r in json_result(listed, "sources")}
    assert [o["name"] for o in rows["mit-movie"]["reader_options"]] == [
        "columns",
        "scheme",
        "sep",
        "repair",
        "comments",
        "tags",
    ]
    assert rows["conll2003"]["options"] == {"columns": "token,pos,chunk,tag", "scheme": "bio"}
    path = str(data_dir / "mit-movie/engtest.bio")
    for opt, expected in [
        ("tokencol=-1", "Error: unknown option 'tokencol' for the columns reader"),
        ("scheme=bilou", "Error: option scheme='bilou' of the columns reader"),
        ("tag_col=5", "Error: unknown option 'tag_col' for the columns reader"),
    ]:
        res = runner.invoke(cli, ["ingest", "columns", "--path", path, "-o", opt], env=env)
        assert res.exit_code == 1
        assert res.output.startswith(expected), res.output
        assert "Traceback" not in res.output
    assert not db.exists()  # refused before a store was created
