"""Real servers on 127.0.0.1 for tests, benchmarks and scripts: redis-server, Label Studio 1.23.2.

Install them with ``bash scripts/install-test-servers.sh`` (install.sh calls it). Usage::

    from testbed.servers import LabelStudioServer, RedisServer, require_label_studio

    def test_x(tmp_path):
        require_label_studio()                  # skip locally / fail in CI when not installed
        with RedisServer() as redis_srv, LabelStudioServer() as ls:
            ...  # redis_srv.url, ls.url, ls.token, ls.api("GET", "/api/projects")

Label Studio's first start on an empty data dir spends 30-50 s in migrations, so the first
server builds a migrated *template* data dir once (under ``SUBREGWEIGH_TEST_CACHE``, default
``~/.cache/subregweigh-tests``; a lock file serialises parallel builders) and every server then
starts from a ``cp -a`` copy of it in seconds. Set ``SUBREGWEIGH_KEEP_TEST_SERVERS=1`` to keep
the temporary data dirs (and their logs) after a test.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent

# The release the suite runs against; scripts/ls-matrix.sh sets both to run it against others.
LS_VERSION = os.environ.get("SUBREGWEIGH_LS_VERSION", "1.23.2")
LS_VENV = Path(os.environ.get("SUBREGWEIGH_LS_VENV", REPO_ROOT / ".ls-venv"))
LS_BIN = LS_VENV / "bin" / "label-studio"
LS_USERNAME = "admin@example.com"
LS_PASSWORD = "admin12345"
# Legacy API token (``Authorization: Token ...``), fixed so cached template copies share it.
LS_TOKEN = "5ab0c0ffee1234567890abcdef0123456789abcd"
LS_STARTUP_TIMEOUT = 180.0

CACHE_DIR = Path(
    os.environ.get("SUBREGWEIGH_TEST_CACHE", Path.home() / ".cache" / "subregweigh-tests")
)
INSTALL_HINT = (
    "run `bash scripts/install-test-servers.sh` to install redis-server, Chromium and Label Studio"
)
_TEMPLATE_MARKER = "subregweigh-template.json"


class ServerError(RuntimeError):
    """A test server could not be found, started or stopped."""


# ----------------------------------------------------------------------------- helpers


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class QuietHandler(BaseHTTPRequestHandler):
    """The base of a test's own small HTTP server (a stub ML backend, say): it logs nothing, and
    :meth:`reply` answers 200 with a JSON body."""

    def reply(self, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]):
    """Serve ``handler`` on 127.0.0.1 from a thread; yields its URL, and shuts it down on
    leaving."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


def skip_or_fail(message: str) -> None:
    """Locally skip with ``message``; in CI (CI=true) fail, so a broken install is never green."""
    import pytest

    if _in_ci():
        pytest.fail(f"{message} (CI=true: missing test servers fail instead of skipping)")
    pytest.skip(message)


def _tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<no log at {path}: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


def _terminate(
    proc: subprocess.Popen | None, timeout: float = 20.0, first: signal.Signals = signal.SIGTERM
) -> None:
    """Signal the process group of ``proc`` (started with start_new_session), then SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    for sig, wait in ((first, timeout), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (from /proc), parents first."""
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        with contextlib.suppress(OSError, ValueError):
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
    return found


