#!/usr/bin/env bash
# The AMI reader's fuzz target (ami/fuzz_test.go, FuzzReadMessage) run for
# FUZZTIME (10 minutes by default): the reader never panics or loops, its
# line-by-line and whole-frame paths read the same frames and count the
# same garbage, and every frame survives a write and a re-read. Not in CI
# (it is CPU for minutes); run it alone on the machine after touching
# ami/reader.go or ami/message.go.
#
# The seed corpus is the recordings in ami/testdata/*.ami plus
# ami/testdata/fuzz/FuzzReadMessage/ (inputs that once failed; plain
# `go test ./ami/` runs them too). A failure writes its input there: keep
# it, as a seed, with the fix.
#
#   bench/fuzz.sh                  # 10 minutes, one worker per core
#   FUZZTIME=30s bench/fuzz.sh     # a quick one
#   PARALLEL=1 bench/fuzz.sh       # one worker (a shared machine)
#
# Prints go test's progress lines and, at the end, the time it ran green.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10m}
parallel=${PARALLEL:-$(nproc)}
start=$(date +%s)
status=0
go test -run '^$' -fuzz '^FuzzReadMessage$' -fuzztime "$fuzztime" -parallel "$parallel" ./ami/ || status=$?
end=$(date +%s)
if [ "$status" -eq 0 ]; then
  echo "FuzzReadMessage green for $((end - start)) s (fuzztime $fuzztime, $parallel workers, build included)"
else
  echo "FuzzReadMessage FAILED after $((end - start)) s: the input is in ami/testdata/fuzz/FuzzReadMessage/" >&2
fi
exit "$status"
