"""Leakage beyond label names (METHOD.md section 7): planted leaks, hand counts, the reference.

The benchmark is the real CrossNER AI test excerpt (3 sentences of 20, 21 and 22 tokens); the
clean training corpus is the real Pile-NER BIO excerpt. Leaks are planted by copying the
benchmark's sentences into a training file: verbatim, with a case change, with one token
replaced.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from helpers import DATA, ROOT

from builders.errors import BuildersError
from builders.shift.benchmarks import resolve
from builders.shift.embedder import Embedder
from builders.shift.leakage import scan
from builders.shift.specs import EmbeddingSpec
from builders.store import Store
from builders.store.ingest import ingest

MINILM = "all-MiniLM-L6-v2"
Sentence = list[tuple[str, str]]


def read_bio(path: Path) -> list[Sentence]:
    out: list[Sentence] = [[]]
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            out.append([])
            continue
        token, tag = line.split("\t")
        out[-1].append((token, tag))
    return [s for s in out if s]


def write_bio(path: Path, sentences: list[Sentence]) -> Path:
    path.write_text(
        "".join("".join(f"{t}\t{g}\n" for t, g in s) + "\n" for s in sentences), encoding="utf-8"
    )
    return path


BENCH = read_bio(DATA / "crossner" / "ai-test.txt")
CLEAN = read_bio(DATA / "pilener-bio" / "pilener-391xALL-dev.excerpt.bio")


def planted() -> list[Sentence]:
    """Sentence 0 verbatim; 1 with its first token upper-cased; 2 with its last token replaced."""
    s0, s1, s2 = BENCH
    case = [(s1[0][0].upper(), s1[0][1]), *s1[1:]]
    replaced = [*s2[:-1], ("!", "O")]
    return [s0, case, replaced]


def _store(db: Path, tmp: Path, training: list[Sentence]) -> Store:
    store = Store(db)
    ingest(store, "crossner-ai", DATA / "crossner" / "ai-test.txt")
    # the Pile-NER excerpt holds one lax `I-` tag (see tests/data/README.md)
    path = write_bio(tmp / "train.bio", training)
    ingest(store, "columns", path, name="train", options={"repair": True})
    return store


def test_planted_leaks_are_found_exactly(db: Path, tmp_path: Path) -> None:
    with _store(db, tmp_path, [*CLEAN, *planted(), CLEAN[0]]) as store:
        found = scan(
            store, "train", resolve("crossner-ai", store=store), embedding=EmbeddingSpec(MINILM)
        )
        ids = {p: sorted(found.pairs.filter(p)["benchmark_sentence_id"]) for p in ("exact",)}
        rep = found.report().per_benchmark["crossner-ai"]
    n_clean = len(CLEAN)
    # exact: the verbatim copy and the case change (tokens are compared lower-cased)
    assert ids["exact"] == ["crossner-ai/test/0", "crossner-ai/test/1"]
    pairs = {
        r["benchmark_sentence_id"]: r for r in found.pairs.iter_rows(named=True)
    }  # one training copy each
    assert set(pairs) == {"crossner-ai/test/0", "crossner-ai/test/1", "crossner-ai/test/2"}
    assert [pairs[f"crossner-ai/test/{i}"]["training_sentence_id"] for i in range(3)] == [
        f"train/train/{n_clean + i}" for i in range(3)
    ]
    # the replaced last token leaves 9 of the 10 13-grams of the 22-token sentence
    assert pairs["crossner-ai/test/2"]["positions"] == list(range(1, 10))
    assert not pairs["crossner-ai/test/2"]["exact"]
    assert rep["exact_sentences"] == 2 and rep["exact_share"] == pytest.approx(2 / 3)
    assert rep["ngram_eligible_sentences"] == 3 and rep["ngram_sentences"] == 3
    assert rep["containment_mean"] == pytest.approx((1 + 1 + 0.9) / 3)
    assert rep["containment_max"] == 1.0
    assert rep["training_sentences_exact"] == 2
    assert rep["training_sentences_overlapping"] == 3
    assert found.overlapping_training_ids() == [f"train/train/{n_clean + i}" for i in range(3)]
    assert found.pairs_table().column("training_text")[0].as_py().startswith("Typical")


def test_a_scan_without_texts_gives_the_same_figures(db: Path, tmp_path: Path) -> None:
    """What a build scans with: no sentence texts, and the report unchanged."""
    with _store(db, tmp_path, [*CLEAN, *planted()]) as store:
        sets = resolve("crossner-ai", store=store)
        full = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
        bare = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM), texts=False)
    assert bare.report() == full.report()
    assert bare.overlapping_training_ids() == full.overlapping_training_ids()
    with pytest.raises(BuildersError, match="texts=True"):
        bare.pairs_table()


def test_clean_corpus_reports_zero(db: Path, tmp_path: Path) -> None:
    with _store(db, tmp_path, CLEAN) as store:
        found = scan(
            store, "train", resolve("crossner-ai", store=store), embedding=EmbeddingSpec(MINILM)
        )
    rep = found.report()
    for figures in (rep.per_benchmark["crossner-ai"], rep.union):
        assert figures["sentences"] == 3
        assert figures["exact_sentences"] == figures["ngram_sentences"] == 0
        assert figures["seen_mentions"] == 0 and figures["mentions"] == 8
        assert figures["containment_mean"] is None
    assert found.pairs.is_empty() and found.overlapping_training_ids() == []


def test_shorter_n_finds_a_middle_edit_and_short_sentences_count_for_exact_only(
    db: Path, tmp_path: Path
) -> None:
    s0 = BENCH[0]
    middle = [*s0[:10], ("XYZ", "O"), *s0[11:]]  # 20 tokens, token 11 replaced
    with _store(db, tmp_path, [*CLEAN, middle]) as store:
        sets = resolve("crossner-ai", store=store)
        assert (
            scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
            .report()
            .union["ngram_sentences"]
            == 0
        )
        rep = scan(store, "train", sets, n=5, embedding=EmbeddingSpec(MINILM)).report().union
        assert rep["ngram_sentences"] == 1 and rep["exact_sentences"] == 0
        # 16 5-grams, of which the 5 covering token 11 are lost
        assert rep["containment_max"] == pytest.approx(11 / 16)
        rep = scan(store, "train", sets, n=21, embedding=EmbeddingSpec(MINILM)).report().union
        assert rep["ngram_eligible_sentences"] == 2  # 21 and 22 tokens; the 20-token one not


def test_mention_overlap_equals_a_hand_count(db: Path, tmp_path: Path) -> None:
    """The benchmark's 8 mentions; the training file names 3 of their surfaces (in other
    sentences): one with the same label, one with a familiar and an unfamiliar label, one
    with an unrelated label only, plus an unrelated mention."""
    training = [
        [("We", "O"), ("used", "O"), ("a", "O"), ("Naive", "B-algorithm"), ("Bayes", "I-algorithm"),
         ("classifier", "I-algorithm"), (".", "O")],
        [("LREC", "B-conference"), ("was", "O"), ("held", "O"), ("in", "O"), ("Paris", "B-city"), (".", "O")],
        [("The", "O"), ("lrec", "B-software"), ("site", "O"), (".", "O")],
        [("hmm", "B-city"), ("is", "O"), ("a", "O"), ("word", "O"), (".", "O")],
    ]  # fmt: skip
    with _store(db, tmp_path, training) as store:
        found = scan(
            store, "train", resolve("crossner-ai", store=store), embedding=EmbeddingSpec(MINILM)
        )
    rep = found.report().per_benchmark["crossner-ai"]
    # seen: naive bayes classifier (algorithm), lrec (conference; software), hmm (city)
    assert (rep["mentions"], rep["seen_mentions"], rep["unseen_mentions"]) == (8, 3, 5)
    assert rep["seen_share"] == pytest.approx(3 / 8)
    # familiar: the same label (algorithm; conference); `city` is not `algorithm`
    assert rep["seen_familiar_mentions"] == 2
    assert rep["seen_familiar_share"] == pytest.approx(2 / 3)
    assert rep["exact_sentences"] == rep["ngram_sentences"] == 0
    # a subset keeps only the mentions of its labels
    sub = found.report(labels={"software", "city"}).per_benchmark["crossner-ai"]
    assert (sub["seen_mentions"], sub["seen_familiar_mentions"]) == (2, 0)
    sub = found.report(labels={"algorithm"}).per_benchmark["crossner-ai"]
    assert (sub["seen_mentions"], sub["seen_familiar_mentions"]) == (1, 1)


def test_familiar_labels_compared_in_chunks_give_the_same_scan(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The familiar-label check compares the training labels a chunk at a time (bounded
    memory); chunks of one label find the same familiar pairs and figures."""
    import polars as pl

    import builders.shift.leakage as leakage

    training = [
        [("We", "O"), ("used", "O"), ("Naive", "B-algorithms"), ("Bayes", "I-algorithms"),
         ("classifier", "I-algorithms"), (".", "O")],
        [("LREC", "B-conferences"), ("was", "O"), ("held", "O"), (".", "O")],
        [("The", "O"), ("lrec", "B-software"), ("site", "O"), (".", "O")],
    ]  # fmt: skip
    with _store(db, tmp_path, training) as store:
        sets = resolve("crossner-ai", store=store)
        whole = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
        monkeypatch.setattr(leakage, "LABEL_CHUNK", 1)
        chunked = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
    assert whole.familiar.filter(pl.col("label") != pl.col("eval_label")).height  # found
    assert chunked.familiar.equals(whole.familiar)
    assert chunked.report() == whole.report()


