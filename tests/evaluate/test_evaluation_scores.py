"""Predictions scored as the field scores them (METHOD.md section 9): the toolkit's micro F1
equals GLiNER's own `compute_prf` and seqeval's span F1 on predictions with misses, false
positives, wrong labels, overlaps and labels outside the benchmark; bad files are refused in one
line naming the file."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from gliner_reference import compute_prf, ner_items
from helpers import DATA
from hypothesis import given
from hypothesis import strategies as st

from builders.cli.main import cli
from builders.errors import InputError, SourceFormatError
from builders.evaluate.scoring import BenchmarkScore, prediction_files, prf, score_files
from builders.store import Store
from builders.store.ingest import ingest

EXCERPT = DATA / "evaluate"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding the 20-sentence CrossNER AI test excerpt and 3 MIT Restaurant ones."""
    path = tmp_path_factory.mktemp("eval") / "s.duckdb"
    with Store(path) as store:
        ingest(store, "crossner-ai", EXCERPT / "crossner-ai-test.txt")
        ingest(store, "mit-restaurant", DATA / "mit-restaurant" / "restauranttest.bio")
    return path


@pytest.fixture
def store(store_path: Path):
    with Store(store_path, read_only=True) as s:
        yield s


def micro_counts(score: BenchmarkScore) -> tuple[int, int, int]:
    """A benchmark score's micro tp, fp and fn (predictions of outside labels are fp)."""
    found = score.to_dict()
    return found["tp"], found["fp"], found["fn"]


def gold(store: Store, source: str = "crossner-ai") -> list[tuple[list[str], list[tuple]]]:
    """(tokens, [(start, end inclusive, label)]) of the stored test sentences, in order."""
    rows = store.sentences_with_spans(source, "test")
    return [(tokens, [(a, b - 1, lab) for a, b, lab in spans]) for _, _, tokens, spans in rows]


def perturbed(sentences: list, seed: int, *, nested: bool = True) -> list[list[tuple]]:
    """Predictions made of the gold with misses, wrong labels, moved boundaries, false
    positives, a label the benchmark lacks, duplicates and (with `nested`) nested spans."""
    rng = random.Random(seed)
    labels = sorted({lab for _, spans in sentences for *_, lab in spans})
    out = []
    for tokens, spans in sentences:
        pred = []
        for s, e, lab in spans:
            roll = rng.random()
            if roll < 0.15:
                continue  # a miss
            if roll < 0.3:
                lab = rng.choice(labels)  # a wrong (or the same) label
            elif roll < 0.4 and e + 1 < len(tokens):
                e += 1  # a boundary off by one
            pred.append((s, e, lab))
            if nested and roll > 0.9 and e > s:
                pred.append((s, s, lab))  # nested in it
            if roll > 0.95:
                pred.append((s, e, lab))  # a duplicate
        for _ in range(rng.randrange(2)):
            a = rng.randrange(len(tokens))
            pred.append((a, min(len(tokens) - 1, a + rng.randrange(3)), rng.choice(labels)))
        if rng.random() < 0.2:
            pred.append((0, 0, "gadget"))  # a label crossner-ai lacks
        if not nested:  # flat: keep the first of any overlapping spans
            flat, end = [], -1
            for s, e, lab in sorted(set(pred)):
                if s > end:
                    flat.append((s, e, lab))
                    end = e
            pred = flat
        out.append(pred)
    return out


def write(path: Path, sentences: list, preds: list[list[tuple]]) -> Path:
    records = [
        {"tokenized_text": tokens, "ner": [list(p) for p in pred]}
        for (tokens, _), pred in zip(sentences, preds, strict=True)
    ]
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def score_one(store: Store, path: Path, misc: str = "keep"):
    [found] = score_files(store, prediction_files([str(path)]), misc)
    return found


def reference(sentences: list, preds: list[list[tuple]], drop: str | None = None) -> dict:
    keep = (lambda lab: lab != drop) if drop else (lambda lab: True)
    y_true = [ner_items([x for x in spans if keep(x[2])]) for _, spans in sentences]
    y_pred = [ner_items([x for x in pred if keep(x[2])]) for pred in preds]
    return compute_prf(y_true, y_pred)


