#!/usr/bin/env bash
# Runs every Fuzz target in the repository for a few seconds each
# (FUZZTIME, default 3s). go test accepts one -fuzz target per package per
# run, so each target gets its own invocation. The seed corpora under each
# package's testdata/fuzz run as ordinary tests in `go test ./...` too.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-3s}"
n=0
while IFS=: read -r file name; do
	pkg="./$(dirname "$file")"
	echo "fuzz: $pkg $name ($fuzztime)"
	go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg"
	n=$((n + 1))
done < <(git ls-files '*_test.go' | xargs grep -Ho '^func Fuzz[A-Za-z0-9_]*' | sed 's/func //' | sort)
echo "fuzz: $n targets ran"
