"""Publishing: the push path against a local Hub-API server (`tests/hubserver.py`, the
endpoints huggingface_hub calls to push). What a user does with the pushed card is in
`test_card_lines.py`."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner
from helpers import TOKEN, json_result
from hubserver import HubServer

from builders import __version__
from builders.cli.main import cli
from builders.errors import BuildersError, InvalidValue
from builders.hub.changelog import named_by, run_version
from builders.hub.outdir import MANIFEST
from builders.hub.publish import (
    PublishError,
    plan_publish,
    publication_year,
    publish,
    retry_delay,
)
from builders.hub.readme import folder_card
from builders.names import printable, valid_tag


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
    [res] = publish([plan_publish(published, "org")], token=TOKEN, tag="v1.0")
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
    # The card is rendered again for the repo it goes to, in the same commit; the folder's
    # own card (for the folder name) is left as it is.
    card = repo.files.pop("README.md").decode()
    year = publication_year()
    assert card == folder_card(published, "org/pilener-low-shift", year=year)
    assert f"  year         = {{{year}}}," in card  # the pushed card's citation is dated
    assert 'load_dataset("org/pilener-low-shift", split="train")' in card
    assert "builders export-gliner org/pilener-low-shift --config entropy" in card
    assert local.pop("README.md").decode() == folder_card(published, "pilener-low-shift")
    for path, data in local.items():
        assert repo.files[path] == data, path
    hidden = [p.name for p in published.parent.iterdir() if p.name.startswith(".")]
    assert hidden == [MANIFEST]  # the build's manifest; the stage is gone
    assert repo.tags == {"v1.0": ours.oid}
    assert res.commit_oid == ours.oid and res.tag == "v1.0" and res.files == len(ours.added)
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
    publish([plan_publish(folder, "org")], token=TOKEN, tag="v1")
    (folder / "extra.json").unlink()
    [res] = publish([plan_publish(folder, "org")], token=TOKEN, tag="v2")
    repo = hub.repos["org/pilener-low-shift"]
    assert res.deleted == ["extra.json"]
    assert "extra.json" not in repo.files and ".gitattributes" in repo.files
    assert set(repo.tags) == {"v1", "v2"}
    with pytest.raises(PublishError, match="already has a tag 'v2'"):
        publish([plan_publish(folder, "org")], token=TOKEN, tag="v2")
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
    published: Path, hub: HubServer, monkeypatch: pytest.MonkeyPatch, waits: list[float]
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    hub.fail("commit", 429, times=2, retry_after="3")
    hub.fail("create_repo", 503, times=1)
    [res] = publish([plan_publish(published, "org")])
    assert hub.count("commit") == 3 and hub.count("create_repo") == 2
    # ours for the 503 on create_repo (1 s), huggingface_hub's for the 429s on the commit
    # (Retry-After + 1 s)
    assert waits == [1.0, 4.0, 4.0]
    assert len(hub.repos["org/pilener-low-shift"].commits) == 2
    assert res.commit_oid == hub.repos["org/pilener-low-shift"].head


def test_without_hf_xet_it_is_one_create_commit(
    published: Path,
    hub: HubServer,
    monkeypatch: pytest.MonkeyPatch,
    waits: list[float],
    tmp_path: Path,
) -> None:
    """HF_HUB_DISABLE_XET (or no hf_xet): upload_folder makes one `create_commit`, which
    huggingface_hub sends once: a 503 on it fails the push, nothing committed."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    [res] = publish([plan_publish(published, "org")], token=TOKEN)
    repo = hub.repos["org/pilener-low-shift"]
    assert hub.count("commit") == 1 and hub.count("validate_yaml") >= 1  # the card's YAML
    assert res.commit_oid == repo.head and len(repo.commits) == 2
    folder = tmp_path / "pilener-medium-shift"
    shutil.copytree(published, folder)
    hub.fail("commit", 503, times=1)
    with pytest.raises(PublishError, match="nothing of it was committed: HTTP 503"):
        publish([plan_publish(folder, "org")], token=TOKEN)
    assert [c.summary for c in hub.repos["org/pilener-medium-shift"].commits] == ["initial commit"]
    assert waits == []


