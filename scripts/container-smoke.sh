#!/usr/bin/env bash
# Builds the project's image and runs the compose stack for real, then tests it as a user would
# (tests/containers/test_container_stack.py): the unchanged Dockerfile and docker-compose.yml, on podman.
#
#   bash scripts/container-smoke.sh        (as root; .ci/run calls it after the test suite)
#
# What it does, and why (docs: ../shared/docs/containers-here.md):
#   1. installs podman, runc, debootstrap and docker-compose from Debian when missing;
#   2. makes stand-ins for the base images, since no registry is reachable here, each built once
#      per machine and kept (rebuilt only when missing or when its recipe below changes):
#        docker.io/library/python:3.11-slim        Debian bookworm (debootstrap from the machine's
#                                                  apt mirror) + Debian's Python 3.11 in a venv
#        docker.io/library/redis:7.2-alpine        Debian's redis-server (7.0), protected mode
#                                                  off as in the official image
#        docker.io/heartexlabs/label-studio:1.23.2 pip's label-studio==1.23.2, data in
#                                                  /label-studio/data, uid 1001 as the official one
#      The machine's extra CA certificates (/usr/local/share/ca-certificates: its outbound HTTPS
#      is re-signed) are copied into the stand-in base at build time; they are never committed;
#   3. builds the project's Dockerfile (`subregweigh:latest`, every run, with the layer cache),
#      torch from the host pip's find-links wheel directory when it has a CPU wheel there;
#   4. starts backend, rq worker, Redis and Label Studio with `docker-compose up` through podman's
#      Docker-compatible socket, with a healthcheck loop standing in for systemd's timers;
#   5. runs tests/containers/test_container_stack.py against it (SRW_CONTAINER_STACK=1), then removes the
#      containers, network and volumes (trap); the images stay for the next run.
#
# Environment: PYTHON (the interpreter with the project's test packages; default: python3 on
# PATH), SRW_CONTAINER_STATE (per-machine state, default /var/lib/subregweigh-containers),
# SRW_KEEP_STACK=1 (leave the stack running for a look; `docker-compose down -v` it yourself).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
log() { echo "container-smoke: $*"; }
die() { echo "container-smoke: ERROR: $*" >&2; exit 1; }
t0=$(date +%s)
phase_start=$t0
phase() { local now; now=$(date +%s); log "$1 took $(( now - phase_start )) s"; phase_start=$now; }

[ "$(id -u)" = 0 ] || die "run as root: podman builds and runs the images as root here"
PYTHON="${PYTHON:-python3}"
"$PYTHON" -c "import pytest, label_studio_sdk, numpy" 2>/dev/null \
    || die "PYTHON=$PYTHON lacks pytest/label-studio-sdk/numpy: set PYTHON to the project's .venv/bin/python"
STATE="${SRW_CONTAINER_STATE:-/var/lib/subregweigh-containers}"
PROJECT="srw-smoke-$$"  # compose project: its own containers, network and volumes per run
PY_TAG="docker.io/library/python:3.11-slim"
REDIS_TAG="docker.io/library/redis:7.2-alpine"
LS_TAG="docker.io/heartexlabs/label-studio:1.23.2"
BASE_TAG="localhost/srw-standin/debian:bookworm"
ROOTFS_TAG="localhost/srw-standin/debian-minbase:bookworm"
IMAGE="localhost/subregweigh:latest"
mkdir -p "$STATE"
WORK="$(mktemp -d /tmp/container-smoke.XXXXXX)"
service_pid="" health_pid="" ls_build_pid="" sock=""

# --- 1. tools ------------------------------------------------------------------------------------
missing=""
for pair in podman:podman runc:runc debootstrap:debootstrap docker-compose:docker-compose; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing="$missing ${pair#*:}"
done
if [ -n "$missing" ]; then
    log "installing$missing (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086  # a list of package names
    apt-get install -y -qq $missing >"$WORK/apt.log" 2>&1 || { tail -n 30 "$WORK/apt.log" >&2; die "apt-get install$missing failed"; }
fi
log "$(podman --version), runc $(runc --version | awk 'NR==1{print $3}'), docker-compose $(docker-compose version --short)"

# podman's defaults fail here: crun cannot run with this machine's hybrid cgroups, there is no
# systemd for the cgroup manager, and raising the default ulimits is not permitted.
export CONTAINERS_CONF="$STATE/containers.conf"
cat >"$CONTAINERS_CONF" <<'EOF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF

