"""The `hf` source: local Hugging Face datasets (save_to_disk and parquet folders), never a hub.

Sentences are real: the first two sentences of CrossNER AI's test.txt (zliucr/CrossNER, MIT)
and the first two of Few-NERD INTER's test.txt (CC BY-SA 4.0), with their published tags.
"""

from __future__ import annotations

from pathlib import Path

import datasets
import pytest
from datasets import ClassLabel, Dataset, DatasetDict, Features, List, Value

from builders.errors import BuildersError, SourceFormatError
from builders.sources import hf
from builders.store import Store
from builders.store.ingest import ingest


@pytest.fixture(autouse=True)
def _hub_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`datasets` and `huggingface_hub` read HF_HUB_OFFLINE and the cache paths at import time,
    which can precede conftest's environment: set their module constants too."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets-cache")


CROSSNER_AI = [
    (
        "Typical generative model approaches include naive Bayes classifier s , Gaussian mixture "
        "model s , variational autoencoders and others .",
        "O O O O O B-algorithm I-algorithm I-algorithm O O B-algorithm I-algorithm I-algorithm O O "
        "B-algorithm I-algorithm O O O",
    ),
    (
        "Finally , every other year , ELRA organizes a major conference LREC , the International "
        "Language Resources and Evaluation Conference .",
        "O O O O O O B-conference O O O O B-conference O O B-conference I-conference I-conference "
        "I-conference I-conference I-conference O",
    ),
]
NAMES = ["O", "B-algorithm", "I-algorithm", "B-conference", "I-conference"]
# (start, stop, label) of the two sentences, stop exclusive
SPANS = [
    [(5, 8, "algorithm"), (10, 13, "algorithm"), (15, 17, "algorithm")],
    [(6, 7, "conference"), (11, 12, "conference"), (14, 20, "conference")],
]

FEWNERD = [
    (
        "The stadium previously hosted the 1982 Commonwealth Games and 2001 Goodwill Games .",
        ["O"] * 6 + ["event-sportsevent"] * 2 + ["O", "O"] + ["event-sportsevent"] * 2 + ["O"],
    ),
    (
        "The San Diego Harbor Police Department is the law enforcement authority for the Port of "
        "San Diego .",
        ["O"]
        + ["organization-government/governmentagency"] * 5
        + ["O"] * 7
        + ["location-bodiesofwater"] * 4
        + ["O"],
    ),
]


def _crossner_columns() -> dict[str, list]:
    return {
        "tokens": [s.split() for s, _ in CROSSNER_AI],
        "ner_tags": [[NAMES.index(t) for t in tags.split()] for _, tags in CROSSNER_AI],
    }


def _classlabel_features() -> Features:
    return Features({"tokens": List(Value("string")), "ner_tags": List(ClassLabel(names=NAMES))})


def _mentions(db: Path, source: str = "mine") -> dict[str, list[list[tuple[int, int, str]]]]:
    with Store(db) as store:
        rows = store.con.execute(
            "SELECT split, idx, start, stop, label FROM mentions WHERE source = ? "
            "ORDER BY split, idx, start",
            [source],
        ).fetchall()
    out: dict[str, list[list[tuple[int, int, str]]]] = {}
    for split, idx, start, stop, label in rows:
        sents = out.setdefault(split, [])
        while len(sents) <= idx:
            sents.append([])
        sents[idx].append((start, stop, label))
    return out


def test_save_to_disk_classlabel(tmp_path: Path, db: Path) -> None:
    ds = Dataset.from_dict(_crossner_columns(), features=_classlabel_features())
    folder = tmp_path / "crossner-ai"
    DatasetDict({"train": ds, "validation": ds.select([1])}).save_to_disk(str(folder))

    with Store(db) as store:
        result = ingest(store, "hf", str(folder), name="mine")
    assert result.source == "mine"
    assert [(s.split, s.sentences, s.mentions) for s in result.splits] == [
        ("train", 2, 6),
        ("dev", 1, 3),
    ]
    assert result.types == 2
    assert result.splits[0].report["notes"] == [f"{folder}/train: tag scheme detected as BIO"]
    assert _mentions(db) == {"train": SPANS, "dev": [SPANS[1]]}
    with Store(db) as store:
        tokens = store.con.execute(
            "SELECT tokens FROM sentences WHERE source = 'mine' AND split = 'train' AND idx = 1"
        ).fetchone()[0]
    assert tokens == CROSSNER_AI[1][0].split()


def test_one_split_only(tmp_path: Path, db: Path) -> None:
    ds = Dataset.from_dict(_crossner_columns(), features=_classlabel_features())
    folder = tmp_path / "crossner-ai"
    DatasetDict({"train": ds, "validation": ds.select([1])}).save_to_disk(str(folder))
    with Store(db) as store:
        result = ingest(store, "hf", str(folder), name="mine", split="dev")
    assert [(s.split, s.sentences) for s in result.splits] == [("dev", 1)]
    with pytest.raises(BuildersError) as err:
        hf.available_splits(str(folder), None, split="test")
    assert str(err.value) == f"{folder}: no split 'test' (available: train, validation)"