def test_other_4xx_is_not_retried(published: Path, hub: HubServer, waits: list[float]) -> None:
    hub.fail("commit", 403, times=None)
    with pytest.raises(PublishError, match="HTTP 403"):
        publish([plan_publish(published, "org")], token=TOKEN)
    assert hub.count("commit") == 1 and waits == []
    hub.fail("create_repo", 400, times=None)
    with pytest.raises(PublishError, match="HTTP 400"):
        publish([plan_publish(published, "org")], token=TOKEN)
    assert hub.count("create_repo") == 2 and waits == []


def test_server_error_on_commit_leaves_nothing_half_published(
    published: Path,
    hub: HubServer,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    waits: list[float],
) -> None:
    caplog.set_level(logging.DEBUG)
    second = tmp_path / "pilener-high-shift"
    shutil.copytree(published, second)
    third = tmp_path / "pilener-medium-shift"
    shutil.copytree(published, third)
    plans = [plan_publish(p, "org") for p in (published, second, third)]
    # The first repo goes through; every commit after it fails with 500.
    hub.fail("commit", 500, times=None, after=1)
    with pytest.raises(PublishError) as err:
        publish(plans, token=TOKEN)
    msg = str(err.value)
    assert "org/pilener-high-shift failed, nothing of it was committed: HTTP 500" in msg
    assert "published: org/pilener-low-shift" in msg
    assert "not published: org/pilener-high-shift, org/pilener-medium-shift" in msg
    assert err.value.published == ["org/pilener-low-shift"]
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0]  # huggingface_hub's backoff, then it gives up
    assert hub.count("commit") == 1 + 6
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
    summary = json_result(result.stdout)
    assert summary["dry_run"] is True
    assert summary["repos"][0]["repo_id"] == "org/pilener-low-shift"
    assert hub.calls == []


@pytest.mark.parametrize("name", ["my corpus-low-shift", "a--b-low-shift", "x" * 90 + "-low-shift"])
def test_a_repo_name_the_hub_refuses_is_refused_before_any_push(
    published: Path, hub: HubServer, tmp_path: Path, name: str
) -> None:
    """A folder name the Hub takes no repo by (a space, `--`, over 96 characters) is refused
    by the dry run too, before anything is pushed, naming the folder and the fix."""
    folder = tmp_path / name
    shutil.copytree(published, folder)
    for extra in (["--dry-run"], []):
        result = CliRunner().invoke(cli, ["publish", str(folder), "--org", "org", *extra])
        assert result.exit_code == 1
        line = result.output.strip().splitlines()[-1]  # after the note on the copied folder
        assert line.startswith(f"Error: {folder}: the Hub takes no repo named 'org/{name}'")
        assert "--org an account name, or build" in line and "ingest --name" in line
    assert hub.calls == []


