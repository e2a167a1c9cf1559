"""A small Chrome DevTools Protocol client for browser tests: headless Chromium (the
Debian package) started on a free port, one page driven over its websocket with real
input events (mouse clicks, typed text), DOM reads through Runtime.evaluate, and
screenshots. Every wait is bounded; the browser is killed on exit."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",  # tests run as root
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--remote-debugging-port=0",
]


class CDPError(RuntimeError):
    pass


class Browser:
    """`with Browser() as b: b.open(url); b.click("tr"); b.text("#count")`."""

    def __init__(self, *, width: int = 1400, height: int = 900, timeout: float = 60.0):
        self.width, self.height, self.timeout = width, height, timeout
        self._ids = itertools.count(1)
        self.events: list[dict] = []

    # --- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> Browser:
        from websockets.sync.client import connect

        self._profile = tempfile.mkdtemp(prefix="apexrl-chromium-")
        self.proc = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            # its singleton socket folders (left by the kill below) go under the profile
            env={**os.environ, "TMPDIR": self._profile},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            url = self._devtools_url()
            self.ws = connect(url, max_size=None, open_timeout=self.timeout)
            target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)
            att = self.call(
                "Target.attachToTarget",
                {"targetId": target["targetId"], "flatten": True},
                session=False,
            )
            self.session = att["sessionId"]
            self.call("Page.enable")
            self.call("Runtime.enable")
            self.call(
                "Emulation.setDeviceMetricsOverride",
                {
                    "width": self.width,
                    "height": self.height,
                    "deviceScaleFactor": 1,
                    "mobile": False,
                },
            )
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _devtools_url(self) -> str:
        deadline = time.monotonic() + self.timeout
        seen = []
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                if self.proc.poll() is not None:
                    break
                continue
            seen.append(line)
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                return m.group(1)
        raise CDPError("chromium did not start its DevTools server:\n" + "".join(seen[-20:]))

    def __exit__(self, *exc) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            with contextlib.suppress(Exception):
                ws.close()
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stderr.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    # --- protocol --------------------------------------------------------------------
    def call(self, method: str, params: dict | None = None, *, session: bool = True) -> dict:
        msg_id = next(self._ids)
        msg = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CDPError(f"{method}: no answer in {self.timeout:g} s")
            reply = json.loads(self.ws.recv(timeout=left))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def eval(self, expression: str):
        """The value of a JavaScript expression (promises awaited)."""
        res = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in res:
            raise CDPError(f"{expression!r}: {res['exceptionDetails']}")
        return res["result"].get("value")

    # --- a user's actions ----------------------------------------------------------------
    def open(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})

    def wait_for(self, expression: str, *, timeout: float | None = None, every: float = 0.02):
        """Poll until `expression` is truthy (in Python: write `!!node` for a DOM node,
        which comes back as an empty dict); its value."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < deadline:
            try:
                value = self.eval(expression)
            except CDPError:  # the page is still navigating
                value = None
            if value:
                return value
            time.sleep(every)
        raise CDPError(f"timed out waiting for {expression}")

    def click(self, selector: str, index: int = 0) -> None:
        """A real mouse click at the centre of the element (scrolled into view)."""
        box = self.eval(
            f"(() => {{ const e = document.querySelectorAll({json.dumps(selector)})[{index}];"
            " if (!e) return null; e.scrollIntoView({block: 'center'});"
            " const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        if box is None:
            raise CDPError(f"no element {selector}[{index}] to click")
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    def type(self, selector: str, text: str) -> None:
        self.click(selector)
        self.call("Input.insertText", {"text": text})

    def select(self, selector: str, value: str) -> None:
        """Pick an option of a <select> as a user's choice does (a change event)."""
        self.eval(
            f"(() => {{ const s = document.querySelector({json.dumps(selector)});"
            f" s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); }})()"
        )

    def text(self, selector: str) -> str:
        return self.eval(
            f"(document.querySelector({json.dumps(selector)}) || {{}}).textContent || ''"
        )

    def count(self, selector: str) -> int:
        return self.eval(f"document.querySelectorAll({json.dumps(selector)}).length")

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        params: dict = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", params)["data"]
        path = Path(path)
        path.write_bytes(base64.b64decode(data))
        return path
