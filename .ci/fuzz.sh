#!/usr/bin/env bash
# Runs every Fuzz target in the repository for a few seconds each
# (FUZZTIME, default 3s). go test accepts one -fuzz target per package per
# run, so each target gets its own invocation.
#
# The seed corpora (f.Add and each package's testdata/fuzz) run as ordinary
# tests in `go test ./...`, and a failure there fails CI. A *new* input the
# fuzzer finds here is reported with the file it wrote, to be fixed and
# kept as a seed; it fails this script only with FUZZ_STRICT=1, because a
# few random seconds must not decide whether a change lands.
#
# A run that fails without writing an input is not a finding: Go 1.26's
# fuzz coordinator can report its own -fuzztime deadline as a failure
# ("context deadline exceeded", golang/go#75804, fixed in Go 1.27). Such a
# run is counted apart and never fails this script.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-3s}"
# inputs counts the files in a corpus directory (0 when there is none).
inputs() { if [ -d "$1" ]; then find "$1" -type f | wc -l; else echo 0; fi; }
n=0
found=0
flaked=0
while IFS=: read -r file name; do
	pkg="./$(dirname "$file")"
	corpus="$(dirname "$file")/testdata/fuzz/$name"
	before=$(inputs "$corpus")
	echo "fuzz: $pkg $name ($fuzztime)"
	if ! go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg"; then
		if [ "$(inputs "$corpus")" -gt "$before" ]; then
			found=$((found + 1))
			echo "fuzz: NEW FAILING INPUT for $name in $pkg (see $corpus above): fix it and commit the input as a seed"
		else
			flaked=$((flaked + 1))
			echo "fuzz: $name in $pkg failed without writing an input (the fuzz engine's own deadline, golang/go#75804): not a finding"
		fi
	fi
	n=$((n + 1))
done < <(git ls-files '*_test.go' | xargs grep -Ho '^func Fuzz[A-Za-z0-9_]*' | sed 's/func //' | sort)
echo "fuzz: $n targets ran, $found found a new failing input, $flaked failed without one"
if [ "$found" -gt 0 ] && [ "${FUZZ_STRICT:-0}" = 1 ]; then
	exit 1
fi
