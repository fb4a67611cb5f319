#!/usr/bin/env bash
# Starts the Azurite emulators (in-memory, no telemetry) for the Azure
# tests: the queue service on 127.0.0.1:10001 (the azqueue backend) and the
# blob service on 127.0.0.1:10000 (the azblob stash store). Idempotent:
# installs the pinned Azurite (tools/azurite/package-lock.json) only when it
# is missing and starts each service only when nothing listens on its port
# yet, or, with AZURITE_FRESH=1 (what .ci/run sets), restarts it: an
# emulator that has served hours of test runs holds every blob they wrote
# in memory, and its blob service stopped answering in the middle of one.
# Each service runs through azurite-gc.js, which spaces Azurite's extent
# sweeps to one a day (AZURITE_GC_INTERVAL_MS): the blob service's sweep,
# 10 minutes after it started, held it for minutes in a CI run.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/tools/azurite"
host=127.0.0.1

listening() {
	(exec 3<>"/dev/tcp/$host/$1") 2>/dev/null
}

# answering PORT: an HTTP request to PORT gets a reply within 5 s. An
# emulator left running by an earlier run can still listen after it stopped
# answering (it wedged once under a long test run), and the tests would then
# hang on it.
answering() {
	timeout 5 bash -c "exec 3<>/dev/tcp/$host/$1 && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && head -c 5 <&3" 2>/dev/null | grep -q HTTP
}

# start SERVICE PORT [FLAG...]: starts azurite-SERVICE on PORT unless it is
# taken.
start() {
	local service=$1 port=$2
	shift 2
	local log="${TMPDIR:-/tmp}/jobq-azurite-$service.log"
	if listening "$port"; then
		if [ "${AZURITE_FRESH:-0}" = 1 ]; then
			echo "start-azurite: restarting azurite-$service on $host:$port for a fresh, empty emulator" >&2
			pkill -9 -f "azurite-$service .*--${service}Port $port" || true
			sleep 1
		elif answering "$port"; then
			return 0
		else
			echo "start-azurite: azurite-$service on $host:$port does not answer; restarting it" >&2
			pkill -9 -f "azurite-$service .*--${service}Port $port" || true
			sleep 1
		fi
	fi
	if [ ! -x "$dir/node_modules/.bin/azurite-$service" ]; then
		echo "start-azurite: installing azurite from $dir/package-lock.json" >&2
		npm ci --prefix "$dir" --no-audit --no-fund >&2
	fi
	# setsid: the emulator must outlive this script and the shell that ran it.
	# azurite-gc.js: Azurite with its extent sweep spaced out to a day (a
	# sweep 10 minutes into a run held the blob service for minutes).
	setsid node "$dir/azurite-gc.js" "azurite-$service" \
		"--${service}Host" "$host" "--${service}Port" "$port" \
		--inMemoryPersistence --disableTelemetry --silent "$@" \
		>"$log" 2>&1 </dev/null &
	for _ in $(seq 1 100); do
		if listening "$port"; then
			echo "start-azurite: azurite-$service listening on $host:$port (log: $log)" >&2
			return 0
		fi
		sleep 0.1
	done
	echo "start-azurite: azurite-$service did not start listening on $host:$port within 10s; see $log" >&2
	return 1
}

start queue "${AZURITE_QUEUE_PORT:-10001}"
# The azblob SDK speaks a newer storage API version than this Azurite
# knows; the blob operations the stash uses are the same in both.
start blob "${AZURITE_BLOB_PORT:-10000}" --skipApiVersionCheck
