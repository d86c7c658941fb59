#!/usr/bin/env bash
# Build and run the compose deployment on this machine, with or without a registry.
#
#   compose/stack.sh build        every image the compose file needs
#   compose/stack.sh up           build, then `up -d` (compose/.env made if missing)
#   compose/stack.sh down         `down` (volumes kept; `down -v` via: stack.sh compose down -v)
#   compose/stack.sh compose ARGS any compose command on the project
#   compose/stack.sh engine       print DOCKER_HOST of the engine it uses (starting one)
#   compose/stack.sh engine-stop  stop the private engine, if this script started one
#
# SPS_COMPOSE_PROJECT (default elastic-sps) and SPS_COMPOSE_ENV_FILE (default compose/.env,
# made from .env.example with a random Redis password on the first start) choose which.
#
# The engine: the one DOCKER_HOST (or the default socket) answers, never disturbed; if
# none answers and this runs as root with dockerd installed, a private engine on its own
# socket, data and exec roots (SPS_DOCKER_ROOT), which `engine-stop` stops again.
# The base: debian:bookworm-slim from a registry when one answers, else a debootstrapped
# minbase bookworm imported as local/debian:bookworm. Compose: v2 (`docker compose`)
# when the CLI has it, else Debian's docker-compose 1.29 (apt-installed when missing).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$HERE")"
PROJECT="${SPS_COMPOSE_PROJECT:-elastic-sps}"
STATE="${SPS_DOCKER_ROOT:-/var/lib/elastic-sps-docker}"
RUN_DIR="${SPS_DOCKER_RUN:-/run/elastic-sps-docker}"
PRIVATE_SOCK="unix://$RUN_DIR/docker.sock"
MIRROR="${SPS_DEBIAN_MIRROR:-$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"

log() { echo "stack: $*" >&2; }

answers() { DOCKER_HOST="$1" docker info >/dev/null 2>&1; }

engine() {
  if [ -n "${DOCKER_HOST:-}" ] && answers "$DOCKER_HOST"; then echo "$DOCKER_HOST"; return; fi
  if answers "unix:///var/run/docker.sock"; then echo "unix:///var/run/docker.sock"; return; fi
  if answers "$PRIVATE_SOCK"; then echo "$PRIVATE_SOCK"; return; fi
  if [ "$(id -u)" != 0 ] || ! command -v dockerd >/dev/null; then
    log "no Docker engine answers, and none can be started here (needs root and dockerd:"
    log "apt-get install docker.io)"; return 1
  fi
  mkdir -p "$RUN_DIR" "$STATE/data"
  log "starting a private Docker engine on $PRIVATE_SOCK (data in $STATE/data)"
  dockerd --host "$PRIVATE_SOCK" --data-root "$STATE/data" --exec-root "$RUN_DIR/exec" \
    --pidfile "$RUN_DIR/docker.pid" --storage-driver overlay2 \
    >"$STATE/dockerd.log" 2>&1 &
  for _ in $(seq 1 60); do answers "$PRIVATE_SOCK" && { echo "$PRIVATE_SOCK"; return; }; sleep 0.5; done
  log "the private engine did not answer within 30 s: $STATE/dockerd.log"; return 1
}

engine_stop() {
  [ -f "$RUN_DIR/docker.pid" ] || { log "no private engine to stop"; return 0; }
  local pid; pid="$(cat "$RUN_DIR/docker.pid")"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  rm -f "$RUN_DIR/docker.pid"
}

base_image() {
  if docker image inspect local/debian:bookworm >/dev/null 2>&1; then echo local/debian:bookworm; return; fi
  if docker image inspect debian:bookworm-slim >/dev/null 2>&1 || docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
    echo debian:bookworm-slim; return
  fi
  command -v debootstrap >/dev/null || { log "no registry and no debootstrap: apt-get install debootstrap"; return 1; }
  log "no registry answers: debootstrapping bookworm from $MIRROR"
  rm -rf "$STATE/rootfs"; mkdir -p "$STATE"
  debootstrap --variant=minbase bookworm "$STATE/rootfs" "$MIRROR" >"$STATE/debootstrap.log" 2>&1
  tar -C "$STATE/rootfs" -c . | docker import - local/debian:bookworm >/dev/null
  echo local/debian:bookworm
}

build() {
  local base; base="$(base_image)"
  # the host's extra CA certificates, for pip and Maven behind a TLS-re-signing egress
  find "$HERE/ca" -name '*.crt' -delete
  cp /usr/local/share/ca-certificates/*.crt "$HERE/ca/" 2>/dev/null || true
  for spec in "elastic-sps:latest Dockerfile" "elastic-sps/kafka:4.1.1 compose/kafka/Dockerfile" \
              "elastic-sps/redis:7 compose/redis/Dockerfile" \
              "elastic-sps/prometheus:2 compose/prometheus/Dockerfile"; do
    set -- $spec
    log "building $1 (base $base)"
    docker build -q --build-arg "BASE=$base" -t "$1" -f "$ROOT/$2" "$ROOT" >/dev/null
  done
}

compose_cmd() {
  if docker compose version >/dev/null 2>&1; then echo "docker compose"; return; fi
  if ! command -v docker-compose >/dev/null; then
    [ "$(id -u)" = 0 ] || { log "no compose: install docker-compose (v1) or the v2 plugin"; return 1; }
    log "installing Debian's docker-compose"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose >/dev/null
  fi
  echo docker-compose
}

run_compose() {
  local env_file="${SPS_COMPOSE_ENV_FILE:-$HERE/.env}"
  if [ ! -f "$env_file" ]; then  # a first start: a random Redis password
    cp "$HERE/.env.example" "$env_file"
    sed -i "s/^REDIS_PASSWORD=.*/REDIS_PASSWORD=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')/" "$env_file"
  fi
  $(compose_cmd) -p "$PROJECT" -f "$HERE/docker-compose.yml" --env-file "$env_file" "$@"
}

[ "${1:-}" = engine-stop ] && { engine_stop; exit 0; }
DOCKER_HOST="$(engine)"; export DOCKER_HOST
case "${1:-}" in
  engine) echo "$DOCKER_HOST" ;;
  build) build ;;
  up) build; run_compose up -d ;;
  down) run_compose down ;;
  compose) shift; run_compose "$@" ;;
  *) sed -n '2,18p' "$0"; exit 2 ;;
esac
