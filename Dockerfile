# subregweigh: the Label Studio ML backend (gunicorn) and its rq worker, in one image.
#
#   docker build -t subregweigh .                                    # CPU torch (default)
#   docker build -t subregweigh:cuda \
#     --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 .   # CUDA 12.8 torch
#
# The image installs with the same script CI runs (install.sh; --runtime skips the test tools,
# --deps first installs the dependencies alone, a layer a code change leaves in the cache).
# CI builds it and runs the compose stack for real: scripts/container-smoke.sh.
# The default scout (MiniLM) is a pip package, so it is baked in and nothing is downloaded at
# run time. Runs as the unprivileged user "srw"; models live in the /data/models volume.
ARG PYTHON_VERSION=3.11
FROM python:${PYTHON_VERSION}-slim

ARG TORCH_SPEC="torch==2.13.0"
ARG TORCH_INDEX_URL="https://download.pytorch.org/whl/cpu"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    MODEL_DIR=/data/models \
    PORT=9090 \
    WORKERS=2 \
    THREADS=4

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin srw \
    && mkdir -p /data/models && chown srw:srw /data/models

WORKDIR /app
# PYTHON: the image is the isolation, so install into its own Python, not a .venv.
# The dependencies first, torch included, from install.sh and pyproject.toml alone: a change to
# the code leaves this layer in the build cache, and rebuilding takes seconds, not minutes.
COPY install.sh pyproject.toml ./
RUN PYTHON=python TORCH_SPEC="$TORCH_SPEC" TORCH_INDEX_URL="$TORCH_INDEX_URL" bash install.sh --deps
COPY . .
RUN PYTHON=python TORCH_SPEC="$TORCH_SPEC" TORCH_INDEX_URL="$TORCH_INDEX_URL" bash install.sh --runtime \
    && python -c "from subregweigh.scout import default_model; print('default scout:', default_model())"

USER srw
VOLUME ["/data/models"]
EXPOSE 9090
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('PORT', '9090'), timeout=5)"]
CMD ["gunicorn", "-c", "gunicorn.conf.py", "_wsgi:app"]
