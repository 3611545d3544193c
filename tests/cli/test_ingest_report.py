"""What `builders ingest` prints of a reader's report: each count once (none a note spells
out beside it), and nothing of a split whose input was not read again."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from builders.cli.main import cli
from builders.cli.store import report_lines

DATA = Path(__file__).parent.parent / "data" / "conll2003"


def test_a_count_a_note_spells_out_is_not_printed_again() -> None:
    report = {
        "counts": {"columns_not_read": 12, "labels_verbalised": 4, "repaired_tags": 3},
        "notes": [
            "valid.txt: columns not read: chunk (6), pos (6)",
            "4 labels verbalised by the packaged table: LOC -> location",
        ],
    }
    assert report_lines(report) == ["repaired tags: 3", *report["notes"]]


def test_an_unchanged_input_prints_no_reader_notes(tmp_path: Path) -> None:
    args = ["ingest", "conll2003", "--path", str(DATA), "--db", str(tmp_path / "s.duckdb")]
    first = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert first.exit_code == 0, first.output
    assert "dev: valid.txt: columns not read: chunk" in first.stderr
    assert "dev: columns not read:" not in first.stderr  # the count the note spells out
    again = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert again.exit_code == 0, again.output
    assert "columns not read" not in again.stderr
    assert "dev: input unchanged, not read again" in again.stderr
