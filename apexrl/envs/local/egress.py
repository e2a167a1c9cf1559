"""Network for an online trial's agent without the host's loopback, ports or link-local
addresses (issue 42, finding 2).

An exec (or a code-tool command) whose agent may use the network gets a network
namespace of its own holding only loopback, and one way out: an HTTP proxy on
127.0.0.1:PORT inside (`bridge`, started before the command, forwarding each connection
to a unix socket in the trial's /tmp, `SANDBOX_SOCKET`), served on the host by
`EgressProxy`. The proxy connects only to global
addresses (no loopback, private, shared, link-local, multicast or reserved range: not
the host's own services, its listening ports, the metadata address or the LAN), resolving
names itself and connecting to the address it checked. `HTTP(S)_PROXY` point at it, so
pip, uv, curl, requests and httpx reach the internet; a client that ignores the proxy
variables has no way out. CONNECT (https) and absolute-form plain http are served.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

PORT = 3128
SANDBOX_SOCKET = "/tmp/.apexrl-egress.sock"  # the trial's /tmp (execs and the gateway)
MAX_HEAD = 64 * 1024
CONNECT_TIMEOUT_S = 15.0


def proxy_env() -> dict[str, str]:
    url = f"http://127.0.0.1:{PORT}"
    env = {k: url for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
    env["NO_PROXY"] = env["no_proxy"] = "localhost,127.0.0.1,::1"
    return env


def allowed(ip: str) -> bool:
    """A global unicast address: not loopback, private, shared (CGNAT), link-local,
    multicast, reserved, unspecified (nor IPv4 mapped into any of those)."""
    try:
        a = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped is not None:
        a = a.ipv4_mapped
    return a.is_global and not a.is_multicast


class EgressProxy:
    """The host side: an HTTP proxy on a unix socket that connects to global addresses
    only. `allow` decides an address (tests widen it); threads per connection."""

    def __init__(self, path: Path, allow: Callable[[str], bool] = allowed) -> None:
        self.path = Path(path)
        self.allow = allow
        self.refused: list[str] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # through the folder's descriptor: a socket path has at most 107 bytes, and a
        # trial folder can be deeper than that
        folder = os.open(self.path.parent, os.O_PATH | os.O_DIRECTORY)
        try:
            short = f"/proc/self/fd/{folder}/{self.path.name}"
            self.sock.bind(short)
            os.chmod(short, 0o666)  # the sandbox's uid connects
        finally:
            os.close(folder)
        self.sock.listen(64)
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True, name="apexrl-egress")
        self._thread.start()

    def close(self) -> None:
        self._stop = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.path.unlink(missing_ok=True)

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(CONNECT_TIMEOUT_S)
            try:
                head = _read_head(conn)
                method, target, version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            except (OSError, ValueError):
                return
            try:
                host, port, first = _destination(method, target, version, head)
            except ValueError as e:
                _reply(conn, 400, str(e))
                return
            addr = self._resolve(host, port)
            if addr is None:
                self.refused.append(f"{host}:{port}")
                _reply(conn, 403, f"{host}:{port} is not a public address")
                return
            try:
                upstream = socket.create_connection((addr, port), timeout=CONNECT_TIMEOUT_S)
            except OSError as e:
                _reply(conn, 502, f"cannot reach {host}:{port} ({e.strerror or e})")
                return
            with upstream:
                if first is None:
                    conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                else:
                    upstream.sendall(first)
                conn.settimeout(None)
                upstream.settimeout(None)
                _splice(conn, upstream)

    def _resolve(self, host: str, port: int) -> str | None:
        """The first address of `host` this proxy may connect to (None: none may be)."""
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            return None
        for *_, sockaddr in infos:
            if self.allow(str(sockaddr[0])):
                return str(sockaddr[0])
        return None


def _read_head(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk or len(data) > MAX_HEAD:
            raise ValueError("no request head")
        data += chunk
    return data


def _destination(method: str, target: str, version: str, head: bytes):
    """(host, port, bytes to send first: None for CONNECT) of a proxy request."""
    if method.upper() == "CONNECT":
        host, sep, port = target.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError("CONNECT wants host:port")
        return host.strip("[]"), int(port), None
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise ValueError("a proxy request names an http:// URL (https goes by CONNECT)")
    path = url.path or "/"
    if url.query:
        path += "?" + url.query
    rest = head.split(b"\r\n", 1)[1]
    first = f"{method} {path} {version}\r\n".encode("latin-1") + rest
    return url.hostname, url.port or 80, first


def _reply(conn: socket.socket, status: int, why: str) -> None:
    text = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = (why + "\n").encode()
    with contextlib.suppress(OSError):
        conn.sendall(
            f"HTTP/1.1 {status} {text}\r\ncontent-type: text/plain\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )


def _splice(a: socket.socket, b: socket.socket) -> None:
    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    t = threading.Thread(target=pump, args=(b, a), daemon=True)
    t.start()
    pump(a, b)
    t.join()


# --- inside the sandbox ----------------------------------------------------------------


def loopback_up() -> None:
    """Bring `lo` up where this process may (a code-tool command's fresh network
    namespace, owned by its user namespace); bubblewrap's has it up already."""
    import fcntl
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        got = fcntl.ioctl(s, siocgifflags, struct.pack("16sH14x", b"lo", 0))
        flags = struct.unpack("16sH14x", got)[1]
        if not flags & iff_up:
            fcntl.ioctl(s, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def bridge(sock_path: str, port: int = PORT) -> None:
    """Listen on 127.0.0.1:`port` and forward each connection to `sock_path`; returns
    (in the parent) once listening, the forwarder living on in a child."""
    loopback_up()
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(64)
    if os.fork():
        os._exit(0)  # the caller goes on to its command; the child serves
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    while True:
        try:
            conn, _ = srv.accept()
        except OSError:
            continue
        threading.Thread(target=_forward, args=(conn, sock_path), daemon=True).start()


def _forward(conn: socket.socket, sock_path: str) -> None:
    with conn:
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            up.connect(sock_path)
        except OSError:
            up.close()
            return
        with up:
            _splice(conn, up)


def bridge_command(python: str) -> str:
    """Shell text that starts the bridge, then runs "$1" (the exec's command)."""
    return (
        f"{python} -I -m apexrl.envs.local.egress {SANDBOX_SOCKET} || exit 125; "
        'exec /bin/bash -c "$1"'
    )


if __name__ == "__main__":
    bridge(sys.argv[1])
