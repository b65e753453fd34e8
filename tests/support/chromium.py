"""Headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON messages ended by
NUL on file descriptors 3 and 4), so no WebDriver and no websocket library is needed. Debian's `chromium` package;
tests that need it skip with a clear message where it is missing. Chromium's stderr goes to $SHOPBOT_CHROMIUM_LOG
when that is set."""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path

BINARY = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
MISSING = ("headless Chromium is not installed (Debian: apt-get install -y chromium; .ci/run installs it): "
           "the operator page's browser test is skipped, except on CI (CI=true), where it fails")


class Chromium:
    def __init__(self, profile: Path) -> None:
        assert BINARY, MISSING
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # bash (dash takes no descriptor above 9) puts our pipe ends on the ones Chromium reads (3) and writes (4)
        command = (f'exec "{BINARY}" --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions '
                   f'--remote-debugging-pipe --user-data-dir="{profile}" about:blank '
                   f'3<&{to_browser_r} 4>&{from_browser_w}')
        self._log = open(os.environ.get("SHOPBOT_CHROMIUM_LOG", os.devnull), "w")
        self.proc = subprocess.Popen(["bash", "-c", command], pass_fds=(to_browser_r, from_browser_w),
                                     stdout=subprocess.DEVNULL, stderr=self._log)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Network.enable", session=True)

    def _read(self) -> dict:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_browser, 65536)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def call(self, method: str, session: bool = False, **params: object) -> dict:
        self._next += 1
        message: dict = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, limit: int = 500) -> dict:
        for _ in range(limit):
            for event in self.events:
                if event.get("method") == method:
                    self.events.remove(event)
                    return event
            self.events.append(self._read())
        raise RuntimeError(f"no {method} event")

    def open(self, url: str) -> int:
        """Navigate and wait for the load; returns the document's HTTP status."""
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        response = self.wait_event("Network.responseReceived")
        self.wait_event("Page.loadEventFired")
        return response["params"]["response"]["status"]

    def evaluate(self, expression: str) -> object:
        return self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)["result"].get(
            "value")

    def submit(self, expression: str) -> int:
        """Run `expression` (which submits a form) and wait for the page it leads to; returns its HTTP status."""
        self.events.clear()
        self.evaluate(expression)
        response = self.wait_event("Network.responseReceived")
        self.wait_event("Page.loadEventFired")
        return response["params"]["response"]["status"]

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._log.close()
