"""Push dataset repo folders to the Hugging Face Hub through huggingface_hub's own machinery.

    plan_publish(folder, org) -> PublishPlan      (what would be pushed: files, sizes, the card)
    plan_publishes(folders, org)                  (the same, the levels checked first)
    publish(plans, token=..., tag=..., private=...)

Each repo gets one commit, `HfApi.upload_folder(..., delete_patterns="*")`: the folder's files,
its card rendered for the repo it goes to, and the deletion of remote files the folder no
longer has. huggingface_hub splits a push into several commits only above 200 files, which
`plan_publish` refuses, so a failure before the commit leaves the repo as it was.

huggingface_hub retries its own listing, pre-upload and commit calls (408, 429, 5xx); the
calls it sends once (`create_repo`, `update_repo_settings`, `list_repo_refs`, `create_tag`)
go through `with_retries`, with its policy. (Without hf_xet, upload_folder's one
`create_commit` is not retried: a 429 or 5xx fails the push, nothing committed.) The token
is never printed, logged or written: errors are scrubbed of it, and a file holding it is
refused.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from builders import __version__
from builders.errors import (
    BuildersError,
    InputError,
    NotLoggedInError,
    PublishError,
    PublishRefused,
    opt,
)
from builders.hub.changelog import CHANGELOG, named_by
from builders.hub.folder import json_text, link_or_copy, read_json
from builders.hub.manifest import check_levels, check_top_level
from builders.hub.readme import CARD, METHOD, folder_card, repo_name
from builders.names import printable, valid_tag

log = logging.getLogger(__name__)
T = TypeVar("T")

REPO_TYPE = "dataset"
#: huggingface_hub's policy (utils/_http.py `http_backoff`), kept for the calls it sends once.
RETRIES = 5
BACKOFF = 1.0
MAX_WAIT = 8.0
#: upload_folder commits at most this many files at once (its first batch); more would be
#: several commits, so a failure could leave a repo half pushed.
MAX_FILES = 200
#: Text files scanned for the token before pushing (a token in a card would be public).
TEXT_SUFFIXES = (".md", ".json", ".txt", ".yaml", ".yml", ".toml", ".csv", ".jsonl")
#: What a build writes at a repo folder's top, beside its configs (`splits.subsets`, the
#: scenarios' rebuild); another file there is refused (`manifest.check_top_level`).
WRITTEN = (CARD, METHOD, CHANGELOG)
NOT_LOGGED_IN = (
    "not logged in to the Hugging Face Hub: run `hf auth login` or set HF_TOKEN "
    "(a token with write access to the organisation)"
)


@dataclass(frozen=True)
class PublishFile:
    path_in_repo: str
    local: Path
    size: int


@dataclass(frozen=True)
class PublishPlan:
    """One folder to push as the dataset repo `{org}/{folder.name}`, with its card for it, for a
    push tagged `tag` (`hub.changelog.named_by`)."""

    folder: Path
    repo_id: str
    files: tuple[PublishFile, ...]  # README.md: the folder's own; `card` is what is pushed
    card: str
    tag: str | None = None
    year: int | None = None  # of the card's citation entry
    changelog: str | None = None  # changelog.json as pushed, where the tag names an entry

    @property
    def pushed(self) -> dict[str, str]:
        """The files pushed with other bytes than the folder's: path in repo -> text."""
        return {CARD: self.card} | ({CHANGELOG: self.changelog} if self.changelog else {})

    def sizes(self) -> dict[str, int]:
        """Each pushed file's size in bytes, by its path in the repo."""
        made = {path: len(text.encode()) for path, text in self.pushed.items()}
        return {f.path_in_repo: f.size for f in self.files} | made

    @property
    def total_bytes(self) -> int:
        return sum(self.sizes().values())

    def to_dict(self) -> dict[str, Any]:
        sizes = self.sizes()
        return {
            "repo_id": self.repo_id,
            "folder": str(self.folder),
            "files": [{"path": p, "size": n} for p, n in sizes.items()],
            "total_bytes": self.total_bytes,
        }