@pytest.mark.slow  # a real model exported or loaded in a new process
def test_the_scan_embeds_with_the_backend_it_is_given(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--backend` reaches the familiar-label comparison: its vectors are cached under that
    backend's key, and the figures equal torch's."""
    pytest.importorskip("onnxruntime", reason="extra [onnx] not installed")
    monkeypatch.setenv("LABELSHIFT_CACHE", str(tmp_path / "cache"))
    training = [
        [("We", "O"), ("used", "O"), ("Naive", "B-algorithm"), ("Bayes", "I-algorithm"),
         ("classifier", "I-algorithm"), (".", "O")],
        [("LREC", "B-meeting"), ("was", "O"), ("held", "O"), (".", "O")],
    ]  # fmt: skip
    with _store(db, tmp_path, training) as store:
        sets = resolve("crossner-ai", store=store)
        reports = {}
        for backend in ("torch", "onnx"):
            found = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM, backend))
            reports[backend] = found.report().per_benchmark["crossner-ai"]
        keys = [k.split("|")[1] for k in dict(store.stats()["embeddings"])]
    assert sorted(keys) == ["onnx", "torch"]
    assert reports["onnx"] == reports["torch"]
    assert reports["torch"]["seen_mentions"] == 2


def test_union_and_unscanned_benchmarks(db: Path, tmp_path: Path) -> None:
    labels = tmp_path / "mine.txt"
    labels.write_text("person\n", encoding="utf-8")
    with _store(db, tmp_path, [*CLEAN, *planted()]) as store:
        ingest(store, "mit-movie", DATA / "mit-movie" / "engtest.bio")
        sets = resolve(f"crossner-ai,mit-movie,fewnerd-inter,file:{labels}", store=store)
        rep = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM)).report()
    assert list(rep.per_benchmark) == ["crossner-ai", "mit-movie"]
    assert rep.union["sentences"] == 3 + 3
    assert rep.union["exact_sentences"] == 2
    assert rep.union["mentions"] == 8 + rep.per_benchmark["mit-movie"]["mentions"]
    assert set(rep.not_scanned) == {"fewnerd-inter", "mine"}
    assert "labels only" in rep.not_scanned["mine"]


def test_packaged_benchmark_without_a_local_copy_is_not_scanned(db: Path, tmp_path: Path) -> None:
    with _store(db, tmp_path, CLEAN) as store:
        rep = scan(
            store, "train", resolve("mit-restaurant", store=store), embedding=EmbeddingSpec(MINILM)
        ).report()
    assert rep.per_benchmark == {}
    assert "LABELSHIFT_DATA" in rep.not_scanned["mit-restaurant"]


def test_bad_arguments(db: Path, tmp_path: Path) -> None:
    with _store(db, tmp_path, CLEAN) as store:
        sets = resolve("crossner-ai", store=store)
        with pytest.raises(BuildersError, match="n-gram length"):
            scan(store, "train", sets, n=0)
        with pytest.raises(BuildersError, match="not in"):
            scan(store, "nothing", sets)
        with pytest.raises(BuildersError, match="--backend onnx runs --precision fp32"):
            scan(store, "train", sets, embedding=EmbeddingSpec(MINILM, "onnx", "fp16"))


def test_an_embedder_given_is_the_one_that_embeds(db: Path, tmp_path: Path) -> None:
    """A caller that shares its `Embedder` (a build: one model load) gets its model named in
    the report and its vectors used; the spec it was made of gives the same figures."""
    with _store(db, tmp_path, [*CLEAN, *planted()]) as store:
        sets = resolve("crossner-ai", store=store)
        shared = Embedder.of(EmbeddingSpec(MINILM))
        found = scan(store, "train", sets, embedding=shared)
        again = scan(store, "train", sets, embedding=EmbeddingSpec(MINILM))
    assert found.report().model == shared.model_name  # its canonical name
    assert found.report() == again.report()


def _reference() -> object:
    spec = importlib.util.spec_from_file_location(
        "bench_leakage", ROOT / "scripts" / "bench_leakage.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sql_scan_agrees_with_the_plain_python_reference(db: Path, tmp_path: Path) -> None:
    ref = _reference()
    training = [*CLEAN, *planted()]
    with _store(db, tmp_path, training) as store:
        found = scan(
            store, "train", resolve("crossner-ai", store=store), embedding=EmbeddingSpec(MINILM)
        )
        bench = [[t for t, _ in s] for s in BENCH]
        want = ref.python_scan(bench, [[t for t, _ in s] for s in training], 13)  # type: ignore[attr-defined]
    got = found.report().union
    assert (got["exact_sentences"], got["ngram_sentences"]) == (want["exact"], want["ngram"])
