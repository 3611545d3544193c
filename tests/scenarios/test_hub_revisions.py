"""A Hub dataset's revision: resolved when it is read, recorded as the input's fingerprint and
in build.json, named when it moves, and never taken as unchanged when the Hub cannot be
asked. The Hub is stood in for (`FakeHub`): no test reaches a network."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import LABELS_A, LABELS_B

from builders.cli.main import cli
from builders.errors import BuildersError, HubUnreachable, InputError
from builders.scenarios.book import load_scenarios
from builders.scenarios.regenerate import regenerate
from builders.store import Store

DATASET = "org/ds"


def rows(labels: list[str], n: int) -> dict[str, list[Any]]:
    """A train split of `n` sentences, one entity each, as a Hub dataset of string tags."""
    tokens, tags = [], []
    for i in range(n):
        lab = labels[i % len(labels)]
        tokens.append(["the", f"Name{i}", f"Part{i}", "."])
        tags.append(["O", f"B-{lab}", f"I-{lab}", "O"])
    return {"tokens": tokens, "ner_tags": tags}


class FakeHub:
    """`HfApi.dataset_info`, `datasets.get_dataset_split_names` and `datasets.load_dataset`
    for one dataset whose main branch moves (`push`); `offline` makes the API fail as
    huggingface_hub does in offline mode. `loads` records the commits the rows came from."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import datasets
        from huggingface_hub import HfApi

        self.commits: dict[str, dict[str, Any]] = {}
        self.main: str | None = None
        self.offline = False
        self.loads: list[str | None] = []
        monkeypatch.setattr(HfApi, "dataset_info", self.dataset_info)
        monkeypatch.setattr(datasets, "get_dataset_split_names", self.split_names)
        monkeypatch.setattr(datasets, "load_dataset", self.load_dataset)

    def push(self, train: dict[str, list[Any]]) -> str:
        sha = hashlib.sha1(json.dumps(train).encode()).hexdigest()
        self.commits[sha], self.main = train, sha
        return sha

    def dataset_info(self, repo_id: str, *, revision: str | None = None, **kw: Any) -> Any:
        import httpx
        from huggingface_hub.errors import OfflineModeIsEnabled, RevisionNotFoundError

        if self.offline:
            raise OfflineModeIsEnabled(f"Cannot reach {repo_id}: offline mode is enabled.")
        sha = self.main if revision in (None, "main") else revision
        if repo_id != DATASET or sha not in self.commits:
            response = httpx.Response(404, request=httpx.Request("GET", "http://hub/api"))
            raise RevisionNotFoundError(f"{repo_id}@{revision}", response=response)
        return SimpleNamespace(sha=sha)

    def split_names(self, path: str, config_name: Any = None, **kw: Any) -> list[str]:
        return ["train"]

    def load_dataset(self, path: str, name: Any = None, **kw: Any) -> Any:
        import datasets

        self.loads.append(kw.get("revision"))
        return datasets.Dataset.from_dict(self.commits[kw.get("revision") or str(self.main)])


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    return FakeHub(monkeypatch)


BOOK = f"""
[defaults]
out = "out"
model = "all-MiniLM-L6-v2"
benchmarks = "crossner-ai"
min_labels = 1
min_mentions = 1
leakage = false

[[scenario]]
name = "pub-entropy"
source = "hf"
path = "{DATASET}"
store_as = "pub"
strategy = "entropy"
levels = ["low", "high"]
"""


def test_hub_revision_says_unreachable_apart_from_refused(fake_hub: FakeHub) -> None:
    """Offline mode, a failed connection and a server error are `HubUnreachable`; a dataset
    or revision the Hub does not have is a plain error; a commit needs no lookup to read."""
    import httpx

    from builders.sources import hf

    a = fake_hub.push(rows(LABELS_A, 3))
    assert hf.hub_revision(DATASET) == a == hf.hub_revision(DATASET, a)
    with pytest.raises(BuildersError, match=r"org/ds@nope: no such dataset or revision") as err:
        hf.hub_revision(DATASET, "nope")
    assert not isinstance(err.value, HubUnreachable)
    fake_hub.offline = True
    with pytest.raises(HubUnreachable, match=r"org/ds: the Hub cannot be reached"):
        hf.hub_revision(DATASET)
    assert hf.resolve_revision(DATASET, a) == (a, [])  # a commit: as given, nothing asked
    commit, notes = hf.resolve_revision(DATASET, None)
    assert commit is None and "its commit is not recorded" in notes[0]
    for exc in (
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
        SimpleNamespace(response=SimpleNamespace(status_code=503)),
    ):
        assert hf._unreachable(exc)  # type: ignore[arg-type]
    assert not hf._unreachable(ValueError("a bug"))


