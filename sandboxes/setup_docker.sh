#!/usr/bin/env bash
# Make a Docker engine available for the sandbox: install Debian's docker.io (and debootstrap,
# which builds the sandbox image offline) when missing, then start dockerd when it is not
# answering, and wait until `docker info` works. Also installs bubblewrap, which the local
# backend runs every program under, and numpy and pandas for the Python it runs them with
# (/usr/bin/python3), as the image has them. Idempotent; `make docker` and CI run it.
#
# The engine runs with --iptables=false --bridge=none: sandbox containers use --network none,
# so no bridge or NAT rule is ever needed (and this machine's kernel may lack the modules).
set -euo pipefail

WAIT_S="${RLVR_DOCKER_WAIT_S:-60}"
LOG="${RLVR_DOCKERD_LOG:-/tmp/rlvr-dockerd.log}"

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || need+=(python3-numpy)  # the local backend's interpreter
/usr/bin/python3 -c 'import pandas' >/dev/null 2>&1 || need+=(python3-pandas)
running=0
docker info >/dev/null 2>&1 && running=1
if [ "$running" = 0 ]; then
    command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
fi
if ((${#need[@]})); then
    if [ "$(id -u)" != 0 ]; then
        echo "docker: ${need[*]} missing and not root; install them (apt-get install ${need[*]})" >&2
        exit 1
    fi
    echo "docker: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ "$running" = 1 ]; then
    echo "docker: engine already running"
    exit 0
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
    if [ "$(id -u)" != 0 ]; then
        echo "docker: dockerd is not running and starting it needs root" >&2
        exit 1
    fi
    echo "docker: starting dockerd (log: $LOG)"
    # setsid: the daemon must outlive this script and the make/CI process that ran it.
    setsid nohup dockerd --iptables=false --ip6tables=false --bridge=none >"$LOG" 2>&1 < /dev/null &
fi

for _ in $(seq "$WAIT_S"); do
    if docker info >/dev/null 2>&1; then
        echo "docker: engine ready ($(docker version --format '{{.Server.Version}}'))"
        exit 0
    fi
    sleep 1
done
echo "docker: engine did not answer within ${WAIT_S}s; last lines of $LOG:" >&2
tail -n 20 "$LOG" >&2 || true
exit 1
