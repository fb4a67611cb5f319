#!/bin/sh
# Installs Debian's pgbouncer, which the Postgres backend's PgBouncer test
# (backends/postgres/pgbouncer_test.go) runs on a loopback port of its own,
# unless it is already installed. Idempotent: running it again does nothing.
set -eu
if command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; then
	exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
	SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq pgbouncer
