"""The store's leakage SQL: overlap tables and the decontaminated view."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from helpers import DATA, snapshot

from builders.store import Store
from builders.store.ingest import ingest

QUERY = pa.table({"benchmark": ["ai"], "source": ["crossner-ai"], "split": ["test"]})


def _store(db: Path, tmp_path: Path) -> Store:
    """The CrossNER AI excerpt as benchmark; a training file holding its first sentence twice
    (once upper-cased) and one sentence of its own."""
    lines = (DATA / "crossner" / "ai-test.txt").read_text(encoding="utf-8").split("\n\n")[0]
    upper = "\n".join(f"{t.upper()}\t{g}" for t, g in (ln.split("\t") for ln in lines.splitlines()))
    own = "Paris\tB-city\nis\tO\nnice\tO\n"
    (tmp_path / "t.bio").write_text(f"{own}\n{lines}\n\n{upper}\n", encoding="utf-8")
    store = Store(db)
    ingest(store, "crossner-ai", DATA / "crossner" / "ai-test.txt")
    ingest(store, "columns", tmp_path / "t.bio", name="t")
    return store


def test_overlap_tables(db: Path, tmp_path: Path) -> None:
    with _store(db, tmp_path) as store:
        t = store.overlap_tables("t", QUERY, 13)
        assert store.con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE temporary"
        ).fetchall() == [(0,)]
    assert t.sentences.column("n_tokens").to_pylist() == [20, 21, 22]
    pairs = t.pairs.to_pylist()
    assert [(p["benchmark_sentence_id"], p["training_sentence_id"], p["exact"]) for p in pairs] == [
        ("crossner-ai/test/0", "t/train/1", True),
        ("crossner-ai/test/0", "t/train/2", True),
    ]
    assert pairs[0]["positions"] == list(range(1, 9))  # 20 tokens: 8 13-grams
    assert pairs[0]["training_labels"] == ["algorithm"]
    assert pairs[1]["training_text"].startswith("TYPICAL GENERATIVE")
    mentions = t.mentions.to_pylist()
    assert len(mentions) == 8
    assert mentions[0]["text"] == "naive bayes classifier"
    labels = {r["surface"]: r["label"] for r in t.surface_labels.to_pylist()}
    assert t.surface_labels.num_rows == len(labels) == 3  # one label per seen surface
    assert [labels.get(m["surface"]) for m in mentions] == ["algorithm"] * 3 + [None] * 5


def test_pairs_without_texts_are_the_same_pairs(db: Path, tmp_path: Path) -> None:
    """A build's scan keeps no sentence texts; the rest of its tables is the same."""
    with _store(db, tmp_path) as store:
        full = store.overlap_tables("t", QUERY, 13)
        bare = store.overlap_tables("t", QUERY, 13, texts=False)
    assert bare.pairs.column_names == [
        c for c in full.pairs.column_names if c not in ("benchmark_text", "training_text")
    ]
    assert bare.pairs.equals(full.pairs.drop_columns(["benchmark_text", "training_text"]))
    for name in ("sentences", "mentions", "surface_labels"):
        assert getattr(bare, name).equals(getattr(full, name)), name


def test_bad_n(db: Path, tmp_path: Path) -> None:
    with _store(db, tmp_path) as store, pytest.raises(ValueError, match="n-gram length"):
        store.overlap_tables("t", QUERY, 0)


def test_without_sentences_is_a_view_for_the_block(db: Path, tmp_path: Path) -> None:
    with _store(db, tmp_path) as store:
        before = snapshot(store)
        counts = store.label_counts("t")
        with store.without_sentences("t", ["t/train/1", "t/train/2", "t/train/99"]) as dropped:
            assert dropped == 2
            assert store.count_sentences("t") == 1
            assert store.label_counts("t") == [("city", 1, 1)]
            assert store.con.execute(
                "SELECT count(*) FROM label_counts WHERE source = 't'"
            ).fetchall() == [(1,)]
            assert store.subset_rows("t", ["algorithm"]).num_rows == 0
            assert store.count_sentences("crossner-ai") == 3  # other sources as they were
        assert snapshot(store) == before
        assert store.label_counts("t") == counts
        with store.without_sentences("t", []) as dropped:
            assert dropped == 0 and store.count_sentences("t") == 3


@pytest.mark.parametrize("chunk", [1, 2])
def test_the_corpus_read_in_chunks_gives_the_same_tables(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    """The scan hashes the corpus a chunk of sentences at a time (memory bounded by the chunk);
    chunks that split the hits and the mentions apart change nothing."""
    import builders.store.overlap as overlap

    with _store(db, tmp_path) as store:
        # a second split: the benchmark's second sentence and a sentence of its own
        second = (DATA / "crossner" / "ai-test.txt").read_text(encoding="utf-8").split("\n\n")[1]
        (tmp_path / "dev.bio").write_text(f"Rome\tB-city\n\n{second}\n", encoding="utf-8")
        ingest(store, "columns", tmp_path / "dev.bio", name="t", split="dev")
        whole = store.overlap_tables("t", QUERY, 5)
        monkeypatch.setattr(overlap, "CHUNK", chunk)
        chunked = store.overlap_tables("t", QUERY, 5)
        with store.without_sentences("t", ["t/train/1"]):
            assert store.overlap_tables("t", QUERY, 5).pairs.num_rows == 2
    assert whole.pairs.num_rows == 3 and whole.mentions.num_rows == 8
    assert {p["training_sentence_id"] for p in whole.pairs.to_pylist()} >= {"t/dev/1"}
    for name in ("sentences", "pairs", "mentions", "surface_labels"):
        assert getattr(chunked, name).equals(getattr(whole, name)), name
