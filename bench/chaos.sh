#!/usr/bin/env bash
# The fault suite's long run: AMI faults for 150 s, a database
# outage then kill -9 of serve for 5 minutes under 10 calls/s, and a
# WebSocket subscribe flood against 1,000 clients. Writes
# bench/out/chaos.json (ignored by git) and prints the table. Needs
# sipp (sip-tester) and PostgreSQL's binaries (initdb, pg_ctl). See
# docs/loadtest.md and docs/operations.md ("Fault suite").
#
#   bench/chaos.sh              # report the targets (exit 1 only on an invariant)
#   bench/chaos.sh --strict     # also fail on a missed target
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p bench/out
go build -o "$tmp/ctibridge" ./cmd/ctibridge
go build -o "$tmp/ctibridge-lab" ./cmd/ctibridge-lab # runs the ctibridge beside it
set +e
"$tmp/ctibridge-lab" loadtest chaos --ami-d 150s --db-d 5m --ws-clients 1000 --ws-d 20s --json "$@" >bench/out/chaos.json
rc=$?
set -e
jq -r '.checks[] | [.scenario, .name, .value, .target, (if .pass then "PASS" elif .invariant then "FAIL" else "FAIL (target)" end)] | @tsv' bench/out/chaos.json
echo "wrote bench/out/chaos.json" >&2
exit $rc
