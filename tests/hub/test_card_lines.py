"""The pushed card's own lines, run as a user copies them.

A folder is pushed to the org `testorg` on the fake Hub (`tests/hubserver.py`); what the fake
Hub received is then served by olah (a real Hub-API server, offline, from a git mirror), and
the card's `load_dataset(...)` lines and its `builders export-gliner ...` line, parsed out of
the pushed README.md, are run against it in a fresh process, as a user would run them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from helpers import TOKEN
from hubserver import HubServer

import builders
from builders.hub.export import export_gliner
from builders.hub.publish import plan_publish, publish

REPO = "testorg/pilener-low-shift"
ROOT = Path(builders.__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("olah") is None,
        reason="olah is not installed (pip install -e '.[dev]' installs it)",
    ),
    pytest.mark.skipif(shutil.which("git") is None, reason="git is needed for olah's mirror"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env
    )
    return done.stdout.strip()


def _mirror(root: Path, repo_id: str, files: dict[str, bytes]) -> None:
    """`files` as the git repo olah mirrors, and the cached head olah answers offline
    revision-less lookups (`GET /api/datasets/org/name`, which load_dataset makes) from."""
    repo = root / "mirrors" / "datasets" / repo_id
    for path, data in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(data)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "publish")
    sha = _git(repo, "rev-parse", "HEAD")
    head = root / "repos" / "api" / "datasets" / repo_id / "revision" / "main"
    head.mkdir(parents=True)
    (head / "meta_head.json").write_text(
        json.dumps({"sha": sha, "lastModified": "2025-01-01T00:00:00+00:00"}), encoding="utf-8"
    )


@contextmanager
def _olah(root: Path, repo_id: str) -> Iterator[str]:
    """olah serving `root`'s mirror offline; yields its URL."""
    port = _free_port()
    config = root / "olah.toml"
    config.write_text(
        "[basic]\n"
        'host = "127.0.0.1"\n'
        f"port = {port}\n"
        f'repos-path = "{root / "repos"}"\n'
        f'mirrors-path = ["{root / "mirrors"}"]\n'
        'mirror-scheme = "http"\n'
        f'mirror-netloc = "127.0.0.1:{port}"\n'
        f'mirror-lfs-netloc = "127.0.0.1:{port}"\n'
        "[accessibility]\n"
        "offline = true\n",
        encoding="utf-8",
    )
    log = open(root / "olah.log", "wb")  # noqa: SIM115 - closed in the finally below
    server = subprocess.Popen(
        [sys.executable, "-m", "olah.server", "--config", str(config)],
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/datasets/{repo_id}", timeout=2)
                break
            except Exception:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        "olah did not start:\n" + (root / "olah.log").read_text()[-3000:]
                    ) from None
                time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def _user_env(root: Path, url: str) -> dict[str, str]:
    """A user's environment pointed at the mirror: online, empty caches, this toolkit."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    env.update(
        HF_ENDPOINT=url,
        HF_HOME=str(root / "hf-home"),
        HF_DATASETS_CACHE=str(root / "hf-home" / "datasets"),
        HF_HUB_DISABLE_XET="1",
        PYTHONPATH=str(ROOT),
    )
    return env


def _script(loads: list[str]) -> str:
    """A script holding the card's `load_dataset` lines, pasted as they are."""
    lines = ["import json, sys", "from datasets import load_dataset", "out = []"]
    for line in loads:
        lines += [
            f"ds = {line}",
            'out.append({"rows": ds.num_rows, "features": repr(ds.features), "first": ds[0]})',
        ]
    return "\n".join([*lines, "json.dump(out, sys.stdout)", ""])


def test_the_pushed_cards_lines_load_the_data(
    published: Path, hub: HubServer, tmp_path: Path
) -> None:
    publish([plan_publish(published, "testorg")], token=TOKEN)
    files = hub.repos[REPO].files
    card = files["README.md"].decode()
    code = re.search(r"```python\n(.*?)```", card, re.S)
    assert code, "the card has a python block"
    loads = re.findall(r"^ds = (load_dataset\(.*\))$", code.group(1), re.M)
    assert loads == [
        f'load_dataset("{REPO}", split="train")',
        f'load_dataset("{REPO}", "max", split="train")',
    ]
    [export] = re.findall(r"`(builders export-gliner [^`]+)`", card)
    assert export.startswith(f"builders export-gliner {REPO} ")
    _mirror(tmp_path, REPO, {p: d for p, d in files.items() if p != ".gitattributes"})
    user = tmp_path / "user"
    user.mkdir()
    (user / "load.py").write_text(_script(loads), encoding="utf-8")
    args = shlex.split(export)
    with _olah(tmp_path, REPO) as url:
        env = _user_env(tmp_path, url)
        loaded, exported = (
            subprocess.run(cmd, env=env, cwd=user, capture_output=True, text=True, timeout=300)
            for cmd in ([sys.executable, "load.py"], [sys.executable, "-m", "builders", *args[1:]])
        )
        assert loaded.returncode == 0, loaded.stderr[-4000:]
        assert exported.returncode == 0, exported.stderr[-4000:]
    got = json.loads(loaded.stdout)
    for config, ds in zip(("entropy", "max"), got, strict=True):
        table = pq.read_table(published / config / "train-00000-of-00001.parquet")
        assert ds["rows"] == table.num_rows
        assert ds["first"] == table.slice(0, 1).to_pylist()[0]
        assert "'spans': List({'start': Value('int32')" in ds["features"]
        assert "'negatives': List(Value('string'))" in ds["features"]
    out = user / args[args.index("--out") + 1]
    export_gliner(published, "entropy", tmp_path / "local.json")
    assert out.read_bytes() == (tmp_path / "local.json").read_bytes()
    assert f"read from the Hub dataset repo {REPO}" in exported.stderr
