"""Publishing: the push path against a local Hub-API server, and the downstream
`load_dataset("org/pilener-low-shift")` against a real Hub-API server (olah, offline mirror).

No hub is reachable: `tests/hubserver.py` implements the endpoints huggingface_hub calls to
push; olah serves a git repo of the published folder the way the Hub serves a dataset.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner

from builders.cli.main import cli
from builders.errors import BuildersError
from builders.hub.publish import PublishError, plan_publish, publish, retry_delay

sys.path.insert(0, str(Path(__file__).parent.parent))
from helpers import LABELS_A, bio_corpus
from hubserver import HubServer

TOKEN = "hf_testTOKENdoNotLeak0123456789"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real repo folder `pilener-low-shift` (entropy + max configs) built with MiniLM."""
    from builders.splits import SplitConfig, build
    from builders.store import Store
    from builders.store.ingest import ingest

    root = tmp_path_factory.mktemp("published")
    corpus = bio_corpus(root / "corpus.txt", LABELS_A, 80)
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    try:
        with Store(root / "store.duckdb") as store:
            ingest(store, "columns", corpus, name="pilener")
            for strategy in ("entropy", "max"):
                cfg = SplitConfig(  # a 20-label corpus: tiny levels are what this test needs
                    source="pilener",
                    strategy=strategy,
                    levels=("low",),
                    model="all-MiniLM-L6-v2",
                    min_labels=1,
                    min_mentions=1,
                )
                build(store, cfg, root / "out")
    finally:
        mp.undo()
    folder = root / "out" / "pilener-low-shift"
    assert (folder / "README.md").exists()
    return folder


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> HubServer:
    from huggingface_hub import constants

    server = HubServer(token=TOKEN).start()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    # huggingface_hub reads these once, at import.
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-saved-token"))
    yield server
    server.stop()


def _no_sleep(waits: list[float]):  # type: ignore[no-untyped-def]
    return waits.append


# ---------------------------------------------------------------------------- plan
def test_plan_lists_files_and_refuses_non_repo_folders(published: Path, tmp_path: Path) -> None:
    plan = plan_publish(published, "org")
    assert plan.repo_id == "org/pilener-low-shift"
    paths = [f.path_in_repo for f in plan.files]
    assert "README.md" in paths and "entropy/train-00000-of-00001.parquet" in paths
    assert "max/train-00000-of-00001.parquet" in paths
    assert all(f.size == (published / f.path_in_repo).stat().st_size for f in plan.files)
    (tmp_path / "empty").mkdir()
    with pytest.raises(BuildersError, match=r"no README\.md"):
        plan_publish(tmp_path / "empty", "org")
    (tmp_path / "empty" / "README.md").write_text("---\n---\n")
    with pytest.raises(BuildersError, match="no parquet"):
        plan_publish(tmp_path / "empty", "org")
    with pytest.raises(BuildersError, match="no such folder"):
        plan_publish(tmp_path / "nope", "org")