@pytest.mark.parametrize("seed", range(5))
def test_micro_f1_equals_gliner_compute_prf(store: Store, tmp_path: Path, seed: int) -> None:
    sentences = gold(store)
    preds = perturbed(sentences, seed)
    found = score_one(store, write(tmp_path / "crossner-ai.json", sentences, preds))
    want = reference(sentences, preds)
    tp, fp, fn = micro_counts(found)
    assert prf(tp, fp, fn) == (want["precision"], want["recall"], want["f_score"])
    assert found.f1 == want["f_score"] and 0 < found.f1 < 1
    assert found.outside.get("gadget", 0) == sum(p[2] == "gadget" for x in preds for p in set(x))
    assert found.read["overlapping_predictions"] > 0 and found.scored == 20


@pytest.mark.parametrize("seed", range(3))
def test_flat_micro_f1_equals_seqeval(store: Store, tmp_path: Path, seed: int) -> None:
    from seqeval.metrics import f1_score

    def bio(n: int, spans: list[tuple]) -> list[str]:
        tags = ["O"] * n
        for s, e, lab in spans:
            tags[s : e + 1] = [f"B-{lab}"] + [f"I-{lab}"] * (e - s)
        return tags

    sentences = gold(store)
    preds = perturbed(sentences, seed, nested=False)
    found = score_one(store, write(tmp_path / "crossner-ai.json", sentences, preds))
    y_true = [bio(len(t), spans) for t, spans in sentences]
    y_pred = [bio(len(t), pred) for (t, _), pred in zip(sentences, preds, strict=True)]
    assert found.read["overlapping_predictions"] == 0
    assert found.f1 == pytest.approx(f1_score(y_true, y_pred), abs=1e-12)


@given(st.lists(st.tuples(st.integers(0, 19), st.integers(0, 40), st.integers(0, 3),
                          st.sampled_from(["person", "else", "algorithm", "gadget", "task"])),
                max_size=60))  # fmt: skip
def test_any_predictions_score_as_compute_prf(store_path: Path, tmp_path_factory, items) -> None:
    with Store(store_path, read_only=True) as store:
        sentences = gold(store)
        preds: list[list[tuple]] = [[] for _ in sentences]
        for i, start, length, lab in items:
            n = len(sentences[i][0])
            s = start % n
            preds[i].append((s, min(n - 1, s + length), lab))
        path = write(tmp_path_factory.mktemp("h") / "crossner-ai.json", sentences, preds)
        for misc in ("keep", "drop"):
            want = reference(sentences, preds, drop="else" if misc == "drop" else None)
            assert score_one(store, path, misc).f1 == want["f_score"]


def test_sentence_layout_scores_as_the_token_layout(store: Store, tmp_path: Path) -> None:
    """GLiNER's benchmark file itself (sentence + character offsets) as predictions: read
    through the gliner reader, it scores as its token-layout conversion does."""
    found = score_one(store, Path(f"crossner-ai={EXCERPT / 'CrossNER_AI-test-20.json'}"))
    records = json.loads((EXCERPT / "CrossNER_AI-test-20.json").read_text(encoding="utf-8"))
    sentences = gold(store)
    preds = []
    for r in records:  # GLiNER's own `process`: words from a whitespace split
        words, starts, pos = r["sentence"].split(), [], 0
        for w in words:
            starts.append(pos)
            pos += len(w) + 1
        ends = [s + len(w) for s, w in zip(starts, words, strict=True)]
        preds.append(
            [(starts.index(e["pos"][0]), ends.index(e["pos"][1]), e["type"]) for e in r["entities"]]
        )
    assert found.f1 == reference(sentences, preds)["f_score"] > 0.95
    token_layout = score_one(store, write(tmp_path / "crossner-ai.json", sentences, preds))
    assert micro_counts(token_layout) == micro_counts(found)


def test_labels_are_verbalised_as_the_benchmark_tags(store: Store, tmp_path: Path) -> None:
    sentences = gold(store, "mit-restaurant")
    preds = [
        [
            (s, e, {"restaurant name": "Restaurant Name"}.get(lab, lab.upper()))
            for s, e, lab in spans
        ]
        for _, spans in sentences
    ]
    found = score_one(store, write(tmp_path / "mit-restaurant.json", sentences, preds))
    assert found.f1 == 1.0 and not found.outside


