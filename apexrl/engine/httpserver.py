"""The vLLM-shaped HTTP server shell the in-process engines share (apexrl.engine.cpu's
EngineServer, the tests' ScriptedEngine in tests/scripted_engine.py): a threading server
on 127.0.0.1, the JSON handler (TCP_NODELAY, quiet log, JSON replies), vLLM's GET /health
(200, empty body) and GET /v1/models (the served name and its `max_model_len`), start in
a daemon thread and stop. Each engine's handler adds its own POST routes.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from apexrl.engine.protocol import HttpEngine


class JsonHandler(BaseHTTPRequestHandler):
    """Keep-alive JSON handler; subclasses set `served` (the server's ServedModel) and
    write do_POST (and may extend do_GET through `get_route`)."""

    protocol_version = "HTTP/1.1"
    served: ServedModel

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without NODELAY each keep-alive
        # response waits ~40 ms (Nagle + delayed ACK)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _send(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def no_route(self) -> None:
        self._send(404, {"error": {"message": f"no route {self.path}", "type": "NotFoundError"}})

    def do_GET(self) -> None:
        if self.path == "/health":  # vLLM answers 200 with an empty body
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/v1/models":
            s = self.served
            model = {"id": s.name, "object": "model", "owned_by": "apexrl"}
            self._send(200, {"object": "list", "data": [{**model, "max_model_len": s.window}]})
        else:
            self.no_route()


class ServedModel:
    """What GET /v1/models reports, read at each request (a LoRA load renames it)."""

    def __init__(self, name_of, window_of) -> None:
        self._name, self._window = name_of, window_of

    @property
    def name(self) -> str:
        return self._name()

    @property
    def window(self) -> int:
        return self._window()


class ThreadedHttpEngine(HttpEngine):
    """The server's life: bound at construction (port 0: any free one), served from a
    daemon thread after start(), shut down and closed by stop()."""

    thread_name = "apexrl-engine"

    def _bind(self, handler: type[JsonHandler], host: str, port: int) -> None:
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self):
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name=self.thread_name, daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._before_stop()
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _before_stop(self) -> None:
        return
