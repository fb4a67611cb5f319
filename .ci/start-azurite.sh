#!/usr/bin/env bash
# Starts the Azurite queue emulator on 127.0.0.1:10001 (in-memory, no
# telemetry) for the azqueue backend's tests. Idempotent: installs the pinned
# Azurite (tools/azurite/package-lock.json) only when it is missing and starts
# it only when nothing listens on the port yet.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/tools/azurite"
host=127.0.0.1
port="${AZURITE_QUEUE_PORT:-10001}"
log="${TMPDIR:-/tmp}/jobq-azurite-queue.log"

listening() {
	(exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

if listening; then
	exit 0
fi

if [ ! -x "$dir/node_modules/.bin/azurite-queue" ]; then
	echo "start-azurite: installing azurite from $dir/package-lock.json" >&2
	npm ci --prefix "$dir" --no-audit --no-fund >&2
fi

# setsid: the emulator must outlive this script and the shell that ran it.
setsid "$dir/node_modules/.bin/azurite-queue" \
	--queueHost "$host" --queuePort "$port" \
	--inMemoryPersistence --disableTelemetry --silent \
	>"$log" 2>&1 </dev/null &

for _ in $(seq 1 100); do
	if listening; then
		echo "start-azurite: azurite-queue listening on $host:$port (log: $log)" >&2
		exit 0
	fi
	sleep 0.1
done
echo "start-azurite: azurite-queue did not start listening on $host:$port within 10s; see $log" >&2
exit 1