def test_a_repeated_sentence_matches_its_copies_in_order(tmp_path: Path) -> None:
    lines = (EXCERPT / "crossner-ai-test.txt").read_text(encoding="utf-8").split("\n\n")
    first = lines[0]
    relabelled = first.replace("B-algorithm", "B-task").replace("I-algorithm", "I-task")
    (tmp_path / "test.txt").write_text(f"{first}\n\n{relabelled}\n\n", encoding="utf-8")
    with Store(tmp_path / "s.duckdb") as store:
        ingest(store, "crossner-ai", tmp_path / "test.txt")
        sentences = gold(store)
        assert sentences[0][0] == sentences[1][0] and sentences[0][1] != sentences[1][1]
        found = score_one(
            store, write(tmp_path / "crossner-ai.json", sentences, [s for _, s in sentences])
        )
        assert found.f1 == 1.0 and found.scored == 2
        swapped = write(
            tmp_path / "crossner-ai.json", sentences, [sentences[1][1], sentences[0][1]]
        )
        assert score_one(store, swapped).f1 < 1.0


def test_misc_kept_or_dropped(store: Store, tmp_path: Path) -> None:
    sentences = gold(store)
    preds = perturbed(sentences, 7)
    path = write(tmp_path / "crossner-ai.json", sentences, preds)
    kept, dropped = score_one(store, path, "keep"), score_one(store, path, "drop")
    assert "else" in {s.label for s in kept.labels} and "else" not in {
        s.label for s in dropped.labels
    }
    assert dropped.f1 == reference(sentences, preds, drop="else")["f_score"] != kept.f1


def test_part_of_a_test_set_scores_that_part(store: Store, tmp_path: Path) -> None:
    sentences = gold(store)[:5]
    found = score_one(
        store, write(tmp_path / "crossner-ai.json", sentences, [s for _, s in sentences])
    )
    assert (found.scored, found.sentences, found.f1) == (5, 20, 1.0)


def test_score_tables(store: Store, tmp_path: Path) -> None:
    counts = tmp_path / "scores.csv"
    counts.write_text("benchmark,label,tp,fp,fn\ncrossner-ai,person,3,1,2\ncrossner-ai,Algorithm,4,0,0\n"
                      "crossner-ai,gadget,0,5,0\n", encoding="utf-8")  # fmt: skip
    [found] = score_files(store, prediction_files([str(counts)]))
    assert micro_counts(found) == (7, 6, 2) and found.outside == {"gadget": 5}
    assert {s.label: s.f1 for s in found.labels} == {"person": prf(3, 1, 2)[2], "algorithm": 1.0}
    pct = tmp_path / "pct.tsv"
    pct.write_text("benchmark\tlabel\tf1_pct\nmit-restaurant\tcuisine\t45.8\n", encoding="utf-8")
    [found] = score_files(store, prediction_files([str(pct)]))
    assert found.labels[0].f1 == pytest.approx(0.458) and found.f1 is None
    bad = tmp_path / "bad.csv"
    bad.write_text("benchmark,label,f1\nmit-restaurant,cuisine,45.8\n", encoding="utf-8")
    with pytest.raises(
        SourceFormatError,
        match=r"bad.csv:2: f1: not numbers from 0 to 1; a column of percentages is f1_pct",
    ):
        score_files(store, prediction_files([str(bad)]))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", r"crossner-ai.json: empty file"),
        ("[]", r"crossner-ai.json: holds no sentences"),
        ('[{"tokenized_text": ["a"], "ner": []}, {"tokenized', r"crossner-ai.json:1: record 2: invalid JSON"),
        ('[{"tokenized_text": ["Typical", "models"], "ner": [[0, 5, "task"]]}]',
         r"crossner-ai.json:1: record 1: ner span outside the 2 tokens"),
        ('[{"sentence": "Typical models", "entities": [{"name": "x", "type": "task", "pos": [3, 40]}]}]',
         r"crossner-ai.json:1: record 1: entity pos outside the sentence of 14 characters"),
    ],
)  # fmt: skip
def test_bad_files_are_refused_naming_them(
    store: Store, tmp_path: Path, content: str, message: str
) -> None:
    (tmp_path / "crossner-ai.json").write_text(content, encoding="utf-8")
    with pytest.raises((InputError, SourceFormatError), match=message):
        score_files(store, prediction_files([str(tmp_path / "crossner-ai.json")]))


def test_another_benchmarks_predictions_are_refused(store: Store, tmp_path: Path) -> None:
    sentences = gold(store, "mit-restaurant")
    path = write(tmp_path / "crossner-ai.json", sentences, [s for _, s in sentences])
    with pytest.raises(
        InputError, match=r"3 of 3 sentences match no sentence of crossner-ai \(crossner-ai:test\)"
    ):
        score_one(store, path)


