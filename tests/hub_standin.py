"""A local stand-in of the Hugging Face Hub's HTTP API, for huggingface_hub's unmodified client.

Read side (what `snapshot_download`, `hf_hub_download`, `list_repo_tree`, `repo_info` use):
repo info, tree listing (recursive or not, paginated with a Link header), HEAD + GET on
resolve URLs. Write side (what `create_repo`, `create_branch`, `preupload_lfs_files`,
`create_commit`, `upload_folder` use with HF_HUB_DISABLE_XET=1): repo creation,
YAML validation of README.md, preupload (regular vs LFS decision and the remote oid of
an existing path), the LFS batch API with basic transfer (PUT) and verify, the NDJSON
commit endpoint, branch creation.

Repos are kept in memory. Folder-backed dataset repos (`hub.repos["org/name"] = Path`)
are read from that folder. Tokens, when `hub.tokens` is set, are checked as the Hub does:
a bad token is a 401, a read token writing is a 403. `hub.faults` makes chosen requests
fail (status code, Hub message, Retry-After, or a dropped connection) a given number of
times. Tests start it on 127.0.0.1 and point HF_ENDPOINT at it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlparse

LFS_SUFFIXES = (".safetensors", ".bin", ".parquet", ".arrow", ".pt", ".gz", ".zip", ".tar", ".npy")
LFS_THRESHOLD = 10 * 1024 * 1024  # the Hub stores files over 10 MB in LFS
TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}


def git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
    )


@dataclass
class StoredFile:
    size: int
    sha256: str
    lfs: bool
    data: bytes | None = None  # regular files; LFS content lives in the hub's LFS store

    @property
    def oid(self) -> str:  # what the tree listing calls oid: git blob id (of the pointer for LFS)
        if self.lfs:
            return git_blob_oid(lfs_pointer(self.sha256, self.size))
        return git_blob_oid(self.data or b"")


@dataclass
class HubRepo:
    repo_id: str
    repo_type: str = "model"
    private: bool = False
    branches: dict[str, dict[str, StoredFile]] = field(default_factory=lambda: {"main": {}})
    heads: dict[str, str] = field(default_factory=lambda: {"main": "0" * 40})
    commits: list[dict] = field(default_factory=list)
    lfs_oids: set[str] = field(default_factory=set)  # LFS objects uploaded to this repo


@dataclass
class Fault:
    """Fail requests whose "METHOD /path" matches `pattern` (regex), `times` times.

    The first `skip` matching requests pass; status 0 drops the connection unanswered;
    status -1 holds the request (as a stuck server would) until `hub.release` is set,
    then drops it."""

    pattern: str
    status: int
    times: int = 1
    skip: int = 0
    message: str = "stand-in fault"
    retry_after: int | None = None


class HubStandIn:
    def __init__(self, *, tokens: dict[str, str] | None = None) -> None:
        self.repos: dict[str, Path] = {}  # folder-backed dataset repos: "org/name" -> folder
        self.store: dict[tuple[str, str], HubRepo] = {}  # (type, "org/name") -> repo
        self.lfs: dict[str, bytes] = {}  # sha256 -> content
        self.tokens: dict[str, str] = dict(tokens or {})  # token -> "read" | "write"
        self.faults: list[Fault] = []
        self.requests: list[str] = []
        self.lfs_puts: list[str] = []  # sha256 of every LFS object received
        self.page_size = 1000
        self.held: list[str] = []  # requests held by a status -1 fault
        self.release = threading.Event()
        self._salt = os.urandom(8)  # commit ids unique per stand-in, like the Hub's
        self._lock = threading.RLock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HubStandIn:
        self._thread.start()
        self._point_client()
        return self

    def __exit__(self, *exc) -> None:
        import huggingface_hub.constants as c

        self.release.set()
        for k, v in self._saved.items():
            setattr(c, k, v)
        shutil.rmtree(self._cache, ignore_errors=True)
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _point_client(self) -> None:
        """huggingface_hub reads HF_ENDPOINT and HF_HUB_DISABLE_XET once, at import: when it
        was imported before the test set them, point its constants at the stand-in too
        (restored on exit), with a fresh download cache of its own, so that no file is
        served from a cache a previous stand-in filled. Tests still set HF_ENDPOINT for code
        that reads the env."""
        import huggingface_hub.constants as c

        self._cache = tempfile.mkdtemp(prefix="hub-standin-cache-")
        new = {
            "HF_HUB_CACHE": self._cache,
            "ENDPOINT": self.url,
            "HUGGINGFACE_CO_URL_TEMPLATE": self.url + "/{repo_id}/resolve/{revision}/{filename}",
            "HF_HUB_DISABLE_XET": True,
        }
        self._saved = {k: getattr(c, k) for k in new}
        for k, v in new.items():
            setattr(c, k, v)

    # --- state helpers for tests --------------------------------------------------------
    def repo(self, repo_id: str, repo_type: str = "model") -> HubRepo | None:
        with self._lock:
            if (
                (repo_type, repo_id) not in self.store
                and repo_type == "dataset"
                and repo_id in self.repos
            ):
                self._load_folder(repo_id)
            return self.store.get((repo_type, repo_id))

    def file_bytes(
        self, repo_id: str, path: str, repo_type: str = "model", branch: str = "main"
    ) -> bytes:
        f = self.repo(repo_id, repo_type).branches[branch][path]
        return self.lfs[f.sha256] if f.lfs else (f.data or b"")

    def commit_of(self, repo: str, repo_type: str = "dataset") -> str:
        r = self.repo(repo, repo_type)
        return r.heads["main"] if r else "0" * 40

    def _load_folder(self, repo_id: str) -> None:
        root = self.repos[repo_id]
        repo = HubRepo(repo_id, "dataset")
        files = {}
        for p in sorted(p for p in root.rglob("*") if p.is_file()):
            data = p.read_bytes()
            f = files[p.relative_to(root).as_posix()] = self._stored(p.name, data)
            if f.lfs:
                repo.lfs_oids.add(f.sha256)
        self._apply(repo, "main", files, "initial import")
        self.store[("dataset", repo_id)] = repo

    def _stored(self, name: str, data: bytes) -> StoredFile:
        sha = hashlib.sha256(data).hexdigest()
        if _is_lfs(name, len(data), data[:512]):
            self.lfs[sha] = data
            return StoredFile(len(data), sha, True)
        return StoredFile(len(data), sha, False, data)

    def _apply(
        self,
        repo: HubRepo,
        branch: str,
        files: dict[str, StoredFile],
        summary: str,
        ops: list[str] | None = None,
    ) -> str:
        h = hashlib.sha1(self._salt + repo.heads[branch].encode())
        for path in sorted(files):
            h.update(path.encode() + b"\0" + files[path].sha256.encode())
        h.update(summary.encode())
        sha = h.hexdigest()
        repo.branches[branch] = files
        repo.heads[branch] = sha
        repo.commits.append(
            {
                "id": sha,
                "branch": branch,
                "title": summary,
                "files": sorted(files),
                "ops": ops or [],
            }
        )
        return sha

    # --- HTTP ---------------------------------------------------------------------------
    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_HEAD(self) -> None:
                self._dispatch(body=False)

            def do_GET(self) -> None:
                self._dispatch(body=True)

            def do_POST(self) -> None:
                self._dispatch(body=True)

            def do_PUT(self) -> None:
                self._dispatch(body=True)

            # -- plumbing
            def _read_body(self) -> bytes:
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    out = bytearray()
                    while True:
                        line = self.rfile.readline().strip()
                        n = int(line.split(b";")[0], 16)
                        if n == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return bytes(out)
                        out += self.rfile.read(n)
                        self.rfile.readline()
                n = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(n) if n else b""

            def _send(
                self, status: int, payload: bytes, headers: dict[str, str] | None = None
            ) -> None:
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            def _json(self, obj, status: int = 200, headers: dict[str, str] | None = None) -> None:
                self._send(
                    status,
                    json.dumps(obj).encode(),
                    {"Content-Type": "application/json", **(headers or {})},
                )

            def _error(
                self, status: int, message: str, code: str | None = None, **headers: str
            ) -> None:
                h = {"X-Error-Message": message, **headers}
                if code:
                    h["X-Error-Code"] = code
                self._json({"error": message}, status, h)

            def _token(self) -> str | None:
                auth = self.headers.get("Authorization") or ""
                return auth[7:] if auth.startswith("Bearer ") else None

            def _auth(self, need: str, repo: HubRepo | None = None) -> bool:
                """True when allowed; otherwise answers 401/403/404 as the Hub does."""
                if not hub.tokens:
                    return True
                tok = self._token()
                if tok is not None and tok not in hub.tokens:
                    self._error(401, "Invalid credentials in Authorization header")
                    return False
                if need == "read":
                    if repo is not None and repo.private and tok is None:
                        self._error(401, "Repository not found", "RepoNotFound")
                        return False
                    return True
                if tok is None:
                    self._error(401, "You must be authenticated to access this resource.")
                    return False
                if hub.tokens[tok] != "write":
                    self._error(
                        403,
                        "You don't have the rights to write to this repository: "
                        "your token is read-only.",
                    )
                    return False
                return True

            def _dispatch(self, body: bool) -> None:
                url = urlparse(self.path)
                path = unquote(url.path)
                query = parse_qs(url.query)
                line = f"{self.command} {path}"
                hub.requests.append(line)
                for f in list(hub.faults):
                    if f.times > 0 and re.search(f.pattern, line):
                        if f.skip > 0:
                            f.skip -= 1
                            continue
                        f.times -= 1
                        if f.status == -1:
                            hub.held.append(line)
                            hub.release.wait(timeout=60)
                        if f.status in (0, -1):
                            self.close_connection = True
                            self.connection.close()
                            return
                        extra = (
                            {"Retry-After": str(f.retry_after)} if f.retry_after is not None else {}
                        )
                        self._read_body()
                        return self._error(f.status, f.message, **extra)
                parts = [p for p in path.split("/") if p != ""]
                try:
                    self._route(parts, query, url)
                except Exception as e:  # a stand-in bug: answer 500 so the test sees it
                    self._error(500, f"stand-in error: {type(e).__name__}: {e}")

            def _route(self, parts: list[str], query: dict, url) -> None:
                cmd = self.command
                if parts[:3] == ["api", "repos", "create"] and cmd == "POST":
                    return self._create_repo(json.loads(self._read_body() or b"{}"))
                if parts[:2] == ["api", "validate-yaml"] and cmd == "POST":
                    return self._validate_yaml(json.loads(self._read_body() or b"{}"))
                if parts[:1] == ["_lfs"] and cmd == "PUT" and len(parts) == 5:
                    return self._lfs_put(parts[1], "/".join(parts[2:4]), parts[4])
                if parts[:1] == ["_lfs_verify"] and cmd == "POST" and len(parts) == 4:
                    payload = json.loads(self._read_body() or b"{}")
                    return self._lfs_verify(parts[1], "/".join(parts[2:4]), payload)
                if parts[:1] == ["api"] and len(parts) >= 4 and parts[1] in TYPES:
                    rtype = TYPES[parts[1]]
                    repo_id = "/".join(parts[2:4])
                    rest = parts[4:]
                    return self._api(rtype, repo_id, rest, query)
                # git endpoints and resolve: /[datasets/]org/name(.git)/...
                rtype = "model"
                p = parts
                if p and p[0] in ("datasets", "spaces"):
                    rtype, p = TYPES[p[0]], p[1:]
                if (
                    len(p) >= 2
                    and p[1].endswith(".git")
                    and p[2:] == ["info", "lfs", "objects", "batch"]
                ):
                    return self._lfs_batch(rtype, f"{p[0]}/{p[1][:-4]}")
                if len(p) >= 5 and p[2] == "resolve":
                    return self._resolve(rtype, "/".join(p[:2]), p[3], "/".join(p[4:]))
                self._error(404, f"not served by the stand-in: {cmd} {'/'.join(parts)}")

            # -- repos
            def _create_repo(self, payload: dict) -> None:
                rtype = payload.get("type") or "model"
                repo_id = f"{payload.get('organization')}/{payload['name']}"
                if not self._auth("write"):
                    return
                with hub._lock:
                    if hub.repo(repo_id, rtype) is not None:
                        msg = f"You already created this {rtype} repo"
                        url = f"{hub.url}/{PREFIX[rtype]}{repo_id}"
                        return self._json({"error": msg, "url": url}, 409, {"X-Error-Message": msg})
                    private = payload.get("visibility") == "private" or bool(payload.get("private"))
                    hub.store[(rtype, repo_id)] = HubRepo(repo_id, rtype, private)
                self._json(
                    {"url": f"{hub.url}/{PREFIX[rtype]}{repo_id}", "name": repo_id, "id": repo_id}
                )

            def _validate_yaml(self, payload: dict) -> None:
                import yaml

                content = payload.get("content") or ""
                m = re.match(r"^---\s*\n(.*?)\n---\s*\n", content, re.S)
                if m:
                    try:
                        meta = yaml.safe_load(m.group(1))
                    except yaml.YAMLError as e:
                        return self._json({"errors": [{"message": f"invalid YAML: {e}"}]}, 400)
                    if meta is not None and not isinstance(meta, dict):
                        return self._json(
                            {"errors": [{"message": "metadata must be a mapping"}]}, 400
                        )
                self._json({"errors": [], "warnings": []})

            def _repo_or_404(self, rtype: str, repo_id: str) -> HubRepo | None:
                repo = hub.repo(repo_id, rtype)
                if repo is None:
                    self._error(404, "Repository not found", "RepoNotFound")
                    return None
                if hub.tokens and repo.private and self._token() not in hub.tokens:
                    self._error(404, "Repository not found", "RepoNotFound")
                    return None
                return repo

            def _branch(self, repo: HubRepo, rev: str) -> str | None:
                rev = unquote(rev)
                if rev in repo.branches:
                    return rev
                for name, sha in repo.heads.items():
                    if sha == rev or (len(rev) >= 7 and sha.startswith(rev)):
                        return name
                self._error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
                return None

            def _api(self, rtype: str, repo_id: str, rest: list[str], query: dict) -> None:
                repo = self._repo_or_404(rtype, repo_id)
                if repo is None:
                    return
                cmd = self.command
                if not rest or (rest[0] == "revision" and cmd == "GET"):
                    branch = self._branch(repo, rest[1] if len(rest) > 1 else "main")
                    if branch is None:
                        return
                    return self._json(
                        {
                            "id": repo_id,
                            "_id": hashlib.md5(repo_id.encode()).hexdigest()[:24],
                            "sha": repo.heads[branch],
                            "private": repo.private,
                            "siblings": [{"rfilename": p} for p in sorted(repo.branches[branch])],
                            "lastModified": "2026-01-01T00:00:00.000Z",
                        }
                    )
                if rest[0] == "tree" and cmd == "GET" and len(rest) >= 2:
                    branch = self._branch(repo, rest[1])
                    if branch is not None:
                        self._tree(repo, branch, "/".join(rest[2:]), query)
                    return
                if rest[0] == "preupload" and cmd == "POST":
                    if not self._auth("write"):
                        return
                    branch = self._branch(repo, rest[1] if len(rest) > 1 else "main")
                    if branch is not None:
                        self._preupload(repo, branch, json.loads(self._read_body() or b"{}"))
                    return
                if rest[0] == "commit" and cmd == "POST":
                    body = self._read_body()
                    if not self._auth("write"):
                        return
                    branch = self._branch(repo, rest[1] if len(rest) > 1 else "main")
                    if branch is not None:
                        self._commit(repo, branch, body)
                    return
                if rest[0] == "branch" and cmd == "POST" and len(rest) >= 2:
                    payload = json.loads(self._read_body() or b"{}")
                    if not self._auth("write"):
                        return
                    name = "/".join(rest[1:])
                    with hub._lock:
                        if name in repo.branches:
                            return self._error(409, f"Reference already exists: refs/heads/{name}")
                        start = self._branch(repo, payload.get("startingPoint") or "main")
                        if start is None:
                            return
                        repo.branches[name] = dict(repo.branches[start])
                        repo.heads[name] = repo.heads[start]
                    return self._json({})
                self._error(
                    404,
                    f"not served by the stand-in: {cmd} api/{rtype}s/{repo_id}/{'/'.join(rest)}",
                )

            def _tree(self, repo: HubRepo, branch: str, prefix: str, query: dict) -> None:
                recursive = (query.get("recursive") or ["false"])[0].lower() in ("true", "1")
                files = repo.branches[branch]
                base = prefix.strip("/")
                if base and base not in files and not any(p.startswith(base + "/") for p in files):
                    return self._error(404, f"{base} does not exist on {branch}", "EntryNotFound")
                entries: dict[str, dict] = {}
                for path in sorted(files):
                    if base and not path.startswith(base + "/"):
                        continue
                    rel = path[len(base) + 1 :] if base else path
                    segs = rel.split("/")
                    # folders on the way
                    for k in range(1, len(segs)):
                        if not recursive and k > 1:
                            break
                        folder = "/".join(([base] if base else []) + segs[:k])
                        if folder not in entries:
                            oid = hashlib.sha1(folder.encode()).hexdigest()
                            entries[folder] = {
                                "type": "directory",
                                "oid": oid,
                                "size": 0,
                                "path": folder,
                            }
                    if not recursive and len(segs) > 1:
                        continue
                    f = files[path]
                    entry = {"type": "file", "oid": f.oid, "size": f.size, "path": path}
                    if f.lfs:
                        entry["lfs"] = {
                            "oid": f.sha256,
                            "size": f.size,
                            "pointerSize": len(lfs_pointer(f.sha256, f.size)),
                        }
                    entries[path] = entry
                items = sorted(
                    entries.values(), key=lambda e: (e["type"] != "directory", e["path"])
                )
                start = int((query.get("cursor") or ["0"])[0])
                page = items[start : start + hub.page_size]
                headers = {}
                if start + hub.page_size < len(items):
                    q = f"recursive={str(recursive).lower()}&cursor={start + hub.page_size}"
                    headers["Link"] = (
                        f'<{hub.url}{quote(urlparse(self.path).path)}?{q}>; rel="next"'
                    )
                self._json(page, headers=headers)

            def _preupload(self, repo: HubRepo, branch: str, payload: dict) -> None:
                out = []
                existing = repo.branches[branch]
                for f in payload.get("files", []):
                    sample = base64.b64decode(f.get("sample") or "")
                    lfs = _is_lfs(f["path"], int(f["size"]), sample)
                    cur = existing.get(f["path"])
                    oid = None
                    if cur is not None:
                        oid = cur.sha256 if cur.lfs else git_blob_oid(cur.data or b"")
                    out.append(
                        {
                            "path": f["path"],
                            "uploadMode": "lfs" if lfs else "regular",
                            "shouldIgnore": False,
                            "oid": oid,
                        }
                    )
                self._json({"files": out, "commitOid": repo.heads[branch]})

            # -- LFS
            def _lfs_batch(self, rtype: str, repo_id: str) -> None:
                payload = json.loads(self._read_body() or b"{}")
                repo = self._repo_or_404(rtype, repo_id)
                if repo is None or not self._auth("write"):
                    return
                objects = []
                for o in payload.get("objects", []):
                    oid, size = o["oid"], int(o["size"])
                    entry: dict = {"oid": oid, "size": size, "authenticated": True}
                    if oid not in repo.lfs_oids:  # the Hub dedups per repo
                        where = f"{rtype}/{repo_id}"
                        entry["actions"] = {
                            "upload": {"href": f"{hub.url}/_lfs/{where}/{oid}", "header": {}},
                            "verify": {"href": f"{hub.url}/_lfs_verify/{where}"},
                        }
                    objects.append(entry)
                self._send(
                    200,
                    json.dumps({"transfer": "basic", "objects": objects}).encode(),
                    {"Content-Type": "application/vnd.git-lfs+json"},
                )

            def _lfs_put(self, rtype: str, repo_id: str, oid: str) -> None:
                data = self._read_body()
                repo = hub.repo(repo_id, rtype)
                if repo is None:
                    return self._error(404, "Repository not found", "RepoNotFound")
                if hashlib.sha256(data).hexdigest() != oid:
                    return self._error(400, f"content does not match oid {oid}")
                with hub._lock:
                    hub.lfs[oid] = data
                    repo.lfs_oids.add(oid)
                    hub.lfs_puts.append(oid)
                self._send(200, b"")

            def _lfs_verify(self, rtype: str, repo_id: str, payload: dict) -> None:
                repo = hub.repo(repo_id, rtype)
                oid = payload.get("oid") or ""
                data = hub.lfs.get(oid) if repo is not None and oid in repo.lfs_oids else None
                if data is None or len(data) != payload.get("size"):
                    return self._error(404, f"object {payload.get('oid')} not found or wrong size")
                self._json({"success": True})

            # -- commit
            def _commit(self, repo: HubRepo, branch: str, body: bytes) -> None:
                lines = [json.loads(x) for x in body.splitlines() if x.strip()]
                if not lines or lines[0].get("key") != "header":
                    return self._error(400, "commit payload must start with a header line")
                header = lines[0]["value"]
                parent = header.get("parentCommit")
                with hub._lock:
                    if parent and not repo.heads[branch].startswith(parent):
                        return self._error(
                            412, "A commit has happened since. Please refresh and try again."
                        )
                    files = dict(repo.branches[branch])
                    ops = []
                    for item in lines[1:]:
                        key, val = item.get("key"), item.get("value") or {}
                        path = val.get("path", "")
                        if not path or path.startswith("/") or ".." in path.split("/"):
                            return self._error(400, f"invalid path {path!r}")
                        ops.append(path)
                        if key == "file":
                            data = base64.b64decode(val["content"])
                            files[path] = StoredFile(
                                len(data), hashlib.sha256(data).hexdigest(), False, data
                            )
                        elif key == "lfsFile":
                            oid = val.get("oid")
                            if oid not in repo.lfs_oids:
                                return self._error(
                                    400,
                                    f"Your push was rejected: LFS pointer ({oid}) is missing",
                                )
                            files[path] = StoredFile(len(hub.lfs[oid]), oid, True)
                        elif key == "deletedFile":
                            if path not in files:
                                return self._error(
                                    404, "A file with this name doesn't exist", "EntryNotFound"
                                )
                            del files[path]
                        elif key == "deletedFolder":
                            for p in [p for p in files if p.startswith(path.rstrip("/") + "/")]:
                                del files[p]
                        else:
                            return self._error(400, f"unknown commit operation {key!r}")
                    sha = hub._apply(repo, branch, files, header.get("summary") or "", ops)
                url = f"{hub.url}/{PREFIX[repo.repo_type]}{repo.repo_id}/commit/{sha}"
                self._json(
                    {"success": True, "commitOid": sha, "commitUrl": url, "pullRequestUrl": None}
                )

            # -- downloads
            def _resolve(self, rtype: str, repo_id: str, rev: str, path: str) -> None:
                repo = self._repo_or_404(rtype, repo_id)
                if repo is None:
                    return
                branch = self._branch(repo, rev)
                if branch is None:
                    return
                f = repo.branches[branch].get(path)
                if f is None:
                    return self._error(404, "Entry not found", "EntryNotFound")
                data = hub.lfs[f.sha256] if f.lfs else (f.data or b"")
                headers = {
                    "ETag": f'"{f.sha256 if f.lfs else f.oid}"',
                    "X-Repo-Commit": repo.heads[branch],
                    "Content-Type": "application/octet-stream",
                }
                if f.lfs:
                    headers["X-Linked-Etag"] = f'"{f.sha256}"'
                    headers["X-Linked-Size"] = str(f.size)
                self._send(200, data, headers)

        return Handler


def _is_lfs(path: str, size: int, sample: bytes) -> bool:
    """The Hub's rule, roughly: big files, binary-looking files, and LFS-tracked suffixes."""
    return size >= LFS_THRESHOLD or path.endswith(LFS_SUFFIXES) or b"\0" in sample
