"""A tiny stand-in for the Hugging Face Hub API, for push tests on loopback.

It implements exactly the endpoints `huggingface_hub` 2.x calls when the publisher pushes a
dataset repo (read from `hf_api.py`, `_commit_api.py` and `_upload_pipeline.py`):

    POST /api/repos/create                          create_repo (409 when it exists)
    PUT  /api/datasets/{org}/{name}/settings        update_repo_settings (visibility, private)
    POST /api/validate-yaml                         upload_folder, when README.md is added
    POST /api/datasets/{org}/{name}/preupload/{rev} upload modes (always "regular": base64 in
                                                    the commit body, so no LFS/Xet transfer),
                                                    with the oid of a file the repo already has
                                                    (the client then skips it if unchanged)
    POST /api/datasets/{org}/{name}/commit/{rev}    NDJSON: a header line, then file lines
    GET  /api/datasets/{org}/{name}/tree/{rev}      list_repo_files (recursive, one page) at a
                                                    branch or a commit
    GET  /api/datasets/{org}/{name}/revision/{rev}  repo_info (after a push that changed nothing)
    GET  /api/datasets/{org}/{name}/refs            list_repo_refs
    POST /api/datasets/{org}/{name}/tag/{rev}       create_tag
    GET  /api/whoami-v2                             whoami

Failure injection: `server.fail("commit", 429, times=1)` answers the next call of an endpoint
with that status (`times=None`: every call; `after=N` lets N calls through first). Every request is recorded in `server.calls`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

REPO_RE = r"/api/datasets/(?P<repo>[^/]+/[^/]+)"
ROUTES = [
    ("POST", re.compile(r"/api/repos/create"), "create_repo"),
    ("PUT", re.compile(REPO_RE + r"/settings"), "settings"),
    ("GET", re.compile(REPO_RE + r"/revision/(?P<rev>[^/]+)"), "revision"),
    ("POST", re.compile(r"/api/validate-yaml"), "validate_yaml"),
    ("POST", re.compile(REPO_RE + r"/preupload/(?P<rev>[^/]+)"), "preupload"),
    ("POST", re.compile(REPO_RE + r"/commit/(?P<rev>[^/]+)"), "commit"),
    ("GET", re.compile(REPO_RE + r"/tree/(?P<rev>[^/]+)(?P<path>/.*)?"), "tree"),
    ("GET", re.compile(REPO_RE + r"/refs"), "refs"),
    ("POST", re.compile(REPO_RE + r"/tag/(?P<rev>[^/]+)"), "tag"),
    ("GET", re.compile(r"/api/whoami-v2"), "whoami"),
]


@dataclass
class Commit:
    oid: str
    summary: str
    files: dict[str, bytes]  # the whole tree after this commit
    added: list[str]
    deleted: list[str]
    description: str = ""


@dataclass
class Repo:
    repo_id: str
    private: bool
    commits: list[Commit] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def files(self) -> dict[str, bytes]:
        return self.commits[-1].files if self.commits else {}

    @property
    def head(self) -> str:
        return self.commits[-1].oid

    def at(self, rev: str) -> Commit | None:
        """The commit a branch name (`main`) or a commit oid points to."""
        if rev == "main":
            return self.commits[-1]
        return next((c for c in self.commits if c.oid == rev), None)


@dataclass
class Failure:
    status: int
    times: int | None
    retry_after: str | None = None
    after: int = 0  # let this many calls through first


class HubServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, token: str | None = None):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.calls: list[tuple[str, str]] = []  # (endpoint name, path)
        self.auth_seen: list[str | None] = []
        self.failures: dict[str, Failure] = {}
        self.lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> HubServer:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def fail(
        self,
        endpoint: str,
        status: int,
        times: int | None = 1,
        retry_after: str | None = None,
        after: int = 0,
    ) -> None:
        """Answer `times` calls of `endpoint` (None: all) with `status`, after `after` calls."""
        self.failures[endpoint] = Failure(status, times, retry_after, after)

    def count(self, endpoint: str) -> int:
        return sum(1 for name, _ in self.calls if name == endpoint)

    # ------------------------------------------------------------------ state changes
    def create_repo(self, repo_id: str, private: bool) -> bool:
        with self.lock:
            if repo_id in self.repos:
                return False
            repo = Repo(repo_id, private)
            # The Hub's first commit holds a .gitattributes file.
            attrs = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"
            repo.commits.append(
                Commit(_oid("init", repo_id), "initial commit", {".gitattributes": attrs}, [], [])
            )
            self.repos[repo_id] = repo
            return True

    def commit(self, repo_id: str, lines: list[dict[str, Any]]) -> Commit:
        with self.lock:
            repo = self.repos[repo_id]
            files = dict(repo.files)
            header = lines[0]["value"] if lines and lines[0]["key"] == "header" else {}
            added, deleted = [], []
            for line in lines[1:]:
                value = line["value"]
                if line["key"] == "file":
                    if value.get("encoding") != "base64":
                        raise ValueError(f"unsupported encoding {value.get('encoding')!r}")
                    files[value["path"]] = base64.b64decode(value["content"])
                    added.append(value["path"])
                elif line["key"] == "deletedFile":
                    if value["path"] not in files:
                        raise KeyError(value["path"])
                    del files[value["path"]]
                    deleted.append(value["path"])
                elif line["key"] == "deletedFolder":
                    prefix = value["path"].rstrip("/") + "/"
                    for p in [p for p in files if p.startswith(prefix)]:
                        del files[p]
                        deleted.append(p)
                else:
                    raise ValueError(f"unsupported commit line {line['key']!r}")
            oid = _oid(repo.head, json.dumps(sorted(added)), json.dumps(sorted(deleted)))
            commit = Commit(
                oid,
                header.get("summary", ""),
                files,
                added,
                deleted,
                header.get("description", ""),
            )
            repo.commits.append(commit)
            return commit


def _oid(*parts: str) -> str:
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()


def _blob_oid(data: bytes) -> str:
    """git's blob id: what the Hub reports as a regular file's oid."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    server: HubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    # ------------------------------------------------------------------ plumbing
    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body if body is not None else {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, code: str | None = None) -> None:
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, {"error": message}, headers)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query)
        for verb, pattern, endpoint in ROUTES:
            m = pattern.fullmatch(path)
            if verb == method and m:
                name = endpoint
                break
        else:
            self._body()
            self._error(404, f"no route {method} {path}")
            return
        body = self._body()
        srv = self.server
        with srv.lock:
            srv.calls.append((name, path))
            srv.auth_seen.append(self.headers.get("Authorization"))
            failure = srv.failures.get(name)
            if failure is not None and failure.after > 0:
                failure.after -= 1
                failure = None
            elif failure is not None and failure.times is not None:
                failure.times -= 1
                if failure.times < 0:
                    del srv.failures[name]
                    failure = None
        if failure is not None:
            headers = {"Retry-After": failure.retry_after} if failure.retry_after else {}
            self._send(failure.status, {"error": f"injected {failure.status}"}, headers)
            return
        if srv.token is not None and self.headers.get("Authorization") != f"Bearer {srv.token}":
            self._error(401, "Invalid credentials in Authorization header")
            return
        args = m.groupdict()
        repo = srv.repos.get(args["repo"]) if "repo" in args else None
        if "repo" in args and repo is None:
            self._error(404, "Repository not found", "RepoNotFound")
            return
        getattr(self, f"_h_{name}")(args, repo, body, query)

    # ------------------------------------------------------------------ endpoints
    def _h_create_repo(self, args: dict, repo: Repo | None, body: bytes, query: dict) -> None:
        payload = json.loads(body)
        if payload.get("type") != "dataset":
            self._error(400, f"this test server only hosts datasets, not {payload.get('type')}")
            return
        repo_id = f"{payload['organization']}/{payload['name']}"
        private = payload.get("visibility") == "private" or bool(payload.get("private"))
        url = f"{self.server.url}/datasets/{repo_id}"
        if not self.server.create_repo(repo_id, private):
            # The Hub's 409 carries the url too; `exist_ok=True` reads it.
            msg = "You already created this dataset repo"
            self._send(409, {"error": msg, "url": url}, {"X-Error-Message": msg})
            return
        self._send(200, {"url": url, "name": repo_id})

    def _h_validate_yaml(self, args: dict, repo: Repo | None, body: bytes, query: dict) -> None:
        content = json.loads(body)["content"]
        m = re.match(r"\A---\n(.*?)\n---\n", content, flags=re.S)
        try:
            meta = yaml.safe_load(m.group(1)) if m else None
        except yaml.YAMLError as exc:
            self._send(400, {"errors": [{"message": str(exc)}], "warnings": []})
            return
        if m and not isinstance(meta, dict):
            self._send(400, {"errors": [{"message": "metadata is not a mapping"}], "warnings": []})
            return
        warnings = [] if m else [{"message": "empty or missing yaml metadata in repo card"}]
        self._send(200, {"errors": [], "warnings": warnings})

    def _h_settings(self, args: dict, repo: Repo, body: bytes, query: dict) -> None:
        payload = json.loads(body)
        if "visibility" in payload:
            repo.private = payload["visibility"] == "private"
        elif "private" in payload:
            repo.private = bool(payload["private"])
        self._send(200, {})

    def _h_revision(self, args: dict, repo: Repo, body: bytes, query: dict) -> None:
        commit = repo.at(args["rev"])
        if commit is None:
            self._error(404, f"Invalid rev id: {args['rev']}", "RevisionNotFound")
            return
        siblings = [{"rfilename": p} for p in sorted(commit.files)]
        self._send(
            200,
            {"id": repo.repo_id, "sha": commit.oid, "private": repo.private, "siblings": siblings},
        )

    def _h_preupload(self, args: dict, repo: Repo, body: bytes, query: dict) -> None:
        files = json.loads(body)["files"]
        have = repo.files
        answers = []
        for f in files:
            answer = {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
            if f["path"] in have:  # the Hub returns the remote file's oid (git blob sha1)
                answer["oid"] = _blob_oid(have[f["path"]])
            answers.append(answer)
        self._send(200, {"files": answers, "commitOid": repo.head})

    def _h_commit(self, args: dict, repo: Repo, body: bytes, query: dict) -> None:
        if "ndjson" not in (self.headers.get("Content-Type") or ""):
            self._error(400, "expected an NDJSON body")
            return
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        try:
            commit = self.server.commit(args["repo"], lines)
        except (KeyError, ValueError) as exc:
            self._error(400, f"bad commit: {exc}")
            return
        self._send(
            200,
            {
                "success": True,
                "commitOid": commit.oid,
                "commitUrl": f"{self.server.url}/datasets/{args['repo']}/commit/{commit.oid}",
                "pullRequestUrl": None,
            },
        )

    def _h_tree(self, args: dict, repo: Repo, body: bytes, query: dict) -> None:
        commit = repo.at(args["rev"])
        if commit is None:
            self._error(404, f"Invalid rev id: {args['rev']}", "RevisionNotFound")
            return
        prefix = (args.get("path") or "").strip("/")
        entries = []
        for path, data in sorted(commit.files.items()):
            if prefix and not path.startswith(prefix + "/"):
                continue
            entries.append(
                {"type": "file", "oid": _blob_oid(data), "size": len(data), "path": path}
            )
        self._send(200, entries)

    def _h_refs(self, args: dict, repo: Repo, body: bytes, query: dict) -> None:
        self._send(
            200,
            {
                "branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": repo.head}],
                "converts": [],
                "tags": [
                    {"name": t, "ref": f"refs/tags/{t}", "targetCommit": oid}
                    for t, oid in sorted(repo.tags.items())
                ],
                "pullRequests": [],
            },
        )

    def _h_tag(self, args: dict, repo: Repo, body: bytes, query: dict) -> None:
        payload = json.loads(body)
        rev = args["rev"]
        oids = {c.oid for c in repo.commits}
        target = repo.head if rev == "main" else rev
        if target not in oids:
            self._error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            return
        with self.server.lock:
            if payload["tag"] in repo.tags:
                self._error(409, f"Tag {payload['tag']} already exists")
                return
            repo.tags[payload["tag"]] = target
        self._send(200, {"name": payload["tag"]})

    def _h_whoami(self, args: dict, repo: Repo | None, body: bytes, query: dict) -> None:
        self._send(200, {"type": "user", "name": "tester", "orgs": [{"name": "org"}]})
