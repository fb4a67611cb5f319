#!/usr/bin/env bash
# Starts the local Redis server the tests use (127.0.0.1:6379, no
# persistence) unless one already answers, then waits until it answers PING.
# Idempotent.
set -euo pipefail

port="${REDIS_PORT:-6379}"
ping() { redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; }

if ping; then
  # As a new server would be: no script cached. Tests that drop a reply
  # must not pass only because an earlier run left the scripts loaded.
  redis-cli -h 127.0.0.1 -p "$port" script flush >/dev/null
  echo "redis: already running on 127.0.0.1:$port (script cache flushed)"
  exit 0
fi
if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis: redis-server is not installed; install it with: apt-get install -y redis-server" >&2
  exit 1
fi
redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no
for _ in $(seq 1 50); do
  if ping; then
    echo "redis: started on 127.0.0.1:$port"
    exit 0
  fi
  sleep 0.1
done
echo "redis: redis-server did not answer PING on 127.0.0.1:$port within 5 s" >&2
exit 1
