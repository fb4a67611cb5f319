#!/bin/sh
# Installs Debian's python3-qpid-proton, which the Service Bus emulator
# (emulators/servicebus/sbemu.py) needs, unless it is already importable.
# Idempotent: running it again does nothing.
set -eu
if /usr/bin/python3 -c 'import proton' 2>/dev/null; then
	exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
	SUDO="sudo"
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-qpid-proton
/usr/bin/python3 -c 'import proton'