compose() { docker-compose -p "$PROJECT" --project-directory "$REPO" -f "$REPO/docker-compose.yml" "$@"; }

cleanup() {
    local rc=$?
    set +e
    if [ -n "$service_pid" ] && [ "${SRW_KEEP_STACK:-0}" != 1 ]; then
        log "removing the stack (containers, network, volumes; the images stay)"
        compose down -v --remove-orphans --timeout 10 >"$WORK/down.log" 2>&1 || tail -n 20 "$WORK/down.log" >&2
    elif [ -n "$service_pid" ]; then
        log "SRW_KEEP_STACK=1: the stack $PROJECT keeps running (DOCKER_HOST=$DOCKER_HOST)"
    fi
    [ -n "$health_pid" ] && kill "$health_pid" 2>/dev/null
    [ -n "$ls_build_pid" ] && kill "$ls_build_pid" 2>/dev/null
    if [ -n "$service_pid" ] && [ "${SRW_KEEP_STACK:-0}" != 1 ]; then
        kill "$service_pid" 2>/dev/null
        rm -f "$sock"
    fi
    rm -rf "$WORK"
    log "finished in $(( $(date +%s) - t0 )) s (exit $rc)"
    exit "$rc"
}
trap cleanup EXIT
trap 'log "failed at line $LINENO: $BASH_COMMAND"' ERR
trap 'exit 130' INT TERM

# --- 2. stand-in base images ---------------------------------------------------------------------
apt_uri() {  # the URI the machine's apt uses for Debian suite $1 (one-line or deb822 sources)
    local files=()
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && files+=("$f")
    done
    [ "${#files[@]}" -gt 0 ] || return 0
    cat "${files[@]}" |
        awk -v s="$1" '
            function hit(u) { if (!out) { print u; out = 1 } }
            /^[[:space:]]*#/ { next }
            /^deb[[:space:]]/ { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                                if ($(i + 1) == s) hit($i); next }
            /^URIs:/ { uri = $2 }
            /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) found = 1 }
            /^[[:space:]]*$/ { if (found && uri) hit(uri); uri = ""; found = 0 }
            END { if (found && uri) hit(uri) }'
}

# The recipe of a stand-in is its Containerfile plus the files copied in; the image carries the
# hash as a label, so an edited recipe rebuilds it and an unchanged one is reused.
recipe_hash() { (cd "$1" && find . -type f | LC_ALL=C sort | xargs cat) | sha256sum | cut -c1-16; }
current() { podman image inspect --format '{{ index .Labels "subregweigh.standin" }}' "$1" 2>/dev/null || true; }
build_standin() {  # tag, context dir (with a Containerfile)
    local tag=$1 dir=$2 hash started
    hash=$(recipe_hash "$dir")
    if [ "$(current "$tag")" = "$hash" ]; then
        log "stand-in $tag present"
        return
    fi
    log "building stand-in $tag"
    started=$(date +%s)
    nice -n 10 podman build --network host --format docker --label "subregweigh.standin=$hash" \
        -t "$tag" -f "$dir/Containerfile" "$dir" >"$WORK/build-$(basename "$dir").log" 2>&1 || {
        tail -n 40 "$WORK/build-$(basename "$dir").log" >&2
        die "building the stand-in $tag failed"
    }
    log "built stand-in $tag in $(( $(date +%s) - started )) s"
}

exec 9>"$STATE/standins.lock"
flock 9  # another run on this machine building the stand-ins: wait for it, then reuse them