@dataclass
class PublishResult:
    repo_id: str
    files: int
    deleted: list[str] = field(default_factory=list)
    commit_oid: str | None = None
    commit_url: str | None = None
    tag: str | None = None
    private: bool | None = None
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_publish(
    folder: str | Path, org: str, year: int | None = None, tag: str | None = None
) -> PublishPlan:
    """What pushing `folder` to `org` (tagged `tag`) would upload, its card rendered for
    `org/folder` (citation dated `year`, default this year in UTC). Refuses what is not a repo
    folder a build wrote, a top-level file no build writes, and a tag git would refuse; hidden
    entries are left out."""
    if tag is not None:
        valid_tag(tag)
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder (give a folder written by build-splits)")
    repo_id = _hub_repo_id(folder, repo_name(folder, org))
    files = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        files.append(PublishFile(rel.as_posix(), path, path.stat().st_size))
    names = {f.path_in_repo for f in files}
    if CARD not in names:
        raise InputError(
            f"{folder}: not a dataset repo folder: no README.md (build it with build-splits "
            "or fewnerd-splits first)"
        )
    if not any(n.endswith(".parquet") for n in names):
        raise InputError(f"{folder}: not a dataset repo folder: no parquet data files")
    if len(files) > MAX_FILES:
        raise PublishRefused(
            f"{folder}: {len(files)} files; huggingface_hub would push more than {MAX_FILES} "
            "in several commits, and a repo is pushed in one"
        )
    check_top_level(folder, names, WRITTEN)
    year = year or publication_year()
    log = read_json(folder / CHANGELOG) if CHANGELOG in names else None
    named = named_by(log, tag) if isinstance(log, list) else log
    changelog = None if named is log else named  # None: pushed as the folder holds it
    card = folder_card(folder, repo_id, year=year, changelog=changelog)
    pushed = None if changelog is None else json_text(changelog)
    return PublishPlan(folder.resolve(), repo_id, tuple(files), card, tag, year, pushed)


def _hub_repo_id(folder: Path, repo_id: str) -> str:
    """`repo_id` if the Hub takes it (huggingface_hub's own check), else why not and the fix."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        why = str(exc).split(": ")[0]
        raise PublishRefused(
            printable(
                f"{folder}: the Hub takes no repo named {repo_id!r} ({why}): pass {opt('org')} an "
                "account name, or build the folder again under a name the Hub takes (ingest "
                f"{opt('name')}, or NAME= for a benchmark)"
            )
        ) from None
    return repo_id


def publication_year() -> int:
    """This year, in UTC: the year a pushed card's citation entry gives."""
    return _dt.datetime.now(_dt.UTC).year


def plan_publishes(
    folders: Sequence[str | Path],
    org: str,
    *,
    note: Callable[[str], None] | None = None,
    year: int | None = None,
    tag: str | None = None,
) -> list[PublishPlan]:
    """`plan_publish` of each folder, once `check_levels` finds them of one build (`note` gets
    its line about folders it cannot check)."""
    if tag is not None:
        valid_tag(tag)  # before reading any folder
    check_levels([Path(f) for f in folders], note=note)
    return [plan_publish(f, org, year, tag) for f in folders]


def _for_tag(plan: PublishPlan, tag: str | None) -> PublishPlan:
    """`plan` as a push tagged `tag` makes it (planned again if it was made for another)."""
    if plan.tag == tag:
        return plan
    return plan_publish(plan.folder, plan.repo_id.split("/", 1)[0], plan.year, tag)


def resolve_token(token: str | None = None) -> str:
    """The token to push with: the argument, `HF_TOKEN`, or the saved login (`hf auth login`)."""
    if token:
        return token
    from huggingface_hub import get_token

    found = os.environ.get("HF_TOKEN") or get_token()
    if not found:
        raise NotLoggedInError(NOT_LOGGED_IN)
    return found


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def retry_delay(exc: BaseException, attempt: int) -> float:
    """Seconds before try `attempt + 1`: `Retry-After` (seconds or an HTTP date), else 1, 2, 4,
    8, 8 s; at most `MAX_WAIT`."""
    response = getattr(exc, "response", None)
    header = response.headers.get("Retry-After") if response is not None else None
    wait = BACKOFF * (2**attempt)
    if header:
        try:
            wait = max(float(header), 0.0)
        except ValueError:
            from email.utils import parsedate_to_datetime  # 8 ms: not in every --help

            with contextlib.suppress(TypeError, ValueError):
                when = parsedate_to_datetime(header)
                wait = max((when - _dt.datetime.now(when.tzinfo or _dt.UTC)).total_seconds(), 0.0)
    return min(wait, MAX_WAIT)