def memory_kb(pid: int, field: str = "VmRSS") -> int:
    """A memory figure of ``pid`` from /proc/<pid>/status in KiB (``VmRSS``: resident now,
    ``VmHWM``: peak resident); 0 once the process is gone."""
    with contextlib.suppress(OSError, StopIteration, ValueError):
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        return int(next(ln.split()[1] for ln in lines if ln.startswith(f"{field}:")))
    return 0


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants together, in MiB."""
    return sum(memory_kb(member) for member in process_tree(pid)) / 1024


def largest_peak_mb(pid: int) -> float:
    """The largest peak resident memory (VmHWM) of ``pid`` or one of its descendants, in MiB."""
    return max(memory_kb(member, "VmHWM") for member in process_tree(pid)) / 1024


def reset_peaks(pid: int) -> None:
    """Restart the VmHWM count of ``pid`` and its descendants at their present VmRSS (Linux 4.0+:
    ``5`` into /proc/<pid>/clear_refs; the processes must be ours)."""
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            Path(f"/proc/{member}/clear_refs").write_text("5")


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` and its reaped children have used; 0 once it is gone."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        # stat(5) fields 14-17 (utime, stime, cutime, cstime); field 3 follows the command's ")"
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return 0.0


class PeakMemory(threading.Thread):
    """Samples ``measure`` (MiB) of the processes ``pids`` every ``interval`` s; keeps the
    largest value of each, in ``peak`` (name -> MiB)."""

    def __init__(self, pids: dict[str, int], measure=tree_rss_mb, interval: float = 0.25):
        super().__init__(daemon=True)
        self.pids, self.measure, self.interval = pids, measure, interval
        self.peak = {name: 0.0 for name in pids}
        self.stopped = threading.Event()

    def sample(self) -> None:
        for name, pid in self.pids.items():
            self.peak[name] = max(self.peak[name], self.measure(pid))

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            self.sample()

    def stop(self) -> dict[str, float]:
        """Stop sampling, after one last sample; the peaks."""
        self.stopped.set()
        self.join()
        self.sample()
        return self.peak


def _killpg_rest(proc: subprocess.Popen) -> None:
    """Kill whatever else is left in the process group after the leader exited."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


# ----------------------------------------------------------------------------- redis


def redis_available() -> bool:
    return shutil.which("redis-server") is not None


def require_redis() -> None:
    if not redis_available():
        skip_or_fail(f"redis-server is not installed; {INSTALL_HINT}")


def _redis_ping(port: int, timeout: float = 1.0, password: str | None = None) -> bool:
    try:
        import redis  # type: ignore[import-not-found]
    except ImportError:
        redis = None
    if redis is not None:
        client = redis.Redis(
            host="127.0.0.1",
            port=port,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            password=password,
        )
        try:
            return bool(client.ping())
        except redis.exceptions.RedisError:
            return False
        finally:
            client.close()
    if password:
        raise ServerError("the redis package is needed to reach a password-protected redis-server")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class _OwnedServer:
    """start()/stop() plus: a context manager that deletes the data dir it created."""

    _own_dir: bool
    data_dir: Path

    def close(self) -> None:
        self.stop()
        if self._own_dir and not os.environ.get("SUBREGWEIGH_KEEP_TEST_SERVERS"):
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: Any) -> None:
        self.close()