def test_plain_string_tags_single_dataset(tmp_path: Path, db: Path) -> None:
    ds = Dataset.from_dict(
        {
            "tokens": [s.split() for s, _ in CROSSNER_AI],
            "ner_tags": [t.split() for _, t in CROSSNER_AI],
        }
    )
    folder = tmp_path / "strings"
    ds.save_to_disk(str(folder))  # a single Dataset: stored as train
    with Store(db) as store:
        result = ingest(store, "hf", str(folder), name="mine")
    assert [(s.split, s.sentences, s.mentions) for s in result.splits] == [("train", 2, 6)]
    assert _mentions(db) == {"train": SPANS}


def test_parquet_folder(tmp_path: Path, db: Path) -> None:
    ds = Dataset.from_dict(_crossner_columns(), features=_classlabel_features())
    folder = tmp_path / "pq"
    folder.mkdir()
    ds.select([0]).to_parquet(str(folder / "train.parquet"))
    ds.select([1]).to_parquet(str(folder / "test.parquet"))
    with Store(db) as store:
        result = ingest(store, "hf", str(folder), name="mine")
    assert [(s.split, s.sentences, s.mentions) for s in result.splits] == [
        ("train", 1, 3),
        ("test", 1, 3),
    ]
    assert _mentions(db) == {"test": [SPANS[1]], "train": [SPANS[0]]}


def test_fewnerd_like_fine_tags_column(tmp_path: Path, db: Path) -> None:
    """Few-NERD on the Hub: coarse `ner_tags` and fine `fine_ner_tags`, both IO ClassLabels."""
    fine = sorted({t for _, tags in FEWNERD for t in tags} - {"O"})
    fine_names = ["O", *fine]
    coarse_names = ["O", "event", "location", "organization"]
    features = Features(
        {
            "id": Value("string"),
            "tokens": List(Value("string")),
            "ner_tags": List(ClassLabel(names=coarse_names)),
            "fine_ner_tags": List(ClassLabel(names=fine_names)),
        }
    )
    ds = Dataset.from_dict(
        {
            "id": ["0", "1"],
            "tokens": [s.split() for s, _ in FEWNERD],
            "ner_tags": [
                [coarse_names.index(t.split("-")[0]) if t != "O" else 0 for t in tags]
                for _, tags in FEWNERD
            ],
            "fine_ner_tags": [[fine_names.index(t) for t in tags] for _, tags in FEWNERD],
        },
        features=features,
    )
    folder = tmp_path / "few-nerd"
    DatasetDict({"test": ds}).save_to_disk(str(folder))
    with Store(db) as store:
        result = ingest(
            store, "hf", str(folder), name="mine", options={"tags_column": "fine_ner_tags"}
        )
        coarse = ingest(store, "hf", str(folder), name="coarse")
    assert result.splits[0].report["notes"] == [
        f"{folder}/test: tag scheme detected as IO",
        f"{folder}/test: columns not read: id (2), ner_tags (2)",  # counted and named
        "3 tags not in the packaged table, kept as written (normalised): event-sportsevent, "
        "location-bodiesofwater, organization-government/governmentagency; --label-map FILE "
        "verbalises them",
    ]
    assert result.splits[0].report["counts"] == {"columns_not_read": 4}
    assert _mentions(db) == {
        "test": [
            [(6, 8, "event-sportsevent"), (10, 12, "event-sportsevent")],
            [
                (1, 6, "organization-government/governmentagency"),
                (13, 17, "location-bodiesofwater"),
            ],
        ]
    }
    assert _mentions(db, "coarse") == {
        "test": [
            [(6, 8, "event"), (10, 12, "event")],
            [(1, 6, "organization"), (13, 17, "location")],
        ]
    }
    assert coarse.types == 3


def test_missing_column_lists_available(tmp_path: Path, db: Path) -> None:
    ds = Dataset.from_dict(_crossner_columns(), features=_classlabel_features())
    folder = tmp_path / "crossner-ai"
    DatasetDict({"test": ds}).save_to_disk(str(folder))
    with Store(db) as store, pytest.raises(BuildersError) as err:
        ingest(store, "hf", str(folder), name="mine", options={"tags_column": "fine_ner_tags"})
    assert str(err.value) == (
        f"{folder}/test: no column 'fine_ner_tags' (available columns: tokens, ner_tags); "
        "choose one with -o tags_column=<column>"
    )
    with Store(db) as store:
        assert not store.has_source("mine")  # nothing written


