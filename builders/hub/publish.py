"""Push dataset repo folders to the Hugging Face Hub: one commit per repo, then a version tag.

    plan_publish(folder, org) -> PublishPlan      (pure: what would be pushed, with sizes)
    publish(plans, token=..., tag=...)            (I/O: create repo, one commit, tag)

Each repo gets exactly one commit holding every file of its folder (and the deletion of remote
files the folder no longer has, so the repo mirrors the folder): a failure before the commit
leaves the repo as it was. Calls are retried with exponential backoff on 429 and 5xx (honouring
`Retry-After`); other 4xx fail at once. The token comes from the argument, `HF_TOKEN` or the
saved login and is never printed, logged or written: errors are scrubbed of it.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, TypeVar

from builders import __version__
from builders.errors import BuildersError

log = logging.getLogger(__name__)
T = TypeVar("T")

REPO_TYPE = "dataset"
#: Longest wait between two tries, whatever the backoff or `Retry-After` asks for.
MAX_WAIT = 60.0
#: Files the Hub creates itself; never deleted to mirror the folder.
HUB_MANAGED = frozenset({".gitattributes"})
#: Text files scanned for the token before pushing (a token in a card would be public).
TEXT_SUFFIXES = (".md", ".json", ".txt", ".yaml", ".yml", ".toml", ".csv", ".jsonl")
NOT_LOGGED_IN = (
    "not logged in to the Hugging Face Hub: run `hf auth login` or set HF_TOKEN "
    "(a token with write access to the organisation)"
)


class NotLoggedInError(BuildersError):
    """No token: none given, no `HF_TOKEN`, no saved login."""


class PublishError(BuildersError):
    """A push failed; says which repos were published before it and which were not."""

    def __init__(self, message: str, published: list[str], not_published: list[str]):
        self.published, self.not_published = published, not_published
        super().__init__(message)


@dataclass(frozen=True)
class PublishFile:
    path_in_repo: str
    local: Path
    size: int


@dataclass(frozen=True)
class PublishPlan:
    """One folder to push as the dataset repo `{org}/{folder.name}`."""

    folder: Path
    repo_id: str
    files: tuple[PublishFile, ...]

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "folder": str(self.folder),
            "files": [{"path": f.path_in_repo, "size": f.size} for f in self.files],
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
    private: bool = False
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_publish(folder: str | Path, org: str) -> PublishPlan:
    """What pushing `folder` would upload. Refuses folders that are not dataset repo folders.

    Hidden files and folders (temporary folders of an interrupted write, caches) are left out.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise BuildersError(f"{folder}: no such folder (give a folder written by build-splits)")
    if not org or "/" in org or org.strip() != org:
        raise BuildersError(f"--org must be a user or organisation name like `my-org`, got {org!r}")
    files = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        files.append(PublishFile(rel.as_posix(), path, path.stat().st_size))
    names = {f.path_in_repo for f in files}
    if "README.md" not in names:
        raise BuildersError(
            f"{folder}: not a dataset repo folder: no README.md (build it with build-splits "
            "or fewnerd-splits first)"
        )
    if not any(n.endswith(".parquet") for n in names):
        raise BuildersError(f"{folder}: not a dataset repo folder: no parquet data files")
    return PublishPlan(folder=folder.resolve(), repo_id=f"{org}/{folder.name}", files=tuple(files))


def resolve_token(token: str | None = None) -> str:
    """The token to push with: the argument, `HF_TOKEN`, or the saved login (`hf auth login`)."""
    if token:
        return token
    from huggingface_hub import get_token

    found = os.environ.get("HF_TOKEN") or get_token()
    if not found:
        raise NotLoggedInError(NOT_LOGGED_IN)
    return found


def endpoint() -> str | None:
    """`HF_ENDPOINT` read at call time (huggingface_hub reads it once, at import)."""
    return os.environ.get("HF_ENDPOINT") or None


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def retry_delay(exc: BaseException, attempt: int, backoff: float) -> float:
    """Seconds before try `attempt + 1`: `Retry-After` if the server sent it, else exponential."""
    response = getattr(exc, "response", None)
    header = None
    if response is not None:
        header = response.headers.get("Retry-After")
    if header:
        try:
            return min(max(float(header), 0.0), MAX_WAIT)
        except ValueError:
            try:
                when = parsedate_to_datetime(header)
                now = _dt.datetime.now(when.tzinfo or _dt.UTC)
                return min(max((when - now).total_seconds(), 0.0), MAX_WAIT)
            except (TypeError, ValueError):
                pass
    return min(backoff * (2**attempt), MAX_WAIT)