def test_dry_run_text_is_on_stdout_only(published: Path, hub: HubServer) -> None:
    result = CliRunner().invoke(
        cli, ["publish", str(published), "--org", "org", "--private", "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0].startswith("would push org/pilener-low-shift: 10 files, ")
    assert lines[0].endswith(" (private)")
    plan = plan_publish(published, "org")
    card = len(plan.card.encode())
    assert any(line.startswith("  README.md  ") for line in lines[1:])
    files = {f["path"]: f["size"] for f in plan.to_dict()["files"]}
    assert files["README.md"] == card and "METHOD.md" in files
    assert hub.calls == []


def test_private_applies_to_existing_repos_too(published: Path, hub: HubServer) -> None:
    plan = plan_publish(published, "org")
    publish([plan], token=TOKEN)
    repo = hub.repos["org/pilener-low-shift"]
    assert repo.private is False and hub.count("settings") == 0  # the Hub's default, untouched
    [res] = publish([plan], token=TOKEN, private=True)
    assert repo.private is True and res.private is True
    publish([plan], token=TOKEN)  # no flag: the repo stays as it is
    assert repo.private is True
    publish([plan], token=TOKEN, private=False)
    assert repo.private is False and hub.count("settings") == 2


def test_republishing_an_unchanged_folder_commits_nothing_and_tags_the_head(
    published: Path, hub: HubServer
) -> None:
    plan = plan_publish(published, "org")
    [first] = publish([plan], token=TOKEN, tag="v1")
    [again] = publish([plan], token=TOKEN, tag="v2")
    repo = hub.repos["org/pilener-low-shift"]
    assert len(repo.commits) == 2 and hub.count("commit") == 1  # huggingface_hub skipped it
    assert again.commit_oid == first.commit_oid == repo.head and again.deleted == []
    assert repo.tags == {"v1": repo.head, "v2": repo.head}


def test_cli_json_summary_has_no_token(
    published: Path, hub: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    result = CliRunner().invoke(
        cli, ["publish", str(published), "--org", "org", "--tag", "v1", "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json_result(result.stdout)
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

    assert retry_delay(E(), 0) == 8.0
    assert [retry_delay(Exception(), a) for a in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]


def test_a_taken_tag_on_any_repo_stops_the_push_before_any_commit(
    published: Path, hub: HubServer, tmp_path: Path
) -> None:
    second = tmp_path / "pilener-high-shift"
    shutil.copytree(published, second)
    publish([plan_publish(second, "org")], token=TOKEN, tag="v1")
    commits = hub.count("commit")
    with pytest.raises(BuildersError, match="org/pilener-high-shift already has a tag 'v1'"):
        publish([plan_publish(p, "org") for p in (published, second)], token=TOKEN, tag="v1")
    assert hub.count("commit") == commits  # the first repo was not pushed either
    assert "org/pilener-low-shift" not in hub.repos


def test_tag_failure_after_the_commit_says_it_is_committed(published: Path, hub: HubServer) -> None:
    hub.fail("tag", 403, times=None)
    with pytest.raises(PublishError) as err:
        publish([plan_publish(published, "org")], token=TOKEN, tag="v1")
    repo = hub.repos["org/pilener-low-shift"]
    msg = str(err.value)
    assert msg.startswith(
        f"org/pilener-low-shift: committed {repo.head}, but tagging it 'v1' failed: HTTP 403"
    )
    assert err.value.published == ["org/pilener-low-shift"] and err.value.not_published == []
    assert len(repo.commits) == 2 and repo.tags == {}


# ---------------------------------------------------------------------------- the tag
def _with_changelog(published: Path, where: Path, version: str) -> Path:
    """A copy of `published` whose changelog has one entry, named `version`."""
    folder = where / published.name
    shutil.copytree(published, folder)
    entry = {"version": version, "run": "0123abcd", "note": "s: first build", "changes": {}}
    (folder / "changelog.json").write_text(json.dumps([entry], indent=2, sort_keys=True) + "\n")
    return folder


def test_a_tagged_push_names_an_untagged_entry_by_its_tag(
    published: Path, hub: HubServer, tmp_path: Path
) -> None:
    """`publish --tag v1.1` of a folder whose newest changelog entry was built untagged: the
    commit message, the pushed card's heading and changelog.json name v1.1; the folder is
    left as it is (`regenerate --publish` keeps the name there: tests/scenarios)."""
    folder = _with_changelog(published, tmp_path, run_version(None))
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    dry = CliRunner().invoke(cli, ["publish", str(folder), "--org", "org", "--tag", "v1.1",
                                   "--dry-run", "--json", "-q"])  # fmt: skip
    assert dry.exit_code == 0, dry.output
    sizes = {f["path"]: f["size"] for f in json_result(dry.stdout)["repos"][0]["files"]}
    [res] = publish([plan_publish(folder, "org")], token=TOKEN, tag="v1.1")  # planned untagged
    repo = hub.repos["org/pilener-low-shift"]
    assert (
        repo.commits[-1].summary
        == f"Publish pilener-low-shift v1.1 (labelshift-builders {__version__})"
    )
    card = repo.files["README.md"].decode()
    assert "### v1.1" in card and "untagged" not in card
    assert json.loads(repo.files["changelog.json"])[0]["version"] == "v1.1"
    assert {p: len(repo.files[p]) for p in sizes} == sizes  # the dry run sized what was pushed
    assert res.tag == "v1.1"
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    publish([plan_publish(folder, "org", tag="v1.1")], token=TOKEN, tag="v2")  # planned for v1.1
    assert json.loads(repo.files["changelog.json"])[0]["version"] == "v2"
    assert repo.commits[-1].summary.startswith("Publish pilener-low-shift v2 (")


def test_an_entry_built_for_a_tag_keeps_it(published: Path, hub: HubServer, tmp_path: Path) -> None:
    folder = _with_changelog(published, tmp_path, "v1.0")
    log = json.loads((folder / "changelog.json").read_text())
    assert named_by(log, "v1.1") is log and named_by(log, None) is log
    plan = plan_publish(folder, "org", tag="v1.1")
    assert plan.changelog is None and "### v1.0" in plan.card
    untagged = [{**log[0], "version": run_version(None)}, log[0]]
    assert named_by(untagged, "v1.1") == [{**log[0], "version": "v1.1"}, log[0]]
    assert named_by(untagged, None) is untagged


BAD_TAGS = ["bad tag", "v1..0~^:", "-v1", "v1.lock", "a/.b", "v1.", "x//y", "/v1", "a@{1}",
            "a\x1bb", "a?b", "a*b", "a[b", "a\\b", "a:b", "", "@", "HEAD"]  # fmt: skip
GOOD_TAGS = ["v1.0", "v1.1-rc.2", "release/2025", "a@b", "é1", "v1_0+x"]


@pytest.mark.library_surface  # the library's `tag=`; the commands set their own
@pytest.mark.parametrize("tag", BAD_TAGS)
def test_a_tag_git_refuses_is_refused_before_anything_is_pushed(
    published: Path, hub: HubServer, tag: str
) -> None:
    """A tag git (`check-ref-format`, `git tag`) refuses: one line naming `--tag` (`tag=` from
    Python) and the value, from the dry run too, before any call to the Hub."""
    for extra in (["--dry-run"], []):
        res = CliRunner().invoke(cli, ["publish", str(published), "--org", "org", "--tag", tag,
                                       *extra])  # fmt: skip
        assert res.exit_code == 2, res.output
        line = res.output.strip().splitlines()[-1]
        assert line.startswith("Error: Invalid value for '--tag': must be a name git takes")
        assert printable(repr(tag)) in line
    plan = plan_publish(published, "org")
    for call in (
        lambda: plan_publish(published, "org", tag=tag),
        lambda: publish([plan], token=TOKEN, tag=tag, dry_run=True),
        lambda: publish([plan], token=TOKEN, tag=tag),
    ):
        with pytest.raises(InvalidValue, match=r"^tag= must be a name git takes") as err:
            call()
        assert printable(repr(tag)) in str(err.value) and "\n" not in str(err.value)
    assert hub.calls == []


@pytest.mark.parametrize("tag", GOOD_TAGS)
def test_a_tag_git_takes_is_taken(tag: str) -> None:
    assert valid_tag(tag) == tag


@pytest.mark.skipif(shutil.which("git") is None, reason="no git here")
def test_the_tag_check_agrees_with_git() -> None:
    """Every tag refused here git refuses too, but `-v1`, `@` and `HEAD` (`git tag` refuses
    `-v1`; `@` and `HEAD` name revisions), and every tag taken here git takes."""
    import subprocess

    def git_takes(tag: str) -> bool:
        run = subprocess.run(["git", "check-ref-format", f"refs/tags/{tag}"], check=False)
        return run.returncode == 0

    assert [t for t in BAD_TAGS if git_takes(t)] == ["-v1", "@", "HEAD"]
    assert all(git_takes(t) for t in GOOD_TAGS)


# ---------------------------------------------------------------------------- unknown files
@pytest.mark.parametrize("extra", ["notes.txt", "extra/notes.txt", "data.parquet"])
def test_a_file_no_build_wrote_at_the_top_is_refused(
    published: Path, hub: HubServer, tmp_path: Path, extra: str
) -> None:
    """A file at the top of a folder its build's manifest knows (beside README.md), or in a
    folder that is no config, is refused as one inside a config is, naming it; README.md,
    METHOD.md, changelog.json and the configs are what a build writes there."""
    out = tmp_path / "out"
    shutil.copytree(published.parent, out)
    folder = out / published.name
    (folder / "changelog.json").write_text("[]\n")  # the scenarios' rebuild writes one
    assert {p.name for p in folder.iterdir()} == {"README.md", "METHOD.md", "changelog.json",
                                                  "entropy", "max"}  # fmt: skip
    plan_publish(folder, "org")
    (folder / extra).parent.mkdir(exist_ok=True)
    (folder / extra).write_text("mine\n")
    with pytest.raises(BuildersError, match="not written by its build") as err:
        plan_publish(folder, "org")
    assert str(err.value).startswith(f"{folder / extra}: ")
    res = CliRunner().invoke(cli, ["publish", str(folder), "--org", "org", "--dry-run"])
    assert res.exit_code == 1 and "would push" not in res.output
    assert res.output.startswith(f"Error: {folder / extra}: not written by its build")
    assert hub.calls == []
