#!/usr/bin/env bash
# Runs every Go fuzz test in the module for FUZZTIME each (first argument,
# default 5s). Seed corpora and crash regressions live in each package's
# testdata/fuzz; a crash writes its input there and fails the run.
#
# The Go fuzz engine itself sometimes ends a time-boxed run under load with
# "context deadline exceeded" and no failing input (its coordinator timed
# out, nothing was found). Such a run is retried, up to three attempts; any
# other failure fails at once.
#
# FUZZ_WORKERS caps the fuzz workers (make test: 1, beside the end-to-end
# tests); unset, one per core.
#
# Minimizing a new interesting input may take the engine up to 60 s by
# default, with no executions meanwhile; 3 s keeps short runs fuzzing (a
# crasher is still minimized before it is written).
set -uo pipefail
fuzztime=${1:-5s}
cd "$(dirname "$0")/.."
status=0
for file in $(grep -rl --include='*_test.go' '^func Fuzz' --exclude-dir=hack --exclude-dir=bin .); do
	dir=$(dirname "$file")
	for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
		for attempt in 1 2 3; do
			echo "fuzz $dir $target for $fuzztime (attempt $attempt)"
			out=$(go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 3s ${FUZZ_WORKERS:+-parallel "$FUZZ_WORKERS"} "./$dir" 2>&1)
			rc=$?
			if [ $rc -eq 0 ]; then
				grep -E '^(ok|fuzz: elapsed)' <<<"$out" | tail -2
				break
			fi
			echo "$out"
			if grep -q 'Failing input written to' <<<"$out" || ! grep -q 'context deadline exceeded' <<<"$out" || [ $attempt -eq 3 ]; then
				status=1
				break
			fi
			echo "fuzz engine timed out with no failing input: retrying"
		done
	done
done
exit $status