def with_retries(fn: Callable[[], T], what: str) -> T:
    """Call `fn` (a huggingface_hub call it does not retry itself), retrying on 408, 429 and
    5xx up to `RETRIES` times; any other error is raised."""
    from huggingface_hub.errors import HfHubHTTPError

    attempt = 0
    while True:
        try:
            return fn()
        except HfHubHTTPError as exc:
            status = _status(exc)
            transient = status in (408, 429) or (status is not None and status >= 500)
            if not transient or attempt >= RETRIES:
                raise
            wait = retry_delay(exc, attempt)
            log.warning(
                "%s: HTTP %s, retry %d/%d in %.1fs", what, status, attempt + 1, RETRIES, wait
            )
            time.sleep(wait)
            attempt += 1


def _scrub(text: str, token: str | None) -> str:
    return text.replace(token, "***") if token else text


def _check_no_token(plan: PublishPlan, token: str) -> None:
    """Refuse to push a text file that contains the token (it would be public)."""
    needle = token.encode()
    if needle in plan.card.encode():
        raise PublishRefused(f"{plan.folder}: its card contains the Hugging Face token; refusing")
    for f in plan.files:
        if f.path_in_repo.endswith(TEXT_SUFFIXES) and needle in f.local.read_bytes():
            raise PublishRefused(
                f"{f.local}: contains the Hugging Face token; refusing to push it "
                "(remove it from the file and revoke the token)"
            )


@contextmanager
def staged(plan: PublishPlan) -> Iterator[Path]:
    """The folder as it is pushed (files linked, the card for the repo), in a temp folder
    beside it, removed afterwards."""
    with tempfile.TemporaryDirectory(
        prefix=f".{plan.folder.name}.push.", dir=plan.folder.parent
    ) as d:
        stage = Path(d)
        for f in plan.files:
            dst = stage / f.path_in_repo
            dst.parent.mkdir(parents=True, exist_ok=True)
            if f.path_in_repo in plan.pushed:
                dst.write_text(plan.pushed[f.path_in_repo], encoding="utf-8")
            else:
                link_or_copy(str(f.local), str(dst))
        yield stage


def publish(
    plans: list[PublishPlan],
    *,
    token: str | None = None,
    private: bool | None = None,
    tag: str | None = None,
    dry_run: bool = False,
    api: Any = None,
    message: str | None = None,
    messages: Mapping[str, str] | None = None,
) -> list[PublishResult]:
    """Push each plan as one commit to its dataset repo (created if needed), then tag it.

    The commit message is `messages[repo_id]`, else `message`, else `Publish FOLDER [TAG]
    (labelshift-builders VERSION)`. Repos are pushed one after the other; if one fails, the
    ones before it stay published and the `PublishError` names both lists. A bad or taken
    tag stops the push before the first commit.
    """
    if tag is not None:
        valid_tag(tag)
    plans = [_for_tag(p, tag) for p in plans]
    if dry_run:
        return [
            PublishResult(p.repo_id, len(p.files), tag=tag, private=private, dry_run=True)
            for p in plans
        ]
    secret = resolve_token(token)
    if api is None:
        from huggingface_hub import HfApi

        # HF_ENDPOINT read now: huggingface_hub reads it once, at import
        endpoint = os.environ.get("HF_ENDPOINT") or None
        api = HfApi(endpoint=endpoint, token=secret, library_name="labelshift-builders")
    for plan in plans:
        _check_no_token(plan, secret)
    if tag:
        _refuse_taken_tag(api, plans, tag, secret)
    results: list[PublishResult] = []
    for plan in plans:
        try:
            text = (messages or {}).get(plan.repo_id, message)
            results.append(_publish_one(api, plan, secret, private, tag, text))
        except _TagFailed as exc:
            results.append(exc.result)
            raise _error(
                f"{plan.repo_id}: committed {exc.result.commit_oid}, but tagging it {tag!r} "
                f"failed: {_scrub(exc.cause, secret)}; publish it again with the same {opt('tag')}",
                plans,
                results,
            ) from None
        except BuildersError as exc:
            raise _failed(plans, results, plan, str(exc), secret) from None
        except Exception as exc:
            raise _failed(plans, results, plan, _cause(exc), secret) from None
    return results


