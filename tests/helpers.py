"""What tests share besides fixtures: the test-data paths and a snapshot of the store."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from builders.splits.strategies.quantile import QuantileOptions
from builders.store import Store

TESTS = Path(__file__).parent
ROOT = TESTS.parent
DATA = TESTS / "data"
SHARED = Path(os.environ.get("LABELSHIFT_SHARED_DATA", TESTS.parent.parent / "shared" / "data"))

#: The bundled sample's build in the tests: MiniLM, and a medium band of the middle 10% (the
#: paper's 1% band holds 4 of its 368 labels, too few to pass the level-size checks).
SAMPLE_MEDIUM = (0.45, 0.55)
#: A `max` build of the bundled sample whose levels are cut to one size (`--match mentions`):
#: a matched low level may be one frequent label and part of another, hence min_labels 1.
SIZE_MATCHED = {
    "options": QuantileOptions(
        low_quantile=0.95, medium_band=(0.4, 0.6), high_quantile=0.1, match="mentions"
    ),
    "min_labels": 1,
}


def snapshot(store: Store) -> list:
    """Every stored row (sentences, mentions, negatives) and each split's fingerprint."""
    return [
        store.con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
        for t in ("sentences", "mentions", "negatives")
    ] + [
        store.con.execute(
            "SELECT source, split, fingerprint, n_sentences FROM sources ORDER BY ALL"
        ).fetchall()
    ]


def stored_rows(store: Store, source: str) -> tuple[list, list, list]:
    """(idx, tokens, raw_id) of the sentences, (idx, start, stop, raw_label) of the mentions and
    (idx, raw_label) of the negatives of a stored source, in order."""
    sentences = store.con.execute(
        "SELECT idx, tokens, raw_id FROM sentences WHERE source = ? ORDER BY idx", [source]
    ).fetchall()
    mentions = store.con.execute(
        "SELECT idx, start, stop, raw_label FROM mentions WHERE source = ? ORDER BY ALL", [source]
    ).fetchall()
    negatives = store.con.execute(
        "SELECT idx, raw_label FROM negatives WHERE source = ? ORDER BY ALL", [source]
    ).fetchall()
    return sentences, mentions, negatives


#: Twenty training types of mixed domains, and twenty closer to the benchmarks' own.
LABELS_A = [
    "person", "city", "protein", "algorithm", "song", "disease", "company", "country",
    "programming language", "chemical", "award", "movie", "river", "sport", "university",
    "book", "food", "vehicle", "planet", "software",
]  # fmt: skip
LABELS_B = [
    "actor", "director", "genre", "cuisine", "restaurant", "dish", "price", "location",
    "rating", "hours", "album", "band", "election", "party", "politician", "scientist",
    "theory", "enzyme", "journal", "conference",
]  # fmt: skip


def bio_corpus(path: Path, labels: list[str], n: int) -> Path:
    """A small BIO column file (token<TAB>tag), one entity per sentence, labels in turn."""
    lines = []
    for i in range(n):
        lab = labels[i % len(labels)]
        lines += ["the\tO", f"Name{i}\tB-{lab}", f"Part{i}\tI-{lab}", ".\tO", ""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def assert_failed_ingest_keeps_store(
    db: Path, source: str, good: Path, bad: Path, message: str
) -> None:
    """Ingest `good`, then fail on `bad` (an error matching `message`): the store is unchanged."""
    import re

    import pytest

    from builders.errors import SourceFormatError
    from builders.store.ingest import ingest

    with Store(db) as store:
        ingest(store, source, good, name="x")
        before = snapshot(store)
        with pytest.raises(SourceFormatError, match=re.escape(message)):
            ingest(store, source, bad, name="x", replace=True)
        assert snapshot(store) == before


#: The fake Hub's token: it must never appear in any output, log, file or error.
TOKEN = "hf_testTOKENdoNotLeak0123456789"


def json_result(output: str, command: str | None = None) -> Any:
    """The `result` of a command's `--json` envelope, after checking the envelope's shape."""
    import json

    from builders import __version__

    envelope = json.loads(output)
    assert set(envelope) == {"command", "version", "config", "result"}, sorted(envelope)
    assert envelope["version"] == __version__
    if command is not None:
        assert envelope["command"] == command
    return envelope["result"]


def hub_snapshot(hub: Path, repo_id: str, file: str = "config.json", text: str = "{}") -> Path:
    """A model snapshot in a Hugging Face cache folder `hub`, as a download leaves it."""
    repo = hub / f"models--{repo_id.replace('/', '--')}"
    commit = "0123456789abcdef0123456789abcdef01234567"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (snap / file).write_text(text)
    return snap


def written_composition(folders: dict[str, Path], config: str) -> dict[str, dict[str, Any]]:
    """Per level, what makes levels comparable, recomputed from the parquet each level's folder
    holds (nothing of the build): its sentences also in another level (by `id`), exp of the
    entropy of its labels' mention shares, and its largest label with that label's share."""
    import math
    from collections import Counter

    import pyarrow.parquet as pq

    ids: dict[str, set[str]] = {}
    counts: dict[str, Counter] = {}
    for level, folder in folders.items():
        (path,) = sorted((folder / config).glob("train-*.parquet"))
        table = pq.read_table(path, columns=["id", "spans"])
        ids[level] = set(table.column("id").to_pylist())
        counts[level] = Counter(
            s["label"] for row in table.column("spans").to_pylist() for s in row
        )
    out = {}
    for level, c in counts.items():
        others = set().union(*(v for lv, v in ids.items() if lv != level))
        total = sum(c.values())
        label, n = min(c.items(), key=lambda kv: (-kv[1], kv[0]))
        out[level] = {
            "sentences_shared": len(ids[level] & others),
            "effective_labels": math.exp(-sum(x / total * math.log(x / total) for x in c.values())),
            "largest_label": {"label": label, "mentions": n, "share": n / total},
        }
    return out


def assert_composition_reported(subsets: list, config: str) -> dict[str, dict[str, Any]]:
    """Each level's sentences_shared, effective_labels and largest_label, as its result (the
    `--json` subsets), every level's build.json (its `subset` and its `levels`) and its card
    report them, equal what its written parquet gives. Returns the recomputed figures."""
    import json
    import math

    folders = {s.level: Path(s.path) for s in subsets}
    want = written_composition(folders, config)
    builds = {
        lv: json.loads((f / config / "build.json").read_text(encoding="utf-8"))
        for lv, f in folders.items()
    }
    for sub in subsets:
        w = want[sub.level]
        reported = [sub.to_dict(), *(b["levels"][sub.level] for b in builds.values())]
        reported.append(builds[sub.level]["subset"])
        for got in reported:
            assert got["sentences_shared"] == w["sentences_shared"], (sub.level, got)
            assert math.isclose(got["effective_labels"], w["effective_labels"], rel_tol=1e-9)
            largest = got["largest_label"]
            assert (largest["label"], largest["mentions"]) == (
                w["largest_label"]["label"],
                w["largest_label"]["mentions"],
            )
            assert math.isclose(largest["share"], w["largest_label"]["share"], rel_tol=1e-9)
        row = (
            f"| {sub.level} | {sub.sentences:,} | {w['sentences_shared']:,} | "
            f"{w['effective_labels']:.1f} | {w['largest_label']['label']} | "
            f"{100 * w['largest_label']['share']:.1f}% |"
        )
        card = (folders[sub.level] / "README.md").read_text(encoding="utf-8")
        assert row in card, row
    return want
