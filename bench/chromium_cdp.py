"""Drive headless Chromium through the DevTools protocol over a pipe
(--remote-debugging-pipe: commands on fd 3, replies on fd 4, one JSON message
per NUL-terminated record), with the standard library only.

Used by bench/html_report_bench.py (time to first paint and to zoom of the
profiler's HTML report) and tests/python/test_profiler_html.py (the report's
page, inspected after its script ran).

    with Chromium() as ch:
        page = ch.open("file:///path/report.html")
        page.evaluate("document.title")
"""
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time


def find_chromium():
    """Path of a Chromium executable (Debian's `chromium`), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class CDPError(RuntimeError):
    pass


class Page:
    """One tab, attached with a flat session."""

    def __init__(self, browser, session, target):
        self.browser = browser
        self.session = session
        self.target = target

    def close(self):
        self.browser.send("Target.closeTarget", {"targetId": self.target})

    def send(self, method, params=None, timeout=60.0):
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def evaluate(self, expression, timeout=60.0):
        """The value of a JS expression (awaited if it is a promise)."""
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in r:
            raise CDPError(f"{expression[:80]}...: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_event(self, method, timeout=60.0):
        return self.browser.wait_event(method, session=self.session, timeout=timeout)


class Chromium:
    def __init__(self, exe=None, width=1400, height=1000):
        self.exe = exe or find_chromium()
        if not self.exe:
            raise FileNotFoundError("no chromium executable (Debian: apt-get install chromium)")
        self.width, self.height = width, height
        self._id = 0
        self._buf = b""
        self._events = []

    def __enter__(self):
        self.profile_dir = tempfile.mkdtemp(prefix="opcore-chromium-")
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()
        # Chromium reads commands on its fd 3 and writes replies on fd 4: bash
        # puts the pipe ends there (copies above 9 first, so that the two
        # redirections cannot clobber each other; dash takes one-digit fds
        # only) and execs Chromium
        cr, cw = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--no-default-browser-check", "--remote-debugging-pipe", f"--window-size={self.width},{self.height}",
                f"--user-data-dir={self.profile_dir}", "about:blank"]
        try:
            self.proc = subprocess.Popen([shutil.which("bash") or "/bin/bash", "-c", f'exec "$0" "$@" 3<&{cr} 4>&{cw} {cr}<&- {cw}>&-',
                                          self.exe, *args], pass_fds=(cr, cw),
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            for fd in (to_chrome_r, from_chrome_w, cr, cw):
                os.close(fd)
        return self

    def __exit__(self, *exc):
        try:
            self.send("Browser.close", timeout=10)
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile_dir, ignore_errors=True)
        return False

    def _read_message(self, deadline):
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no reply from chromium")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise CDPError(f"chromium closed the pipe (exit code {self.proc.poll()})")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method, params=None, session=None, timeout=60.0):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self._id:
                if "error" in m:
                    raise CDPError(f"{method}: {m['error']}")
                return m.get("result", {})
            self._events.append(m)

    def wait_event(self, method, session=None, timeout=60.0):
        deadline = time.monotonic() + timeout
        while True:
            for i, m in enumerate(self._events):
                if m.get("method") == method and (session is None or m.get("sessionId") == session):
                    return self._events.pop(i)
            self._events.append(self._read_message(deadline))

    def open(self, url, timeout=120.0):
        """A new tab showing `url`, once its load event fired."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session, target)
        page.send("Page.enable")
        page.send("Runtime.enable")
        page.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                         "deviceScaleFactor": 1, "mobile": False})
        page.send("Page.navigate", {"url": url})
        page.wait_event("Page.loadEventFired", timeout=timeout)
        return page
