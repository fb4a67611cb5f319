#!/usr/bin/env bash
# Starts the local PostgreSQL cluster for the postgres backend's tests and
# waits until it accepts connections on 127.0.0.1:5432; then makes sure the
# database "test" exists. Idempotent: does nothing but check when the server
# is already up. Runs as root (CI) or as the postgres user. On a machine with
# no PostgreSQL at all it installs Debian's package (root only) and sets
# trust authentication for local connections, which is what the tests use.
set -euo pipefail

host=127.0.0.1
port="${PGPORT:-5432}"
db=test

ready() { pg_isready -q -h "$host" -p "$port" >/dev/null 2>&1; }

if ! ready; then
	if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
		if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
			echo "start-postgres: PostgreSQL is not installed; install it (Debian: apt-get install postgresql) and re-run" >&2
			exit 1
		fi
		echo "start-postgres: installing PostgreSQL from Debian" >&2
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
		for hba in /etc/postgresql/*/main/pg_hba.conf; do
			printf 'local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n' >"$hba"
		done
	fi
	for dir in /etc/postgresql/*/main; do
		version=$(basename "$(dirname "$dir")")
		echo "start-postgres: starting cluster $version/main" >&2
		# --skip-systemctl-redirect: there is no systemd here; start it directly.
		pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 || true
	done
	for _ in $(seq 1 300); do
		ready && break
		sleep 0.1
	done
	if ! ready; then
		echo "start-postgres: PostgreSQL is not accepting connections on $host:$port after 30s; see /var/log/postgresql/" >&2
		exit 1
	fi
fi

if ! psql -h "$host" -p "$port" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
	echo "start-postgres: creating database $db" >&2
	psql -h "$host" -p "$port" -U postgres -d postgres -qc "CREATE DATABASE $db" >&2
fi
echo "start-postgres: PostgreSQL accepting connections on $host:$port (database $db)" >&2