def with_retries(
    fn: Callable[[], T],
    what: str,
    *,
    retries: int,
    backoff: float,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call `fn`, retrying on 429 and 5xx up to `retries` times; any other error is raised."""
    from huggingface_hub.errors import HfHubHTTPError

    attempt = 0
    while True:
        try:
            return fn()
        except HfHubHTTPError as exc:
            status = _status(exc)
            transient = status == 429 or (status is not None and status >= 500)
            if not transient or attempt >= retries:
                raise
            wait = retry_delay(exc, attempt, backoff)
            log.warning(
                "%s: HTTP %s, retry %d/%d in %.1fs", what, status, attempt + 1, retries, wait
            )
            sleep(wait)
            attempt += 1


def _scrub(text: str, token: str | None) -> str:
    return text.replace(token, "***") if token else text


def _check_no_token(plan: PublishPlan, token: str) -> None:
    """Refuse to push a text file that contains the token (it would be public)."""
    needle = token.encode()
    for f in plan.files:
        if f.path_in_repo.endswith(TEXT_SUFFIXES) and needle in f.local.read_bytes():
            raise BuildersError(
                f"{f.local}: contains the Hugging Face token; refusing to push it "
                "(remove it from the file and revoke the token)"
            )


def publish(
    plans: list[PublishPlan],
    *,
    token: str | None = None,
    private: bool = False,
    tag: str | None = None,
    dry_run: bool = False,
    api: Any = None,
    retries: int = 5,
    backoff: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    message: str | None = None,
) -> list[PublishResult]:
    """Push each plan as one commit to its dataset repo (created if needed), then tag it.

    Repos are pushed one after the other; if one fails, the ones before it stay published and
    the error (a `PublishError`) names both lists.
    """
    if dry_run:
        return [
            PublishResult(p.repo_id, len(p.files), tag=tag, private=private, dry_run=True)
            for p in plans
        ]
    secret = resolve_token(token)
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(endpoint=endpoint(), token=secret, library_name="labelshift-builders")
    for plan in plans:
        _check_no_token(plan, secret)
    if tag:  # before the first commit: a taken tag on any repo stops the whole push
        for plan in plans:
            try:
                taken = _tag_exists(api, plan.repo_id, tag, secret, retries, backoff, sleep)
            except Exception as exc:
                raise _failed(plans, [], plan, _cause(exc), secret) from None
            if taken:
                raise PublishError(
                    f"{plan.repo_id} already has a tag {tag!r}; choose a new version "
                    "(nothing was pushed)",
                    [],
                    [p.repo_id for p in plans],
                )
    results: list[PublishResult] = []
    for plan in plans:
        try:
            results.append(
                _publish_one(api, plan, secret, private, tag, retries, backoff, sleep, message)
            )
        except _TagFailed as exc:
            results.append(exc.result)
            rest = [p.repo_id for p in plans[len(results) :]]
            msg = (
                f"{plan.repo_id}: committed {exc.result.commit_oid}, but tagging it {tag!r} "
                f"failed: {_scrub(exc.cause, secret)}; publish it again with the same --tag"
                f"\npublished: {', '.join(r.repo_id for r in results)}"
            )
            if rest:
                msg += f"\nnot published: {', '.join(rest)}"
            raise PublishError(msg, [r.repo_id for r in results], rest) from None
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


def _tag_exists(
    api: Any,
    repo_id: str,
    tag: str,
    token: str,
    retries: int,
    backoff: float,
    sleep: Callable[[float], None],
) -> bool:
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        refs = with_retries(
            lambda: api.list_repo_refs(repo_id, repo_type=REPO_TYPE, token=token),
            f"{repo_id}: refs",
            retries=retries,
            backoff=backoff,
            sleep=sleep,
        )
    except RepositoryNotFoundError:
        return False
    return any(t.name == tag for t in refs.tags)


def _failed(
    plans: list[PublishPlan],
    done: list[PublishResult],
    plan: PublishPlan,
    cause: str,
    token: str,
) -> PublishError:
    published = [r.repo_id for r in done]
    rest = [p.repo_id for p in plans[len(done) :]]
    msg = f"publishing {plan.repo_id} failed, nothing of it was committed: {_scrub(cause, token)}"
    if published:
        msg += f"\npublished: {', '.join(published)}"
    msg += f"\nnot published: {', '.join(rest)}"
    return PublishError(msg, published, rest)


def _publish_one(
    api: Any,
    plan: PublishPlan,
    token: str,
    private: bool,
    tag: str | None,
    retries: int,
    backoff: float,
    sleep: Callable[[float], None],
    message: str | None,
) -> PublishResult:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    def retry(fn: Callable[[], T], what: str) -> T:
        return with_retries(
            fn, f"{plan.repo_id}: {what}", retries=retries, backoff=backoff, sleep=sleep
        )

    rid = plan.repo_id
    log.info("%s: creating the repo if needed", rid)
    retry(
        lambda: api.create_repo(
            rid, repo_type=REPO_TYPE, exist_ok=True, private=private, token=token
        ),
        "create repo",
    )
    remote = retry(lambda: api.list_repo_files(rid, repo_type=REPO_TYPE, token=token), "list files")
    local = {f.path_in_repo for f in plan.files}
    stale = sorted(p for p in remote if p not in local and p not in HUB_MANAGED)

    def commit() -> Any:
        # Operations are mutated by create_commit: a retry needs fresh ones.
        ops: list[Any] = [CommitOperationAdd(f.path_in_repo, str(f.local)) for f in plan.files]
        ops += [CommitOperationDelete(p) for p in stale]
        return api.create_commit(
            rid,
            ops,
            commit_message=message
            or f"Publish {plan.folder.name} (labelshift-builders {__version__})",
            commit_description=f"{len(plan.files)} files" + (f", tag {tag}" if tag else ""),
            repo_type=REPO_TYPE,
            token=token,
        )

    log.info("%s: committing %d files (%d bytes)", rid, len(plan.files), plan.total_bytes)
    info = retry(commit, "commit")
    result = PublishResult(
        repo_id=rid,
        files=len(plan.files),
        deleted=stale,
        commit_oid=info.oid,
        commit_url=info.commit_url,
        tag=None,
        private=private,
    )
    if tag:
        log.info("%s: tagging %s", rid, tag)
        try:
            retry(
                lambda: api.create_tag(
                    rid,
                    tag=tag,
                    revision=info.oid,
                    repo_type=REPO_TYPE,
                    token=token,
                    exist_ok=True,
                ),
                "tag",
            )
        except Exception as exc:
            raise _TagFailed(result, _cause(exc)) from None
        result = replace(result, tag=tag)
    return result
