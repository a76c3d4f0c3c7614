#!/usr/bin/env bash
# Installs the real servers the integration tests start on 127.0.0.1 (testbed/servers.py):
#   - redis-server from Debian (installed only, not started as a service);
#   - docker-compose from Debian, to validate docker-compose.yml (tests/containers/test_deploy.py);
#   - Chromium from Debian, the headless browser that renders the backend's report
#     (tests/labelstudio/test_e2e_report.py, testbed/browser.py) and takes the README's screenshots;
#   - Label Studio 1.23.2 in its own virtualenv .ls-venv at the repo root (it pins Django and
#     ~1 GB of packages that must not mix with ours).
# Idempotent: a second run only checks and prints what it found.
set -euo pipefail
cd "$(dirname "$0")/.."
LS_VERSION="1.23.2"
LS_VENV=".ls-venv"
PY="${PYTHON:-python3}"

SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi

# (a) redis-server, (b) docker-compose (the Python 1.29 client, which validates
#     docker-compose.yml against the compose schema in tests/containers/test_deploy.py; no Docker engine
#     is needed or used) and (c) chromium, from Debian, in one apt-get run for whichever is
#     missing (each package is named as its command).
missing=""
for tool in redis-server docker-compose chromium; do
    if command -v "$tool" >/dev/null 2>&1; then
        echo "install-test-servers: $tool present"
    else
        missing="$missing $tool"
    fi
done
if [ -n "$missing" ]; then
    echo "install-test-servers: installing$missing (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    # policy-rc.d keeps the package from starting a redis service on install (no-op where there is
    # no init system); the tests start their own throwaway servers.
    created_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ] && [ -z "$SUDO" ] && [ -w /usr/sbin ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && created_policy=1
    fi
    # shellcheck disable=SC2086  # $missing is a list of package names
    $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
    if [ "$created_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
fi
echo "install-test-servers: $(redis-server --version | head -n 1); docker-compose $(docker-compose version --short 2>/dev/null); $(chromium --version 2>/dev/null)"

# (d) Label Studio in .ls-venv
ls_installed_version() {
    [ -x "$LS_VENV/bin/label-studio" ] || return 1
    "$LS_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("label-studio"))' 2>/dev/null
}
if [ "$(ls_installed_version || true)" = "$LS_VERSION" ]; then
    echo "install-test-servers: label-studio $LS_VERSION present in $LS_VENV"
else
    echo "install-test-servers: installing label-studio==$LS_VERSION into $LS_VENV (a few minutes)"
    start=$(date +%s)
    [ -x "$LS_VENV/bin/python" ] || "$PY" -m venv "$LS_VENV"
    log="$LS_VENV/install.log"
    # pip's output goes to a log (hundreds of lines); shown only if the install fails.
    if ! { "$LS_VENV/bin/python" -m pip install --disable-pip-version-check --upgrade pip &&
           "$LS_VENV/bin/python" -m pip install --disable-pip-version-check \
               -c scripts/label-studio-constraints.txt "label-studio==$LS_VERSION"; } >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "install-test-servers: pip install label-studio==$LS_VERSION failed (log: $log)" >&2
        exit 1
    fi
    got="$(ls_installed_version || true)"
    if [ "$got" != "$LS_VERSION" ]; then
        echo "install-test-servers: label-studio install failed (found '${got:-nothing}', log: $log)" >&2
        exit 1
    fi
    echo "install-test-servers: installed label-studio $got in $(( $(date +%s) - start )) s"
fi