def test_names_and_folders(store: Store, tmp_path: Path) -> None:
    (tmp_path / "preds").mkdir()
    with pytest.raises(InputError, match="holds no predictions file"):
        prediction_files([str(tmp_path / "preds")])
    with pytest.raises(InputError, match="no such predictions file or folder"):
        prediction_files([str(tmp_path / "nothing.json")])
    (tmp_path / "preds" / "mine.json").write_text("[]", encoding="utf-8")
    with pytest.raises(
        InputError, match=r"mine.json: predicts benchmark 'mine' \(its name\), which is neither"
    ):
        score_files(store, prediction_files([str(tmp_path / "preds")]))
    (tmp_path / "preds" / "manifest.json").write_text("{}", encoding="utf-8")
    assert prediction_files([f"crossner-ai={tmp_path / 'preds'}"]) == [
        ("crossner-ai", tmp_path / "preds" / "mine.json")
    ]


def test_a_bad_file_writes_nothing(store_path: Path, tmp_path: Path) -> None:
    (tmp_path / "crossner-ai.json").write_text('[{"tokenized', encoding="utf-8")
    md, png = tmp_path / "t.md", tmp_path / "t.png"
    res = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "crossner-ai.json"), "--db", str(store_path),
                                   "--markdown", str(md)])  # fmt: skip
    assert res.exit_code == 1 and not md.exists() and not png.exists()
    assert (
        res.output.strip().count("\n") == 0
        and "crossner-ai.json:1: record 1: invalid JSON" in res.output
    )


def test_compressed_predictions_read_as_plain(store: Store, tmp_path: Path) -> None:
    import lzma

    sentences = gold(store)
    plain = write(tmp_path / "crossner-ai.json", sentences, perturbed(sentences, 3))
    (tmp_path / "xz").mkdir()
    (tmp_path / "xz" / "crossner-ai.json.xz").write_bytes(lzma.compress(plain.read_bytes()))
    [found] = score_files(store, prediction_files([str(tmp_path / "xz")]))
    assert found.name == "crossner-ai" and micro_counts(found) == micro_counts(
        score_one(store, plain)
    )


def test_tables_are_verbalised_and_say_what_they_lack(store: Store, tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_text("benchmark,label,tp,fp,fn\ncrossner-ai,PER,3,1,2\ncrossner-ai,organisation,2,0,1\n"
                     "crossner-ai,misc,4,4,4\ncrossner-ai,programlang,1,0,0\n", encoding="utf-8")  # fmt: skip
    [found] = score_files(store, prediction_files([str(table)]), "drop")
    assert {s.label for s in found.labels} == {"person", "organization", "program language"}
    assert micro_counts(found) == (6, 1, 3) and not found.outside
    assert any("lists 3 of crossner-ai's 13 labels" in n for n in found.notes)
    f1_only = tmp_path / "f.csv"
    f1_only.write_text(
        "benchmark,label,f1\ncrossner-ai,person,0.5\ncrossner-ai,gadget,0.1\n", encoding="utf-8"
    )
    [found] = score_files(store, prediction_files([str(f1_only)]))
    assert found.outside == {"gadget": 0} and any(
        "labels crossner-ai lacks: gadget" in n for n in found.notes
    )


def test_a_benchmark_with_no_label_left_is_out_of_the_macro(
    store_path: Path, tmp_path: Path
) -> None:
    from builders.evaluate import EvaluateRequest, evaluate

    (tmp_path / "t.csv").write_text("benchmark,label,tp,fp,fn\ncrossner-ai,else,1,0,0\n"
                                    "mit-restaurant,cuisine,1,1,0\n", encoding="utf-8")  # fmt: skip
    with Store(store_path, read_only=True) as store:
        found = evaluate(store, EvaluateRequest((str(tmp_path / "t.csv"),), misc="drop"))
    assert found.benchmark_f1 == {"crossner-ai": None, "mit-restaurant": prf(1, 1, 0)[2]}
    assert found.macro_f1 == prf(1, 1, 0)[2]
    assert any(
        "macro F1 over 1 benchmarks: crossner-ai have no micro F1" in n for n in found.notes()
    )


def test_a_partial_file_says_so(store_path: Path, tmp_path: Path) -> None:
    from builders.evaluate import EvaluateRequest, evaluate

    with Store(store_path, read_only=True) as store:
        sentences = gold(store)[:5]
        write(tmp_path / "crossner-ai.json", sentences, [s for _, s in sentences])
        found = evaluate(store, EvaluateRequest((str(tmp_path / "crossner-ai.json"),)))
    assert found.notes() == ["test sets predicted in part (crossner-ai 5 of 20 sentences): their scores are of "
                             "the sentences predicted, as GLiNER's evaluate scores the sentences it is given"]  # fmt: skip