class RedisServer(_OwnedServer):
    """A throwaway ``redis-server`` on 127.0.0.1.

    Default: no persistence (``--save "" --appendonly no``), working dir in a temp dir.
    For persistence tests pass ``data_dir`` (kept across stop()/start(), never deleted by us)
    and ``appendonly=True`` (``appendfsync`` defaults to ``always`` so a SIGKILL loses nothing
    acknowledged). ``password`` turns on ``requirepass`` (and goes into :attr:`url`). ``stop()``
    is a graceful SIGTERM, ``kill()`` a SIGKILL crash; ``start()`` again reuses the same port and
    data dir.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        data_dir: str | os.PathLike | None = None,
        appendonly: bool = False,
        appendfsync: str = "always",
        extra_args: tuple[str, ...] | list[str] = (),
        startup_timeout: float = 20.0,
        password: str | None = None,
    ) -> None:
        self.binary = shutil.which("redis-server")
        self.password = password
        self.port = port or free_port()
        self._own_dir = data_dir is None
        self.data_dir = (
            Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="redis-test-"))
        )
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.log_path = self.data_dir / "redis-server.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self) -> list[str]:
        cmd = [
            self.binary or "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            str(self.data_dir),
            "--daemonize",
            "no",
            "--logfile",
            "",
        ]
        if self.appendonly:
            cmd += ["--appendonly", "yes", "--appendfsync", self.appendfsync]
        else:
            cmd += ["--appendonly", "no"]
        if self.password:
            cmd += ["--requirepass", self.password]
        return cmd + self.extra_args

    def start(self) -> RedisServer:
        if self.running:
            return self
        if self.binary is None:
            raise ServerError(f"redis-server not found on PATH; {INSTALL_HINT}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
            )
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(
                    f"redis-server exited with {self.proc.returncode} on port {self.port}:\n"
                    + _tail(self.log_path)
                )
            if _redis_ping(self.port, password=self.password):
                return self
            time.sleep(0.05)
        self.stop()
        raise ServerError(
            f"redis-server on port {self.port} did not answer PING within "
            f"{self.startup_timeout:.0f} s:\n{_tail(self.log_path)}"
        )

    def stop(self) -> None:
        """Graceful shutdown (SIGTERM; redis flushes the AOF when appendonly is on)."""
        _terminate(self.proc)
        self.proc = None

    def kill(self) -> None:
        """Crash it (SIGKILL), for persistence tests."""
        if self.running:
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.proc = None

    def __repr__(self) -> str:
        return f"RedisServer({self.url}, running={self.running})"


# ----------------------------------------------------------------------------- label studio


def ls_installed_version() -> str | None:
    """The label-studio version in .ls-venv (read from its metadata: no interpreter start)."""
    if not os.access(LS_BIN, os.X_OK):
        return None
    for dist in LS_VENV.glob("lib/python*/site-packages/label_studio-*.dist-info"):
        return dist.name[len("label_studio-") : -len(".dist-info")]
    return None


def ls_available() -> bool:
    """True when .ls-venv holds label-studio==LS_VERSION."""
    return ls_installed_version() == LS_VERSION


def require_label_studio() -> None:
    """Skip (locally) or fail (CI=true) the calling test when Label Studio is not installed."""
    found = ls_installed_version()
    if found != LS_VERSION:
        what = "not installed" if found is None else f"version {found}, need {LS_VERSION}"
        skip_or_fail(f"Label Studio in {LS_VENV} is {what}; {INSTALL_HINT}")


def ls_env(
    data_dir: Path, username: str = LS_USERNAME, password: str = LS_PASSWORD, token: str = LS_TOKEN
) -> dict[str, str]:
    """Environment for ``label-studio start``: ours only, nothing inherited it would misread."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LABEL_STUDIO_", "HEARTEX_", "DJANGO_", "PYTHON", "VIRTUAL_ENV"))
    }
    # Label Studio reads every setting X also as bare X (get_env: LABEL_STUDIO_X, HEARTEX_X, X).
    for bare in (
        "USERNAME",
        "PASSWORD",
        "HOST",
        "PORT",
        "USER_TOKEN",
        "BASE_DATA_DIR",
        "DEBUG",
        "LOG_LEVEL",
        "SENTRY_DSN",
        "DATABASE_URL",
        "POSTGRE_HOST",
        "REDIS_LOCATION",
    ):
        env.pop(bare, None)
    env.update(
        {
            "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
            "LABEL_STUDIO_USERNAME": username,
            "LABEL_STUDIO_PASSWORD": password,
            "LABEL_STUDIO_USER_TOKEN": token,
            "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
            # Without these, connecting an ML backend on 127.0.0.1 fails with 403.
            "ML_BLOCK_LOCAL_IP": "false",
            "SSRF_PROTECTION_ENABLED": "false",
            # No outbound traffic: no PyPI version check, no analytics, no Sentry reports (its
            # settings default to a public DSN; an empty one turns the client off).
            "LABEL_STUDIO_LATEST_VERSION_CHECK": "false",
            "LABEL_STUDIO_COLLECT_ANALYTICS": "false",
            "LABEL_STUDIO_SENTRY_DSN": "",
            "LABEL_STUDIO_FRONTEND_SENTRY_DSN": "",
            "PATH": f"{LS_VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    return env


def http_json(
    method: str,
    url: str,
    *,
    token: str | None = None,
    body: Any = None,
    timeout: float = 30.0,
    auth: tuple[str, str] | None = None,
) -> tuple[int, Any]:
    """``(HTTP status, JSON body or text)`` of a request with a JSON ``body``; a Label Studio
    ``token`` or basic ``auth`` if given. An error status is returned, not raised."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Token {token}")
    if auth:
        req.add_header(
            "Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


def template_dir() -> Path:
    return CACHE_DIR / f"ls-template-{LS_VERSION}"


def _template_ok(path: Path, username: str, token: str) -> bool:
    try:
        meta = json.loads((path / _TEMPLATE_MARKER).read_text())
    except (OSError, ValueError):
        return False
    return (
        meta.get("version") == LS_VERSION
        and meta.get("username") == username
        and meta.get("token") == token
    )


def ensure_ls_template(
    username: str = LS_USERNAME, password: str = LS_PASSWORD, token: str = LS_TOKEN
) -> Path:
    """The migrated template data dir; built once (about 50 s) under a lock file."""
    target = template_dir()
    if _template_ok(target, username, token):
        return target
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / f"ls-template-{LS_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a parallel run that got here first builds it
        if _template_ok(target, username, token):
            return target
        build = Path(tempfile.mkdtemp(prefix=f"ls-template-{LS_VERSION}.build-", dir=CACHE_DIR))
        try:
            started = time.monotonic()
            server = LabelStudioServer(
                data_dir=build / "data",
                use_template=False,
                username=username,
                password=password,
                token=token,
            )
            with server:
                pass  # start() waited for /health and checked the token; exit stops it cleanly
            data = build / "data"
            (data / _TEMPLATE_MARKER).write_text(
                json.dumps(
                    {
                        "version": LS_VERSION,
                        "username": username,
                        "token": token,
                        "build_seconds": round(time.monotonic() - started, 1),
                    }
                )
            )
            os.replace(data / "label-studio.log", CACHE_DIR / f"ls-template-{LS_VERSION}.build.log")
            if target.exists():
                shutil.rmtree(target)
            os.replace(data, target)
        finally:
            # Keep the build's log beside the template (and out of it) for diagnosis.
            with contextlib.suppress(FileNotFoundError):
                os.replace(
                    build / "data" / "label-studio.log",
                    CACHE_DIR / f"ls-template-{LS_VERSION}.build.log",
                )
            shutil.rmtree(build, ignore_errors=True)
        return target


class LabelStudioServer(_OwnedServer):
    """A real Label Studio on 127.0.0.1 from .ls-venv, with a legacy API token.

    With ``use_template=True`` (default) the data dir starts as a copy of the cached, migrated
    template (built on first use). ``data_dir`` must be missing or empty; default: a temp dir,
    deleted on exit. The log is ``<data_dir>/label-studio.log``.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        data_dir: str | os.PathLike | None = None,
        use_template: bool = True,
        username: str = LS_USERNAME,
        password: str = LS_PASSWORD,
        token: str = LS_TOKEN,
        extra_env: dict[str, str] | None = None,
        startup_timeout: float = LS_STARTUP_TIMEOUT,
    ) -> None:
        self.port = port or free_port()
        self._own_dir = data_dir is None
        self.data_dir = (
            Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="ls-test-"))
        )
        self.use_template = use_template
        self.username, self.password, self.token = username, password, token
        self.extra_env = dict(extra_env or {})
        self.startup_timeout = startup_timeout
        self.log_path = self.data_dir / "label-studio.log"
        self.proc: subprocess.Popen | None = None
        self.startup_seconds: float | None = None
        self._prepared = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Token {self.token}"}

    @property
    def backend_env(self) -> dict[str, str]:
        """What a backend needs to talk to this server: ``LABEL_STUDIO_URL`` and
        ``LABEL_STUDIO_API_KEY``."""
        return {"LABEL_STUDIO_URL": self.url, "LABEL_STUDIO_API_KEY": self.token}

    def sdk(self):
        """A label-studio-sdk client of this server, with its token."""
        from label_studio_sdk.client import LabelStudio

        return LabelStudio(base_url=self.url, api_key=self.token)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def api(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        expect: int | tuple[int, ...] = (200, 201, 204),
        timeout: float = 30.0,
    ) -> Any:
        """Call the REST API with the token; raise ServerError on an unexpected status."""
        status, data = http_json(
            method, self.url + path, token=self.token, body=body, timeout=timeout
        )
        ok = (expect,) if isinstance(expect, int) else expect
        if status not in ok:
            raise ServerError(f"{method} {path} -> {status}: {str(data)[:2000]}")
        return data

    def _prepare_data_dir(self) -> None:
        if self._prepared:
            return
        if self.data_dir.exists() and any(self.data_dir.iterdir()):
            raise ServerError(f"Label Studio data dir {self.data_dir} is not empty")
        if self.use_template:
            template = ensure_ls_template(self.username, self.password, self.token)
            self.data_dir.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-a", f"{template}/.", str(self.data_dir)], check=True)
            (self.data_dir / _TEMPLATE_MARKER).unlink(missing_ok=True)
        else:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        self._prepared = True

    def start(self) -> LabelStudioServer:
        if self.running:
            return self
        found = ls_installed_version()
        if found != LS_VERSION:
            raise ServerError(
                f"Label Studio {LS_VERSION} not found in {LS_VENV} (found {found}); {INSTALL_HINT}"
            )
        self._prepare_data_dir()
        env = ls_env(self.data_dir, self.username, self.password, self.token)
        env.update(self.extra_env)
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    str(LS_BIN),
                    "start",
                    "--no-browser",
                    "--internal-host",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
            )
        try:
            self._wait_healthy(started)
            self._check_token()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _wait_healthy(self, started: float) -> None:
        deadline = started + self.startup_timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise ServerError(
                    f"label-studio exited with {self.proc.returncode} before "
                    f"/health answered; log {self.log_path}:\n{_tail(self.log_path)}"
                )
            try:
                status, _ = http_json("GET", self.url + "/health", timeout=5.0)
            except (OSError, urllib.error.URLError):
                status = None
            if status == 200:
                return
            time.sleep(0.25)
        raise ServerError(
            f"label-studio on {self.url} not healthy after "
            f"{self.startup_timeout:.0f} s; log {self.log_path}:\n{_tail(self.log_path)}"
        )

    def _check_token(self) -> None:
        status, data = http_json("GET", self.url + "/api/current-user/whoami", token=self.token)
        if status != 200 or not isinstance(data, dict) or data.get("email") != self.username:
            raise ServerError(
                f"the API token is not accepted by {self.url} "
                f"(whoami -> {status}: {str(data)[:500]})"
            )

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            # SIGTERM ends it at once; SIGINT (^C) made it wait up to 20 s for open connections.
            # Its SQLite data survives either way (test_faults restarts on the same data dir).
            _terminate(proc, timeout=5.0)
            _killpg_rest(proc)

    def __repr__(self) -> str:
        return f"LabelStudioServer({self.url}, running={self.running})"