mirror=$(apt_uri bookworm)
[ -n "$mirror" ] || die "no apt source for Debian bookworm in /etc/apt: cannot bootstrap the base image"
if ! podman image exists "$ROOTFS_TAG"; then
    log "bootstrapping Debian bookworm (minbase) from $mirror (about 2 min)"
    started=$(date +%s)
    nice -n 10 debootstrap --variant=minbase bookworm "$WORK/rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 || {
        tail -n 30 "$WORK/debootstrap.log" >&2
        die "debootstrap failed"
    }
    rm -rf "$WORK"/rootfs/var/cache/apt/archives/*.deb "$WORK"/rootfs/var/lib/apt/lists/*
    tar -C "$WORK/rootfs" -c . | podman import --change 'CMD ["/bin/bash"]' - "$ROOTFS_TAG" >"$WORK/import.log" 2>&1 \
        || { cat "$WORK/import.log" >&2; die "podman import of the bootstrapped root failed"; }
    rm -rf "$WORK/rootfs"
    log "imported $ROOTFS_TAG in $(( $(date +%s) - started )) s"
fi

mkdir -p "$WORK/base/ca"
{
    echo "deb $mirror bookworm main"
    echo "deb $mirror bookworm-updates main"
    security=$(apt_uri bookworm-security)
    [ -z "$security" ] || echo "deb $security bookworm-security main"
} >"$WORK/base/sources.list"
cp /usr/local/share/ca-certificates/*.crt "$WORK/base/ca/" 2>/dev/null || true
cat >"$WORK/base/Containerfile" <<EOF
FROM $ROOTFS_TAG
COPY sources.list /etc/apt/sources.list
COPY ca/ /usr/local/share/ca-certificates/
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ca-certificates \\
    && rm -rf /var/lib/apt/lists/* && update-ca-certificates
ENV LANG=C.UTF-8
EOF
build_standin "$BASE_TAG" "$WORK/base"

# python:3.11-slim: Python at /usr/local/bin as in the official image, here a venv of Debian's
# Python 3.11 (Debian's own site-packages are "externally managed"), with a current pip (Debian's
# pip 23.0 fails to build seqeval). pip trusts the system CA bundle, which has the machine's CA.
mkdir -p "$WORK/python"
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$WORK/python/pip.conf"
cat >"$WORK/python/Containerfile" <<EOF
FROM $BASE_TAG
COPY pip.conf /etc/pip.conf
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\
        python3.11 python3.11-venv \\
    && rm -rf /var/lib/apt/lists/* \\
    && python3.11 -m venv /usr/local \\
    && /usr/local/bin/python -m pip install --quiet --disable-pip-version-check --no-cache-dir --upgrade pip
ENV PYTHON_VERSION=3.11
CMD ["python3"]
EOF
build_standin "$PY_TAG" "$WORK/python"

mkdir -p "$WORK/redis"
cat >"$WORK/redis/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
# As the official image: its redis-server is built with protected mode off (the container's
# network is the boundary); Debian's starts protected and refuses the other containers.
set -e
if [ "$1" = redis-server ]; then set -- "$@" --protected-mode no; fi
exec "$@"
EOF
cat >"$WORK/redis/Containerfile" <<EOF
FROM $BASE_TAG
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server \\
    && rm -rf /var/lib/apt/lists/* && mkdir -p /data && chown redis:redis /data
COPY docker-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
RUN chmod 755 /usr/local/bin/docker-entrypoint.sh
VOLUME /data
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["redis-server"]
EOF
build_standin "$REDIS_TAG" "$WORK/redis"

mkdir -p "$WORK/label-studio"
cp scripts/label-studio-constraints.txt "$WORK/label-studio/constraints.txt"  # part of its recipe
cat >"$WORK/label-studio/Containerfile" <<EOF
FROM $PY_TAG
COPY constraints.txt /tmp/constraints.txt
RUN pip install --quiet --disable-pip-version-check --no-cache-dir -c /tmp/constraints.txt label-studio==1.23.2 \\
    && useradd --create-home --uid 1001 --home-dir /label-studio labelstudio \\
    && mkdir -p /label-studio/data && chown -R 1001:0 /label-studio
ENV LABEL_STUDIO_BASE_DATA_DIR=/label-studio/data
WORKDIR /label-studio
USER 1001
EXPOSE 8080
CMD ["label-studio", "start", "--no-browser"]
EOF
# Label Studio (pip, ~1 GB) builds in the background while the project's image builds.
build_standin "$LS_TAG" "$WORK/label-studio" &
ls_build_pid=$!
exec 9>&-  # the background build keeps the lock until it is done
phase "stand-in images (Label Studio's continues in the background)"

# --- 3. the project's image ----------------------------------------------------------------------
# The torch CPU index the Dockerfile names is not reachable here. When the host's pip has a local
# CPU wheel (its find-links directory), the build reads that directory (mounted read-only) with
# a pip.conf naming it, and TORCH_INDEX_URL is emptied: pip takes torch from there.
build_args=() mounts=()
links="${PIP_FIND_LINKS:-$("$PYTHON" -m pip config get global.find-links 2>/dev/null || true)}"
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$WORK/pip.conf"
torch_version=$(sed -n 's/^ARG TORCH_SPEC="torch==\(.*\)"$/\1/p' Dockerfile)
for dir in $links; do
    dir="${dir#file://}"
    if [ -n "$torch_version" ] && compgen -G "$dir/torch-$torch_version+cpu-*.whl" >/dev/null; then
        log "torch $torch_version from the CPU wheel in $dir"
        printf 'find-links = %s\n' "$dir" >>"$WORK/pip.conf"
        build_args+=(--build-arg "TORCH_INDEX_URL=")
        mounts+=(--volume "$dir:$dir:ro")
        break
    fi
done
[ "${#build_args[@]}" -gt 0 ] || log "no local torch $torch_version CPU wheel: torch from the Dockerfile's TORCH_INDEX_URL"
mounts+=(--volume "$WORK/pip.conf:/etc/pip.conf:ro")
previous=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
log "building $IMAGE from the Dockerfile (layer cache on)"
started=$(date +%s)
nice -n 10 podman build --network host --format docker --layers "${build_args[@]}" "${mounts[@]}" \
    -t "$IMAGE" -f Dockerfile . >"$WORK/build-image.log" 2>&1 || {
    tail -n 60 "$WORK/build-image.log" >&2
    die "podman build of the Dockerfile failed"
}
grep -E "^default scout:|subregweigh installed" "$WORK/build-image.log" | sed 's/^/container-smoke:   /' || true
log "image $(podman image inspect --format '{{.Id}}' "$IMAGE" | cut -c1-12), $(( $(podman image inspect --format '{{.Size}}' "$IMAGE") / 1000000 )) MB, $(podman run --rm "$IMAGE" python -c 'import torch; print("torch", torch.__version__)')"
if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$IMAGE")" ]; then
    # the last run's image, now untagged: its layers shared with this one (the cache) stay
    podman rmi "$previous" >/dev/null 2>&1 && log "removed the previous image ${previous:0:12}" || true
fi
phase "image build"
wait "$ls_build_pid" || die "the Label Studio stand-in did not build"
ls_build_pid=""
phase "waiting for the Label Studio stand-in"

# --- 4. the compose stack ------------------------------------------------------------------------
sock="$STATE/podman-$$.sock"
podman system service --time=0 "unix://$sock" >"$WORK/podman-service.log" 2>&1 &
service_pid=$!
export DOCKER_HOST="unix://$sock"
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || die "podman system service did not open $sock: $(cat "$WORK/podman-service.log")"

# podman runs healthchecks from systemd timers; without systemd they never run, containers stay
# "starting" and `depends_on: service_healthy` waits forever. This loop runs them: every 2 s
# while a container is starting, every 30 s (the image's interval) once it is not.
health_loop() {
    local n=0 filter
    while :; do
        filter=(--filter health=starting)
        [ $(( n % 15 )) = 0 ] && filter=()
        for id in $(podman ps -q --filter "label=com.docker.compose.project=$PROJECT" "${filter[@]}"); do
            podman healthcheck run "$id" >/dev/null 2>&1 || true
        done
        n=$(( n + 1 ))
        sleep 2
    done
}
health_loop &
health_pid=$!

free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# What a user sets in .env or the shell: free ports on this shared machine, and a small engine
# (2 CPU cores): docs/configuration.md has these.
unset COMPOSE_PROFILES COMPOSE_FILE COMPOSE_PROJECT_NAME  # the committed .env's profile applies
export BACKEND_PORT LABEL_STUDIO_PORT
BACKEND_PORT=$(free_port)
LABEL_STUDIO_PORT=$(free_port)
export SRW_N=20 SRW_K=4 SRW_EPOCHS=2 SRW_RETRAIN_AFTER=1000
log "docker-compose up (project $PROJECT; backend on 127.0.0.1:$BACKEND_PORT, Label Studio on 127.0.0.1:$LABEL_STUDIO_PORT)"
compose up -d --no-build >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; die "docker-compose up failed"; }
compose ps
phase "stack up"

# --- 5. the test, as a user would use the stack --------------------------------------------------
export SRW_CONTAINER_STACK=1 SRW_STACK_PROJECT="$PROJECT" SRW_STACK_REPO="$REPO"
log "running tests/containers/test_container_stack.py"
status=0
"$PYTHON" -m pytest tests/containers/test_container_stack.py -v -s -n 0 -p no:cacheprovider || status=$?
if [ "$status" != 0 ]; then
    for service in backend worker redis label-studio; do
        echo "----- last log lines of $service"
        compose logs --no-color --tail 40 "$service" 2>&1 || true
    done
fi
phase "stack test"
exit "$status"
