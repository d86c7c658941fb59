#!/bin/sh
# redis-server with its password from the environment (REDIS_PASSWORD) written to a
# config file only this user reads: never on a command line, where `ps` shows it.
set -eu
[ "${1:-}" = "redis-server" ] && shift  # a caller naming the program (testcontainers)
umask 077
conf=/tmp/redis.conf
: > "$conf"
if [ -n "${REDIS_PASSWORD:-}" ]; then
  printf 'requirepass %s\n' "$REDIS_PASSWORD" >> "$conf"
fi
exec redis-server "$conf" "$@"