# ----------------------------------------------------------------------------- our backend

REPO = Path(__file__).resolve().parents[1]


class BackgroundProcess:
    """A process of ours (the backend server, an rq worker) in its own session, logging to file."""

    def __init__(self, command: list[str], env: dict[str, str], log_path: Path, cwd: Path = REPO):
        self.command, self.env, self.log_path, self.cwd = command, env, Path(log_path), cwd
        self.proc: subprocess.Popen | None = None

    def start(self) -> BackgroundProcess:
        if self.proc is not None and self.proc.poll() is None:
            return self  # already running: ``with process.start():`` must not start a second one
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command,
                env=self.env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        # Descendants in sessions of their own (an rq work horse) outlive a process-group kill.
        tree = (
            process_tree(self.proc.pid)
            if self.proc is not None and self.proc.poll() is None
            else []
        )
        _terminate(self.proc, first=sig)
        for pid in tree[1:]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def log(self, lines: int = 80) -> str:
        return _tail(self.log_path, lines)

    def __enter__(self) -> BackgroundProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def product_env(model_dir: Path, env: dict[str, str]) -> dict[str, str]:
    """The environment of a process of the product (server, worker): os.environ without the
    caller's own SRW_* and REDIS_* settings, ``env`` over it, and ``model_dir`` as MODEL_DIR."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SRW_", "REDIS_"))}
    return {**full, **env, "MODEL_DIR": str(model_dir)}


class WorkerProcess(BackgroundProcess):
    """The product's rq worker, ``python -m backend.queue.worker`` as docker-compose runs it, with
    :func:`product_env` (the server's, when given the same ``env``); not started."""

    def __init__(self, model_dir: Path, env: dict[str, str], log_path: Path):
        super().__init__(
            [sys.executable, "-m", "backend.queue.worker"], product_env(model_dir, env), log_path
        )


class BackendServer(BackgroundProcess):
    """Our backend on a free port; ``env`` adds to (and overrides) os.environ.

    ``python _wsgi.py`` by default; with ``workers``, the production server: ``gunicorn -c
    gunicorn.conf.py _wsgi:app`` with that many processes of ``threads`` threads, of the file's
    worker class (backend/web/waitress_worker.py) or of ``worker_class``; ``"gthread"`` is the
    server as it was before issue 26 (with its 2 s keep-alive), for comparisons.
    """

    def __init__(
        self,
        model_dir: Path,
        env: dict[str, str],
        log_path: Path,
        port: int | None = None,
        workers: int | None = None,
        threads: int = 4,
        worker_class: str | None = None,
    ):
        self.port = port or free_port()
        full_env = product_env(model_dir, env)
        if workers is None:
            command = [
                sys.executable,
                str(REPO / "_wsgi.py"),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ]
        else:
            full_env.update(PORT=str(self.port), WORKERS=str(workers), THREADS=str(threads))
            if worker_class:  # gunicorn: the command line's settings win over the file's
                before = " --keep-alive 2" if worker_class == "gthread" else ""
                full_env["GUNICORN_CMD_ARGS"] = f"--worker-class {worker_class}{before}"
            command = [
                str(Path(sys.executable).parent / "gunicorn"),
                "-c",
                "gunicorn.conf.py",
                "_wsgi:app",
            ]
        super().__init__(command, full_env, log_path)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> BackendServer:
        super().start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"backend exited with {self.proc.returncode}:\n{self.log()}")
            with contextlib.suppress(OSError):  # connection refused until it listens
                if http_json("GET", self.url + "/health", timeout=2.0)[0] == 200:
                    return self
            time.sleep(0.3)
        self.stop()
        raise ServerError(f"backend not healthy after {timeout:.0f} s:\n{self.log()}")

    def get(self, path: str, auth: tuple[str, str] | None = None) -> tuple[int, Any]:
        return http_json("GET", self.url + path, timeout=30.0, auth=auth)

    def post(
        self, path: str, body: Any, auth: tuple[str, str] | None = None, timeout: float = 120.0
    ):
        return http_json("POST", self.url + path, body=body, timeout=timeout, auth=auth)