def test_length_mismatch_names_split_and_row(tmp_path: Path, db: Path) -> None:
    cols = _crossner_columns()
    cols["ner_tags"][1] = cols["ner_tags"][1][:-1]
    folder = tmp_path / "bad"
    DatasetDict({"train": Dataset.from_dict(cols, features=_classlabel_features())}).save_to_disk(
        str(folder)
    )
    with Store(db) as store, pytest.raises(SourceFormatError) as err:
        ingest(store, "hf", str(folder), name="mine")
    assert str(err.value).startswith(f"{folder}/train:1: 20 tags for 21 tokens (row 1): ['O', ")


def test_bad_bio_reports_row_and_token(tmp_path: Path, db: Path) -> None:
    ds = Dataset.from_dict(
        {"tokens": [["ELRA", "organizes", "LREC"]], "ner_tags": [["O", "O", "I-conference"]]}
    )
    folder = tmp_path / "lax"
    DatasetDict({"train": ds}).save_to_disk(str(folder))
    with Store(db) as store, pytest.raises(SourceFormatError) as err:
        ingest(store, "hf", str(folder), name="mine", options={"scheme": "bio"})
    assert str(err.value) == (
        f"{folder}/train:0: token 2: I- tag after O (expected B-conference; use repair to read it "
        "as B-, with --repair or -o repair=true) (row 0): 'I-conference'"
    )
    with Store(db) as store:
        result = ingest(
            store, "hf", str(folder), name="mine", options={"scheme": "bio", "repair": True}
        )
    assert result.splits[0].report["counts"] == {"repaired_tags": 1}
    assert _mentions(db) == {"train": [[(2, 3, "conference")]]}


def test_classlabel_id_out_of_range(tmp_path: Path, db: Path) -> None:
    ds = Dataset.from_dict(
        {"tokens": [["a", "b"]], "ner_tags": [[0, -1]]},
        features=Features({"tokens": List(Value("string")), "ner_tags": List(Value("int64"))}),
    )
    ds = ds.cast_column("ner_tags", List(ClassLabel(names=NAMES)))
    folder = tmp_path / "neg"
    DatasetDict({"train": ds}).save_to_disk(str(folder))
    with Store(db) as store, pytest.raises(SourceFormatError) as err:
        ingest(store, "hf", str(folder), name="mine")
    assert str(err.value) == f"{folder}/train:0: tag id outside the ClassLabel's 5 names: -1"


def test_hub_id_offline_is_a_clean_error() -> None:
    with pytest.raises(BuildersError) as err:
        hf.available_splits("DFKI-SLT/few-nerd", "supervised")
    assert str(err.value).startswith("DFKI-SLT/few-nerd[supervised]: cannot load the dataset (")


@pytest.mark.parametrize(
    ("tags", "scheme"),
    [
        (["O", "B-x", "I-x"], "bio"),
        (["O", "S-x", "B-y", "E-y"], "bioes"),
        (["O", "I-x"], "io"),
        (["O", "person-artist/author", "art"], "io"),
    ],
)
def test_detect_scheme(tags: list[str], scheme: str) -> None:
    assert hf.detect_scheme(tags) == scheme


def test_local_folder_reingest_follows_its_bytes(tmp_path: Path, db: Path) -> None:
    ds = Dataset.from_dict(_crossner_columns(), features=_classlabel_features())
    folder = tmp_path / "pq"
    folder.mkdir()
    ds.select([0]).to_parquet(str(folder / "train.parquet"))
    with Store(db) as store:
        assert ingest(store, "hf", str(folder), name="mine").status == "ingested"
        assert ingest(store, "hf", str(folder), name="mine").status == "unchanged"
        ds.to_parquet(str(folder / "train.parquet"))  # the data changed: two rows now
        again = ingest(store, "hf", str(folder), name="mine")
    assert (again.status, again.sentences) == ("ingested", 2)


def test_words_read_as_io_tags_are_refused(db: Path, tmp_path: Path) -> None:
    """Tokens and tags swapped: the `ner_tags` column holds words, which IO would accept."""
    folder = tmp_path / "swapped"
    folder.mkdir()
    (folder / "train.jsonl").write_text(
        '{"tokens": ["B-person", "O", "B-person"], "ner_tags": ["Ada", "met", "Alan"]}\n'
        '{"tokens": ["O", "O"], "ner_tags": ["in", "Paris"]}\n',
        encoding="utf-8",
    )
    with Store(db) as store, pytest.raises(SourceFormatError) as err:
        ingest(store, "hf", str(folder))
    assert str(err.value) == (
        f"{folder}/train: column 'ner_tags' read as IO tags looks like words: the token column "
        "holds only tags; its most frequent value is 'Ada' (1 rows). Choose the columns with "
        "-o tokens_column=... -o tags_column=..., or pass -o scheme=io if these really are IO "
        "types"
    )