# ---------------------------------------------------------------------------- push
def test_push_one_commit_with_every_file_and_a_tag(
    published: Path, hub: HubServer, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    [res] = publish([plan_publish(published, "org")], token=TOKEN, tag="v1.0", backoff=0)
    repo = hub.repos["org/pilener-low-shift"]
    assert hub.count("commit") == 1
    assert len(repo.commits) == 2  # the Hub's initial commit, then ours
    ours = repo.commits[-1]
    local = {
        p.relative_to(published).as_posix(): p.read_bytes()
        for p in published.rglob("*")
        if p.is_file()
    }
    assert sorted(ours.added) == sorted(local)
    for path, data in local.items():
        assert repo.files[path] == data, path
    assert repo.tags == {"v1.0": ours.oid}
    assert res.commit_oid == ours.oid and res.tag == "v1.0" and res.files == len(local)
    assert all(a == f"Bearer {TOKEN}" for a in hub.auth_seen)
    out = capsys.readouterr()
    logs = "\n".join(r.getMessage() for r in caplog.records)
    assert TOKEN not in out.out + out.err + logs
    for path, data in local.items():
        assert TOKEN.encode() not in data, path


def test_republish_mirrors_the_folder_and_refuses_an_existing_tag(
    published: Path, hub: HubServer, tmp_path: Path
) -> None:
    folder = tmp_path / "pilener-low-shift"
    shutil.copytree(published, folder)
    (folder / "extra.json").write_text("{}\n")
    publish([plan_publish(folder, "org")], token=TOKEN, tag="v1", backoff=0)
    (folder / "extra.json").unlink()
    [res] = publish([plan_publish(folder, "org")], token=TOKEN, tag="v2", backoff=0)
    repo = hub.repos["org/pilener-low-shift"]
    assert res.deleted == ["extra.json"]
    assert "extra.json" not in repo.files and ".gitattributes" in repo.files
    assert set(repo.tags) == {"v1", "v2"}
    with pytest.raises(PublishError, match="already has a tag 'v2'"):
        publish([plan_publish(folder, "org")], token=TOKEN, tag="v2", backoff=0)
    assert len(repo.commits) == 3  # init + two pushes; the refused one committed nothing


def test_no_token_is_a_clear_error(published: Path, hub: HubServer) -> None:
    with pytest.raises(
        BuildersError, match="not logged in to the Hugging Face Hub: run `hf auth login`"
    ):
        publish([plan_publish(published, "org")])
    assert hub.calls == []
    result = CliRunner().invoke(cli, ["publish", str(published), "--org", "org"])
    assert result.exit_code == 1
    assert (
        "Error: not logged in to the Hugging Face Hub: run `hf auth login` or set HF_TOKEN"
        in result.output
    )


def test_token_from_env_and_429_then_success(
    published: Path, hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub.fail("commit", 429, times=2, retry_after="3")
    hub.fail("create_repo", 503, times=1)
    waits: list[float] = []
    [res] = publish([plan_publish(published, "org")], backoff=0.5, sleep=_no_sleep(waits))
    assert hub.count("commit") == 3 and hub.count("create_repo") == 2
    assert waits == [0.5, 3.0, 3.0]  # backoff for the 503, Retry-After for the 429s
    assert len(hub.repos["org/pilener-low-shift"].commits) == 2
    assert res.commit_oid == hub.repos["org/pilener-low-shift"].head


def test_other_4xx_is_not_retried(published: Path, hub: HubServer) -> None:
    hub.fail("commit", 403, times=None)
    waits: list[float] = []
    with pytest.raises(PublishError, match="HTTP 403"):
        publish([plan_publish(published, "org")], token=TOKEN, sleep=_no_sleep(waits))
    assert hub.count("commit") == 1 and waits == []


def test_server_error_on_commit_leaves_nothing_half_published(
    published: Path, hub: HubServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    second = tmp_path / "pilener-high-shift"
    shutil.copytree(published, second)
    third = tmp_path / "pilener-medium-shift"
    shutil.copytree(published, third)
    plans = [plan_publish(p, "org") for p in (published, second, third)]
    # The first repo goes through; every commit after it fails with 500.
    hub.fail("commit", 500, times=None, after=1)
    waits: list[float] = []
    with pytest.raises(PublishError) as err:
        publish(plans, token=TOKEN, retries=2, backoff=0.1, sleep=_no_sleep(waits))
    msg = str(err.value)
    assert "org/pilener-high-shift failed, nothing of it was committed: HTTP 500" in msg
    assert "published: org/pilener-low-shift" in msg
    assert "not published: org/pilener-high-shift, org/pilener-medium-shift" in msg
    assert err.value.published == ["org/pilener-low-shift"]
    assert waits == pytest.approx([0.1, 0.2])
    assert len(hub.repos["org/pilener-low-shift"].commits) == 2
    high = hub.repos["org/pilener-high-shift"]
    assert [c.summary for c in high.commits] == ["initial commit"]  # no commit of ours
    assert "org/pilener-medium-shift" not in hub.repos
    assert TOKEN not in msg + "\n".join(r.getMessage() for r in caplog.records)


def test_dry_run_pushes_nothing_and_needs_no_login(published: Path, hub: HubServer) -> None:
    result = CliRunner().invoke(
        cli, ["publish", str(published), "--org", "org", "--tag", "v1", "--dry-run", "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["dry_run"] is True
    assert summary["repos"][0]["repo_id"] == "org/pilener-low-shift"
    assert hub.calls == []


def test_cli_json_summary_has_no_token(
    published: Path, hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    result = CliRunner().invoke(
        cli, ["publish", str(published), "--org", "org", "--tag", "v1", "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    [repo] = summary["repos"]
    assert repo["repo_id"] == "org/pilener-low-shift" and repo["tag"] == "v1"
    assert repo["commit_oid"] == hub.repos["org/pilener-low-shift"].head
    assert TOKEN not in result.output


def test_token_in_a_card_is_refused(published: Path, hub: HubServer, tmp_path: Path) -> None:
    folder = tmp_path / "pilener-low-shift"
    shutil.copytree(published, folder)
    with open(folder / "README.md", "a", encoding="utf-8") as fh:
        fh.write(f"\ntoken: {TOKEN}\n")
    with pytest.raises(BuildersError) as err:
        publish([plan_publish(folder, "org")], token=TOKEN)
    assert "contains the Hugging Face token" in str(err.value) and TOKEN not in str(err.value)
    assert hub.calls == []


def test_retry_delay_caps_retry_after() -> None:
    class R:
        headers: ClassVar[dict[str, str]] = {"Retry-After": "3600"}

    class E(Exception):
        response = R()

    assert retry_delay(E(), 0, 1.0) == 60.0
    assert retry_delay(Exception(), 3, 1.0) == 8.0


# ---------------------------------------------------------------------------- olah
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.org",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.org",
        },
    )


LOAD = """
import json, sys
from datasets import load_dataset
out = {}
for config in (None, "max"):
    ds = load_dataset("org/pilener-low-shift", config) if config else load_dataset("org/pilener-low-shift")
    train = ds["train"]
    out[config or "default"] = {
        "rows": train.num_rows,
        "features": repr(train.features),
        "first": train[0],
    }
json.dump(out, sys.stdout)
"""


@pytest.mark.skipif(
    importlib.util.find_spec("olah") is None,
    reason="olah is not installed (pip install -e '.[dev]' installs it)",
)
@pytest.mark.skipif(shutil.which("git") is None, reason="git is needed for olah's mirror")
def test_load_dataset_from_olah_mirror(published: Path, tmp_path: Path) -> None:
    """The downstream call itself, against a real Hub-API server serving the folder."""
    import pyarrow.parquet as pq

    repo = tmp_path / "mirrors" / "datasets" / "org" / "pilener-low-shift"
    shutil.copytree(published, repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "publish")
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout.strip()
    # Offline, olah answers revision-less lookups (`GET /api/datasets/org/name`, which
    # load_dataset makes) from its metadata cache, not from the mirror: seed that cache.
    head = (
        tmp_path / "repos" / "api" / "datasets" / "org" / "pilener-low-shift" / "revision" / "main"
    )
    head.mkdir(parents=True)
    (head / "meta_head.json").write_text(
        json.dumps({"sha": sha, "lastModified": "2025-01-01T00:00:00+00:00"}), encoding="utf-8"
    )
    port = _free_port()
    config = tmp_path / "olah.toml"
    config.write_text(
        "[basic]\n"
        'host = "127.0.0.1"\n'
        f"port = {port}\n"
        f'repos-path = "{tmp_path / "repos"}"\n'
        f'mirrors-path = ["{tmp_path / "mirrors"}"]\n'
        'mirror-scheme = "http"\n'
        f'mirror-netloc = "127.0.0.1:{port}"\n'
        f'mirror-lfs-netloc = "127.0.0.1:{port}"\n'
        "[accessibility]\n"
        "offline = true\n",
        encoding="utf-8",
    )
    log = open(tmp_path / "olah.log", "wb")  # noqa: SIM115 - closed in the finally below
    server = subprocess.Popen(
        [sys.executable, "-m", "olah.server", "--config", str(config)],
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/datasets/org/pilener-low-shift", timeout=2)
                break
            except Exception:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        "olah did not start:\n" + (tmp_path / "olah.log").read_text()[-3000:]
                    ) from None
                time.sleep(0.3)
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
        }
        env.update(
            HF_ENDPOINT=url,
            HF_HOME=str(tmp_path / "hf-home"),
            HF_DATASETS_CACHE=str(tmp_path / "hf-home" / "datasets"),
            HF_HUB_DISABLE_XET="1",
        )
        done = subprocess.run(
            [sys.executable, "-c", LOAD], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, (
            done.stderr[-4000:] + (tmp_path / "olah.log").read_text()[-2000:]
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    got = json.loads(done.stdout)
    for config, key in (("entropy", "default"), ("max", "max")):
        table = pq.read_table(published / config / "train-00000-of-00001.parquet")
        assert got[key]["rows"] == table.num_rows
        first = table.slice(0, 1).to_pylist()[0]
        assert got[key]["first"] == first
        feats = got[key]["features"]
        assert "'spans': List({'start': Value('int32')" in feats
        assert "'negatives': List(Value('string'))" in feats


def test_a_taken_tag_on_any_repo_stops_the_push_before_any_commit(
    published: Path, hub: HubServer, tmp_path: Path
) -> None:
    second = tmp_path / "pilener-high-shift"
    shutil.copytree(published, second)
    publish([plan_publish(second, "org")], token=TOKEN, tag="v1", backoff=0)
    commits = hub.count("commit")
    with pytest.raises(BuildersError, match="org/pilener-high-shift already has a tag 'v1'"):
        publish([plan_publish(p, "org") for p in (published, second)], token=TOKEN, tag="v1")
    assert hub.count("commit") == commits  # the first repo was not pushed either
    assert "org/pilener-low-shift" not in hub.repos


def test_tag_failure_after_the_commit_says_it_is_committed(published: Path, hub: HubServer) -> None:
    hub.fail("tag", 403, times=None)
    with pytest.raises(PublishError) as err:
        publish([plan_publish(published, "org")], token=TOKEN, tag="v1", backoff=0)
    repo = hub.repos["org/pilener-low-shift"]
    msg = str(err.value)
    assert msg.startswith(
        f"org/pilener-low-shift: committed {repo.head}, but tagging it 'v1' failed: HTTP 403"
    )
    assert err.value.published == ["org/pilener-low-shift"] and err.value.not_published == []
    assert len(repo.commits) == 2 and repo.tags == {}
