#!/usr/bin/env bash
# A Docker Engine API without Docker: Podman serving it on a unix socket (NOTES.md).
#
#   eval "$(scripts/container-engine.sh)"   start (or reuse) the engine; prints `export DOCKER_HOST=...`
#   scripts/container-engine.sh stop        stop the engine this script started, by its PID
#
# Idempotent: packages, settings, the image and the service are each made only when missing.
# Progress goes to stderr; stdout carries only the export line, so `eval` is safe.
# Needs root (apt-get, debootstrap, podman's system store).
set -euo pipefail

CACHE_DIR=${HELDOUT_ENGINE_CACHE:-/var/cache/heldout}   # the image's root filesystem, built once
RUN_DIR=${HELDOUT_ENGINE_RUN:-/run/heldout}            # socket and PID file of the service
IMAGE=${HELDOUT_SANDBOX_IMAGE:-heldout-python:3.11}
SUITE=bookworm                                          # its python3 is 3.11, like the project's
MIRROR=${HELDOUT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Bumped whenever the image's packages change: a new root filesystem, and the image re-imported.
RECIPE=2
ROOTFS=$CACHE_DIR/rootfs-$SUITE-r$RECIPE
SOCKET=$RUN_DIR/podman.sock
PID_FILE=$RUN_DIR/podman.pid
LOG_FILE=$RUN_DIR/podman.log

say() { echo "container-engine: $*" >&2; }

# Runs a noisy command with its output in a log; shows the log's end only if it fails.
quietly() {
    local log status=0
    log=$(mktemp)
    "$@" >"$log" 2>&1 || status=$?
    ((status == 0)) || { tail -n 30 "$log" >&2; say "failed ($status): $*"; }
    rm -f "$log"
    return "$status"
}

service_pid() {
    local pid
    [[ -f $PID_FILE ]] || return 1
    pid=$(<"$PID_FILE")
    kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

socket_answers() {
    curl -sf --max-time 2 --unix-socket "$SOCKET" http://engine/_ping >/dev/null 2>&1
}

stop_service() {
    local pid
    if pid=$(service_pid); then
        kill "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        say "stopped podman service (PID $pid)"
    fi
    rm -f "$PID_FILE" "$SOCKET"
}

install_packages() {
    local missing=()
    command -v podman >/dev/null || missing+=(podman)
    command -v runc >/dev/null || missing+=(runc)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v curl >/dev/null || missing+=(curl)
    ((${#missing[@]} == 0)) && return
    say "installing ${missing[*]}"
    quietly apt-get update -qq
    quietly env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
}

# crun fails on this kernel's cgroups, and Podman's default ulimits exceed the hard limits here.
write_settings() {
    local conf=/etc/containers/containers.conf wanted
    wanted=$'[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=1000:1000"]\n\n[engine]\nruntime = "runc"\n'
    if [[ -f $conf && $(<"$conf")$'\n' == "$wanted" ]]; then return; fi
    [[ -f $conf ]] && cp "$conf" "$conf.before-heldout"
    mkdir -p /etc/containers
    printf '%s' "$wanted" >"$conf"
    say "wrote $conf"
}

# python3, not python3-minimal: HumanEval solutions import typing, math, hashlib, collections...
# python3-pytest: the repository kind's tests run with Debian's pytest, as on the host.
build_rootfs() {
    [[ -x $ROOTFS/usr/bin/python3 ]] && return
    say "building $ROOTFS with debootstrap (a few minutes, once)"
    rm -rf "$ROOTFS.partial"
    mkdir -p "$CACHE_DIR"
    quietly debootstrap --variant=minbase --include=python3,python3-pytest "$SUITE" "$ROOTFS.partial" "$MIRROR"
    rm -rf "$ROOTFS.partial"/var/cache/apt/archives/*.deb "$ROOTFS.partial"/var/lib/apt/lists/*
    mv "$ROOTFS.partial" "$ROOTFS"
}

import_image() {
    if podman image exists "$IMAGE"; then
        [[ $(podman image inspect --format '{{index .Labels "heldout.recipe"}}' "$IMAGE") == "$RECIPE" ]] \
            && return
    fi
    say "importing $ROOTFS as $IMAGE (recipe $RECIPE)"
    quietly podman import --change 'CMD ["python3"]' --change "LABEL heldout.recipe=$RECIPE" \
        - "$IMAGE" < <(tar -C "$ROOTFS" -c .)
}

start_service() {
    if service_pid >/dev/null && socket_answers; then return; fi
    stop_service
    mkdir -p "$RUN_DIR"
    # Its own session: the service outlives this script, and `stop` ends it by the PID recorded.
    setsid podman system service --time=0 "unix://$SOCKET" >"$LOG_FILE" 2>&1 </dev/null &
    echo $! >"$PID_FILE"
    for _ in $(seq 100); do
        socket_answers && { say "podman service on $SOCKET (PID $(<"$PID_FILE"))"; return; }
        service_pid >/dev/null || break
        sleep 0.2
    done
    say "the podman service did not answer on $SOCKET; its log: $LOG_FILE"
    stop_service
    exit 1
}

case ${1:-start} in
    start)
        install_packages
        write_settings
        build_rootfs
        import_image
        start_service
        echo "export DOCKER_HOST=unix://$SOCKET"
        ;;
    stop) stop_service ;;
    *) say "usage: $0 [start|stop]"; exit 2 ;;
esac
