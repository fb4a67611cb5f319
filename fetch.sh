#!/bin/sh
echo "fetch $1: No such file or directory" >&2
exit 2