@contextlib.contextmanager
def backend_with_jobs(jobs: str, env: dict[str, str], workdir: Path):
    """Our backend (``python _wsgi.py``; MODEL_DIR ``workdir/models``, logs in ``workdir``) with
    ``env``, running its jobs ``"embedded"`` (threads in the server) or on ``"redis"``: a real
    redis-server and one ``python -m backend.queue.worker`` on a queue of the backend's own. Yields
    ``(backend, worker)`` (worker None when embedded); everything is stopped afterwards."""
    env = dict(env)
    redis = worker = backend = None
    try:
        if jobs == "redis":
            require_redis()
            redis = RedisServer().start()
            env.update(REDIS_URL=redis.url, RQ_QUEUE_NAME=f"srw-test-{workdir.name}")
        backend = BackendServer(workdir / "models", env, workdir / "backend.log").start()
        if redis is not None:
            worker = WorkerProcess(workdir / "models", env, workdir / "worker.log").start()
        yield backend, worker
    finally:
        for process in (worker, backend, redis):
            if process is not None:
                process.stop()


@contextlib.contextmanager
def label_studio_and_backend(workdir: Path, env: dict[str, str]):
    """A fresh Label Studio (:class:`LabelStudioServer`) and our backend talking to it
    (:class:`BackendServer` with ``env`` and the server's address and token; MODEL_DIR
    ``workdir/models``, its log ``workdir/backend.log``). Yields ``(label_studio, backend)``;
    both are stopped afterwards."""
    with LabelStudioServer() as label_studio:
        env = {**env, **label_studio.backend_env}
        with BackendServer(workdir / "models", env, workdir / "backend.log") as backend:
            yield label_studio, backend
