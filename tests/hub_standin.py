"""A read-only local stand-in of the Hugging Face Hub's download API.

Enough of it for huggingface_hub's unmodified `snapshot_download` (repo info,
recursive tree listing, HEAD + GET on resolve URLs), serving dataset repos from
folders. Tests start it on 127.0.0.1 and point HF_ENDPOINT at it.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse


class HubStandIn:
    def __init__(self) -> None:
        self.repos: dict[str, Path] = {}  # "org/name" -> folder
        self.requests: list[str] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HubStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def commit_of(self, repo: str) -> str:
        h = hashlib.sha1()
        for f in self._files(repo):
            h.update(f.relative_to(self.repos[repo]).as_posix().encode() + f.read_bytes())
        return h.hexdigest()

    def _files(self, repo: str) -> list[Path]:
        root = self.repos[repo]
        return sorted(p for p in root.rglob("*") if p.is_file())

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output quiet
                pass

            def do_HEAD(self) -> None:
                self._serve(body=False)

            def do_GET(self) -> None:
                self._serve(body=True)

            def _send(self, status: int, payload: bytes, headers: dict[str, str], body: bool) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if body:
                    self.wfile.write(payload)

            def _json(self, obj, body: bool, status: int = 200) -> None:
                self._send(status, json.dumps(obj).encode(), {"Content-Type": "application/json"}, body)

            def _not_found(self, body: bool) -> None:
                # The Hub names the error in a header; the client maps it to RepositoryNotFoundError.
                payload = json.dumps({"error": "Repository not found"}).encode()
                self._send(404, payload, {"X-Error-Code": "RepoNotFound"}, body)

            def _serve(self, body: bool) -> None:
                path = unquote(urlparse(self.path).path)
                hub.requests.append(f"{self.command} {path}")
                parts = path.strip("/").split("/")
                # /api/datasets/{org}/{name}/revision/{rev}  and  .../tree/{rev}
                if parts[:2] == ["api", "datasets"] and len(parts) >= 6:
                    repo = "/".join(parts[2:4])
                    if repo not in hub.repos:
                        return self._not_found(body)
                    sha = hub.commit_of(repo)
                    if parts[4] == "revision":
                        siblings = [
                            {"rfilename": f.relative_to(hub.repos[repo]).as_posix()} for f in hub._files(repo)
                        ]
                        return self._json({"id": repo, "sha": sha, "siblings": siblings, "private": False}, body)
                    if parts[4] == "tree":
                        entries = [
                            {
                                "type": "file",
                                "path": f.relative_to(hub.repos[repo]).as_posix(),
                                "size": f.stat().st_size,
                                "oid": hashlib.sha1(f.read_bytes()).hexdigest(),
                            }
                            for f in hub._files(repo)
                        ]
                        return self._json(entries, body)
                # /datasets/{org}/{name}/resolve/{rev}/{file...}
                if parts[0] == "datasets" and len(parts) >= 6 and parts[3] == "resolve":
                    repo = "/".join(parts[1:3])
                    if repo not in hub.repos:
                        return self._not_found(body)
                    file = hub.repos[repo].joinpath(*parts[5:])
                    if not file.is_file():
                        return self._json({"error": "Entry not found"}, body, 404)
                    data = file.read_bytes()
                    headers = {
                        "ETag": f'"{hashlib.sha1(data).hexdigest()}"',
                        "X-Repo-Commit": hub.commit_of(repo),
                        "Content-Type": "application/octet-stream",
                    }
                    return self._send(200, data, headers, body)
                self._json({"error": f"not served by the stand-in: {path}"}, body, 404)

        return Handler
