"""Headless Chromium for tests and screenshot scripts, driven over its DevTools protocol.

No Playwright or Selenium: :class:`PipeCDP` speaks the protocol over a pipe with the standard
library, and :class:`Page` adds what a test needs (open a page with extra headers, wait for
something to be true, read the rendered document, take a screenshot). Chromium comes from
Debian (``apt-get install -y chromium``, which scripts/install-test-servers.sh runs);
:func:`require_chromium` skips a test locally and fails it in CI when it is missing.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testbed.servers import INSTALL_HINT, ls_available, skip_or_fail

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# argv: read end, write end, chromium, its arguments. Both ends go above 9 first, so that
# neither is overwritten by the other's dup2.
_LAUNCHER = """
import fcntl, os, sys
ends = [fcntl.fcntl(int(fd), fcntl.F_DUPFD_CLOEXEC, 10) for fd in sys.argv[1:3]]
for target, fd in zip((3, 4), ends):
    os.dup2(fd, target)
os.execv(sys.argv[3], sys.argv[3:])
"""


class PipeCDP:
    """Chromium's DevTools protocol over --remote-debugging-pipe (fd 3 in, fd 4 out)."""

    def __init__(self) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        self.profile = tempfile.mkdtemp(prefix="srw-chromium-")
        self.log = open(Path(self.profile).with_suffix(".log"), "w+b")  # noqa: SIM115
        # Chromium reads commands on fd 3 and writes replies on fd 4; a small launcher puts our
        # pipe ends there (sh cannot: it reads fds above 9 as a syntax error, and an end that is
        # itself 3 or 4 would be overwritten by the first redirection).
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _LAUNCHER,
                str(to_chrome_r),
                str(from_chrome_w),
                CHROMIUM,
                *CHROMIUM_ARGS,
                "--hide-scrollbars",
                "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}",
                "about:blank",
            ],
            pass_fds=(to_chrome_r, from_chrome_w),
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf, self._next_id, self.session = b"", 0, None

    def call(self, method: str, **params):
        self._next_id += 1
        msg = {"id": self._next_id, "method": method, "params": params}
        if self.session:
            msg["sessionId"] = self.session
        try:
            os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        except BrokenPipeError:
            raise RuntimeError(self._gone()) from None
        while True:  # skip events until our reply
            while b"\0" not in self._buf:
                chunk = os.read(self._from_chrome, 1 << 16)
                if not chunk:
                    raise RuntimeError(self._gone())
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _gone(self) -> str:
        """Why the pipe closed: chromium's exit status and the end of its stderr."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = "still running"
        self.log.seek(0)
        tail = self.log.read().decode(errors="replace")[-2000:]
        return f"chromium closed the DevTools pipe (exit status {code}); its stderr:\n{tail}"

    def evaluate(self, expression: str):
        result = self.call(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        return result.get("result", {}).get("value")

    def close(self) -> None:
        self.session = None
        try:  # a clean exit, so no child process still writes to the profile we delete
            self.call("Browser.close")
            self.proc.wait(timeout=10)
        except (OSError, RuntimeError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
        self.log.close()
        os.unlink(self.log.name)
        shutil.rmtree(self.profile, ignore_errors=True)


def chromium_available() -> bool:
    return os.access(CHROMIUM, os.X_OK)


def require_chromium() -> None:
    """Skip (locally) or fail (CI=true) the calling test when Chromium is not installed."""
    if not chromium_available():
        skip_or_fail(f"{CHROMIUM} is not installed; {INSTALL_HINT}")


def require_screenshot_tools(script: str) -> None:
    """What a screenshot script checks before spending minutes on servers and training: exit,
    naming ``script`` and how to install them, when Chromium or Label Studio is missing."""
    if not chromium_available():
        sys.exit(f"{script}: {CHROMIUM} not found; {INSTALL_HINT}")
    if not ls_available():
        sys.exit(f"{script}: Label Studio is not installed; {INSTALL_HINT}")


class Page:
    """One tab of a headless Chromium; a context manager that closes the browser.

    Parameters
    ----------
    width, height : int
        The viewport, in CSS pixels.
    headers : dict, optional
        Sent with every request of the tab (``Authorization`` for basic auth, say).
    """

    def __init__(self, width: int = 1280, height: int = 900, headers: dict | None = None):
        self.cdp = PipeCDP()
        try:
            target = self.cdp.call("Target.createTarget", url="about:blank")["targetId"]
            self.cdp.session = self.cdp.call(
                "Target.attachToTarget", targetId=target, flatten=True
            )["sessionId"]
            self.cdp.call(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
            self.cdp.call("Page.enable")
            if headers:
                self.cdp.call("Network.enable")
                self.cdp.call("Network.setExtraHTTPHeaders", headers=headers)
        except BaseException:
            self.cdp.close()
            raise

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.cdp.close()

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        return self.cdp.evaluate(expression)

    def wait_for(self, expression: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {expression}")
            time.sleep(0.25)

    def goto(self, url: str, timeout: float = 60.0, retry_after: float = 10.0) -> None:
        """Open ``url`` and wait until the document and its images have loaded.

        A single-page app still changing its own URL (Label Studio's Data Manager adds
        ``&tab=N`` after a load) can cancel a navigation that starts meanwhile: the page then
        stays where it was. So while the page has not left its URL, the navigation is issued
        again every ``retry_after`` seconds; once it has, the load gets the rest of ``timeout``.
        The page has arrived at ``url`` also when the app has added its own query to it (a
        slow machine saw the Data Manager add ``?tab=N`` before the arrival was checked).
        """
        # arrived: at ``url``, or at it with the query the Data Manager adds once loaded (tab=N)
        more = json.dumps(url + ("&" if "?" in url else "?"))
        arrived = (
            f"(location.href === {json.dumps(url)} || location.href.startsWith({more})) "
            "&& document.readyState === 'complete'"
        )
        left = f"location.href !== {json.dumps(self.evaluate('location.href'))} || ({arrived})"
        deadline = time.monotonic() + timeout
        while True:
            self.cdp.call("Page.navigate", url=url)
            try:
                self.wait_for(left, min(retry_after, max(deadline - time.monotonic(), 0)))
                break
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise
        self.wait_for(arrived, max(deadline - time.monotonic(), 0))

    def click(self, element: str, timeout: float = 30.0) -> None:
        """A real mouse click at the middle of ``element`` (a JavaScript expression giving one
        element; Label Studio's controls ignore ``element.click()``), scrolled into view first
        (the Data Manager's rows scroll in a box of their own)."""
        self.wait_for(f"!!({element})", timeout)
        self.evaluate(f"({element}).scrollIntoView({{block: 'center', behavior: 'instant'}})")
        time.sleep(0.3)  # a virtualized table re-renders its rows as it scrolls
        x, y = self.evaluate(
            f"(() => {{ const r = ({element}).getBoundingClientRect(); "
            "return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.cdp.call(
                "Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1
            )

    def log_in_to_label_studio(self, base_url: str, username: str, password: str) -> None:
        """Log in to Label Studio at ``base_url`` through its login form."""
        self.goto(f"{base_url}/user/login")
        self.wait_for("!!document.querySelector('input[name=password]')")
        self.evaluate(
            f"document.querySelector('#email').value = {json.dumps(username)};"
            f"document.querySelector('#password').value = {json.dumps(password)};"
            "document.getElementById('login-form').submit()"
        )
        self.wait_for("!location.pathname.startsWith('/user/login')")

    def screenshot(self, path: str | os.PathLike, full_page: bool = True) -> None:
        """A PNG of the viewport, or of the whole page's height."""
        params: dict = {"format": "png"}
        if full_page:
            width, height = self.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
            )
            params.update(
                captureBeyondViewport=True,
                clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
            )
        png = self.cdp.call("Page.captureScreenshot", **params)["data"]
        Path(path).write_bytes(base64.b64decode(png))


@contextlib.contextmanager
def screenshot_file(out: Path):
    """Yield a hidden path beside ``out`` to write a screenshot to; it becomes ``out`` only if
    the block finishes, so a failed run never leaves a half-written image."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.stem}.tmp{out.suffix}")
    try:
        yield partial
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)


@contextlib.contextmanager
def screenshot_servers(prefix: str, env: dict[str, str], keep: bool):
    """The screenshot scripts' servers, in a new temporary directory (named from ``prefix``):
    a Label Studio, and a backend with ``env`` that talks to it; yields ``(ls_server,
    backend)``. On leaving, the backend (if started) and Label Studio stop, and the directory
    is removed unless ``keep``."""
    from testbed.servers import BackendServer, LabelStudioServer

    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    ls_server = LabelStudioServer(data_dir=tmp / "label-studio")
    backend = None
    try:
        ls_server.start()
        env = {**env, **ls_server.backend_env}
        backend = BackendServer(tmp / "models", env, tmp / "backend.log").start()
        yield ls_server, backend
    finally:
        if backend is not None:
            backend.stop()
        ls_server.stop()
        if keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