def test_a_hub_refusal_is_not_taken_for_being_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure that is no connection, timeout, server error or 429 (a 401, a bug), and an
    answer with no commit, are refused: read as "offline", the input would be recorded
    without its commit (`resolve_revision`) or the stored copy used unchecked."""
    from huggingface_hub import HfApi

    from builders.sources import hf

    class Unauthorized(Exception):
        response = SimpleNamespace(status_code=401)

    def refuse(self: Any, *a: Any, **kw: Any) -> Any:
        raise Unauthorized("401 Client Error")

    monkeypatch.setattr(HfApi, "dataset_info", refuse)
    with pytest.raises(InputError, match=r"org/ds: the Hub did not answer \(Unauthorized"):
        hf.resolve_revision(DATASET, None)
    monkeypatch.setattr(HfApi, "dataset_info", lambda self, *a, **kw: SimpleNamespace(sha=None))
    with pytest.raises(InputError, match=r"org/ds@main: the Hub gave no commit for it"):
        hf.resolve_revision(DATASET, "main")


def test_a_hub_inputs_fingerprint_holds_its_commit() -> None:
    """Without a commit a Hub input keeps the fingerprint it had before commits were
    recorded (stores are not read again for it); each commit is another input."""
    from builders.sources import get_source
    from builders.sources.base import DatasetSplit
    from builders.sources.planning import ReadPlan, parse_options
    from builders.store.writer import unit_fingerprint, unit_key

    def fingerprint(unit: DatasetSplit) -> str:
        plan = ReadPlan("hf", {"train": [unit]}, parse_options("hf", {}), {}, DATASET)
        return unit_fingerprint(get_source("hf"), plan, unit)

    bare = DatasetSplit(DATASET, None, "train")
    at_a, at_b = (DatasetSplit(DATASET, None, "train", revision=c * 40) for c in "ab")
    assert fingerprint(bare) == "782ed00b5c18c1cc4fa82956d3926404fe9314e6972d4c357de2ca7fa0fbe8a2"
    assert len({fingerprint(bare), fingerprint(at_a), fingerprint(at_b)}) == 3
    assert unit_key(at_a) == unit_key(bare) == "org/ds/train"  # the same input, another commit


def _regenerate(book: Path, db: Path, **kw: Any) -> Any:
    scenarios = load_scenarios(book)
    with Store(db) as store:
        [rep] = regenerate(store, scenarios.scenarios, scenarios.out, **kw)
        return rep


def test_regenerate_follows_a_hub_datasets_revision(fake_hub: FakeHub, tmp_path: Path) -> None:
    """The commit read is in the store, build.json (inputs and recipe), the key and the card;
    a new commit rebuilds, named in the reason, the changelog and the table; offline the
    stored copy is used and said to be unchecked; a pinned commit is read, and one the store
    does not hold is refused offline, naming `revision`."""
    a = fake_hub.push(rows(LABELS_A, 60))
    book, db = tmp_path / "scenarios.toml", tmp_path / "s.duckdb"
    book.write_text(BOOK, encoding="utf-8")
    out = tmp_path / "out"
    built = _regenerate(book, db)
    assert built.status == "built" and fake_hub.loads == [a]
    assert built.revisions == {"pub": {"splits": {"train": a}, "checked": True}}
    record = json.loads((out / "pub-low-shift" / "entropy" / "build.json").read_text("utf-8"))
    [stored] = record["provenance"]["source"]["splits"]["train"]["inputs"]
    assert (stored["input"], stored["revision"]) == ("org/ds/train", a)
    recipe = f"builders ingest hf --path org/ds --revision {a} --name pub"
    assert record["provenance"]["recipe"] == [recipe]
    assert record["scenario"]["parts"]["revisions"] == {"train": a}
    card = (out / "pub-low-shift" / "README.md").read_text("utf-8")
    assert f"`org/ds/train @ {a[:12]}`" in card
    assert _regenerate(book, db).status == "reused"

    b = fake_hub.push(rows(LABELS_A + LABELS_B, 80))
    moved = _regenerate(book, db)
    assert moved.status == "rebuilt" and fake_hub.loads[-1] == b
    assert moved.reason == f"Hub revision {a[:12]} -> {b[:12]} (train)"
    change = moved.inputs["pub"]["train"]
    assert change["revision"] == [a, b] and change["sentences"] == [60, 80]
    line = f"input pub/train: ~org/ds/train; Hub revision {a[:12]} -> {b[:12]}; 60 -> 80 sentences"
    assert f"{line}, 60 -> 80 mentions" in moved.lines()
    log = json.loads((out / "pub-low-shift" / "changelog.json").read_text("utf-8"))
    assert log[0]["input"]["pub"]["train"]["revision"] == [a, b]
    assert f"Hub revision {a[:12]} -> {b[:12]}" in (out / "pub-low-shift" / "README.md").read_text()

    fake_hub.offline = True
    args = ["regenerate", "--scenarios", str(book), "--db", str(db), "-q"]
    table = CliRunner().invoke(cli, args, env={"COLUMNS": "400"})  # a line a change
    assert table.exit_code == 0, table.output
    assert (
        "reused" in table.stdout and "unchanged (Hub revision not checked: offline)" in table.stdout
    )
    res = CliRunner().invoke(cli, [*args, "--json"])
    [rep] = json.loads(res.stdout)["result"]
    assert rep["revisions"] == {"pub": {"splits": {"train": b}, "checked": False}}
    assert any(f"store's copy (revision {b[:12]}) is used" in n for n in rep["notes"])

    book.write_text(BOOK + f'revision = "{a}"\n', encoding="utf-8")
    with pytest.raises(BuildersError) as err:  # pinned to a commit the store does not hold
        _regenerate(book, db)
    assert "`revision` pins org/ds at" in str(err.value) and "the Hub cannot be reached" in str(
        err.value
    )
    fake_hub.offline = False
    pinned = _regenerate(book, db)
    assert pinned.status == "rebuilt" and fake_hub.loads[-1] == a
    assert pinned.reason == f"Hub revision {b[:12]} -> {a[:12]} (train)"
    fake_hub.offline = True
    again = _regenerate(book, db)
    assert again.status == "reused" and "pinned revision" in again.reason


def test_a_hub_dataset_never_read_is_refused_offline(fake_hub: FakeHub, tmp_path: Path) -> None:
    """Offline, a Hub input the store does not hold yet cannot be read: its scenario is
    skipped, as one whose input is absent (an error with --only); `revision` on a scenario
    whose input is files is refused naming the key."""
    fake_hub.push(rows(LABELS_A, 10))
    fake_hub.offline = True
    book, db = tmp_path / "scenarios.toml", tmp_path / "s.duckdb"
    book.write_text(BOOK, encoding="utf-8")
    skipped = _regenerate(book, db)
    assert skipped.status == "skipped" and "'pub' is not in the store yet" in skipped.reason
    with pytest.raises(BuildersError, match=r"'pub' is not in the store yet"):
        _regenerate(book, db, only=["pub-entropy"])
    (tmp_path / "a.txt").write_text("x\tB-person\n", encoding="utf-8")
    text = BOOK.replace('source = "hf"', 'source = "columns"').replace(DATASET, "a.txt")
    book.write_text(text + 'revision = "main"\n', encoding="utf-8")
    with pytest.raises(BuildersError, match=r"`revision` pins a Hub dataset's commit"):
        _regenerate(book, db)


def test_ingest_revision_is_for_hub_datasets(tmp_path: Path) -> None:
    """`builders ingest --revision` pins a Hub dataset; files are refused, before a store."""
    from helpers import bio_corpus

    corpus = bio_corpus(tmp_path / "a.txt", LABELS_A, 5)
    db = tmp_path / "s.duckdb"
    args = ["ingest", "columns", "--path", str(corpus), "--revision", "main", "--db", str(db)]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1 and not db.exists()
    assert f"a revision pins a Hub dataset, and {corpus} is read as files" in res.output
