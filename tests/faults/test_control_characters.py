"""Labels and names from the data may hold ESC, BEL, NUL or newlines: the terminal, the
cards and the JSON show them escaped, never as they are."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from markupsafe import Markup

from builders.cli.main import cli
from builders.hub.templating import environment

RAW = ("\x1b", "\x07", "\x00", "\x9b")


def _corpus(tmp_path: Path) -> Path:
    records = [
        {"tokenized_text": ["Ada", "Lovelace", "wrote", "."], "ner": [[0, 1, "per\x1b[31mson"]]},
        {"tokenized_text": ["Bob", "ran"], "ner": [[0, 0, "a\x07b\x00c"]]},
    ]
    path = tmp_path / "cc.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def test_labels_reach_the_terminal_escaped(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    path = _corpus(tmp_path)
    runner = CliRunner()
    ingested = runner.invoke(cli, ["ingest", "gliner", "--path", str(path), "--name", "cc", "--db", str(db)])  # fmt: skip
    assert ingested.exit_code == 0, ingested.output
    shown = runner.invoke(cli, ["labels", "cc", "--db", str(db)])
    assert shown.exit_code == 0
    assert "per\\x1b[31mson" in shown.output and "a\\x07b\\x00c" in shown.output
    assert not any(c in shown.output for c in RAW)
    as_json = runner.invoke(cli, ["labels", "cc", "--db", str(db), "--json"])
    assert not any(c in as_json.output for c in RAW)  # JSON escapes them itself
    assert "per\x1b[31mson" in as_json.output.encode().decode("unicode_escape")


def test_an_error_naming_a_label_shows_it_escaped(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        cli, ["ingest", "gliner", "--path", str(_corpus(tmp_path)), "--name", "c\x1bc",
              "--db", str(tmp_path / "s.duckdb")],
    )  # fmt: skip
    assert res.exit_code == 1 and not any(c in res.output for c in RAW)


def test_cards_show_text_from_the_data_escaped_and_their_own_header_whole() -> None:
    env = environment()
    out = env.from_string("{{ header }}| {{ label }} | {{ label | cell }} |").render(
        header=Markup("---\nx: 1\n"), label="per\x1bson\nnext"
    )
    assert out == "---\nx: 1\n| per\\x1bson\nnext | per\\x1bson next |"  # a cell: one line