def _cause(exc: Exception) -> str:
    status = _status(exc)
    return f"HTTP {status}: {exc}" if status else f"{type(exc).__name__}: {exc}"


class _TagFailed(Exception):
    """The commit landed but the tag did not."""

    def __init__(self, result: PublishResult, cause: str):
        super().__init__(cause)
        self.result, self.cause = result, cause


def _refuse_taken_tag(api: Any, plans: list[PublishPlan], tag: str, token: str) -> None:
    """Before the first commit: a taken tag on any repo stops the whole push."""
    from huggingface_hub.errors import RepositoryNotFoundError

    for plan in plans:
        rid = plan.repo_id
        try:
            refs = with_retries(
                functools.partial(api.list_repo_refs, rid, repo_type=REPO_TYPE, token=token),
                f"{rid}: refs",
            )
        except RepositoryNotFoundError:
            continue
        except Exception as exc:
            raise _failed(plans, [], plan, _cause(exc), token) from None
        if any(t.name == tag for t in refs.tags):
            raise PublishError(
                f"{plan.repo_id} already has a tag {tag!r}; choose a new version "
                "(nothing was pushed)",
                [],
                [p.repo_id for p in plans],
            )


def _failed(
    plans: list[PublishPlan], done: list[PublishResult], plan: PublishPlan, cause: str, token: str
) -> PublishError:
    cause = _scrub(cause, token)
    return _error(
        f"publishing {plan.repo_id} failed, nothing of it was committed: {cause}", plans, done
    )


def _error(msg: str, plans: list[PublishPlan], done: list[PublishResult]) -> PublishError:
    """A `PublishError`: `msg`, then the repos published and those not."""
    published = [r.repo_id for r in done]
    rest = [p.repo_id for p in plans[len(done) :]]
    if published:
        msg += f"\npublished: {', '.join(published)}"
    if rest:
        msg += f"\nnot published: {', '.join(rest)}"
    return PublishError(msg, published, rest)


def _publish_one(
    api: Any,
    plan: PublishPlan,
    token: str,
    private: bool | None,
    tag: str | None,
    message: str | None,
) -> PublishResult:
    rid, call = plan.repo_id, functools.partial
    log.info("%s: creating the repo if needed", rid)
    kw = {"repo_type": REPO_TYPE, "token": token}
    with_retries(call(api.create_repo, rid, exist_ok=True, private=private, **kw), f"{rid}: create")
    if private is not None:  # an existing repo keeps its visibility through create_repo
        with_retries(call(api.update_repo_settings, rid, private=private, **kw), f"{rid}: settings")
    before = set(api.list_repo_files(rid, **kw))
    log.info("%s: committing %d files (%d bytes)", rid, len(plan.files), plan.total_bytes)
    default = " ".join(x for x in ("Publish", plan.folder.name, tag) if x)
    title, _, body = (message or f"{default} (labelshift-builders {__version__})").partition("\n")
    files = f"{len(plan.files)} files" + (f", tag {tag}" if tag else "")
    with staged(plan) as stage:
        info = api.upload_folder(
            repo_id=rid,
            folder_path=stage,
            delete_patterns="*",
            commit_message=title,  # the first line; the rest is the commit's description
            commit_description="\n\n".join(x for x in (body.strip(), files) if x),
            **kw,
        )
    after = set(api.list_repo_files(rid, revision=info.oid, **kw))
    result = PublishResult(
        repo_id=rid,
        files=len(plan.files),
        deleted=sorted(before - after),
        commit_oid=info.oid,
        commit_url=info.commit_url,
        private=private,
    )
    if not tag:
        return result
    log.info("%s: tagging %s", rid, tag)
    try:
        with_retries(
            call(api.create_tag, rid, tag=tag, revision=info.oid, exist_ok=True, **kw),
            f"{rid}: tag",
        )
    except Exception as exc:
        raise _TagFailed(result, _cause(exc)) from None
    return replace(result, tag=tag)
