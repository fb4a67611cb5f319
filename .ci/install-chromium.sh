#!/bin/sh
# Installs Debian's chromium, which the dashboard's browser test
# (cli/dashboard_browser_test.go) drives headless, unless a Chromium is
# already installed. Idempotent: running it again does nothing. With CI set,
# that test fails rather than skips when no Chromium is found.
set -eu
for b in chromium chromium-browser google-chrome headless-shell; do
	if command -v "$b" >/dev/null 2>&1; then
		exit 0
	fi
done
SUDO=""
if [ "$(id -u)" != 0 ]; then
	SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium
