#!/usr/bin/env bash
# The standard load suite: REST reads against ctibridge and against a bare
# net/http handler serving the same bytes (both with `ctibridge loadtest
# http` and with wrk, in this sitting, so the ratios hold on a noisy
# machine), WebSocket fan-out during calls, and end-to-end SIP-to-screen
# runs at 10, 50 and 100 calls/s. Writes bench/results.json (not
# committed). See docs/loadtest.md.
#
#   bench/run.sh            # 10 s per HTTP run, 20 s per e2e run
#   D=30s E2E_D=60s bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-10s}
E2E_D=${E2E_D:-20s}
out=bench/results.json
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/ctibridge" ./cmd/ctibridge
go build -o "$tmp/bench" ./rest/internal/bench
lt="$tmp/ctibridge loadtest"
have_wrk=$(command -v wrk || true)

server() { # command...: start a server pinned to CPU 0 with one P
  GOMAXPROCS=1 taskset -c 0 "$@" 2>"$tmp/server.log" &
  echo $! >"$tmp/pid"
  sleep 0.7
}
stop() { kill "$(cat "$tmp/pid")"; wait "$(cat "$tmp/pid")" 2>/dev/null || true; }
wrk_rps() { # wrk args...: requests/s, or null without wrk
  if [ -z "$have_wrk" ]; then echo null; return; fi
  taskset -c 1 wrk -t1 -c100 -d"$D" "$@" | awk '/Requests\/sec/ {print $2}'
}
ltj() { taskset -c 1 $lt "$@" --json; } # the load tool pinned to CPU 1, like wrk

lua=rest/internal/bench/pipeline.lua
echo "bare net/http (status body)..." >&2
server "$tmp/bench" -mode bare -body status -addr 127.0.0.1:18082
bare=$(ltj http http://127.0.0.1:18082/ -c 100 -d "$D")
bare_p10=$(ltj http http://127.0.0.1:18082/ -c 100 -p 10 -d "$D")
bare_wrk=$(wrk_rps http://127.0.0.1:18082/)
bare_wrk_p10=$(wrk_rps -s $lua http://127.0.0.1:18082/ -- 10)
stop

echo "ctibridge REST reads (100 extensions)..." >&2
server "$tmp/bench" -mode ctibridge -ext 100 -addr 127.0.0.1:18081 -token-out "$tmp/tok"
tok=$(cat "$tmp/tok")
rest_status=$(ltj http http://127.0.0.1:18081/astproxy/status --token "$tok" -c 100 -d "$D")
rest_ext=$(ltj http http://127.0.0.1:18081/astproxy/extensions --token "$tok" -c 100 -d "$D")
rest_ext_p10=$(ltj http http://127.0.0.1:18081/astproxy/extensions --token "$tok" -c 100 -p 10 -d "$D")
rest_status_wrk=$(wrk_rps -H "Authorization: Bearer $tok" http://127.0.0.1:18081/astproxy/status)
stop

e2e() { # rate clients: an in-process pbxsim + bridge, SIPp when installed
  $lt e2e -r "$1" -c "$2" -d "$E2E_D" --json --max-missing -1 --max-ghosts -1 || true
}
echo "WebSocket fan-out: 500 clients watching 20 calls/s..." >&2
ws=$(e2e 20 500)
echo "e2e 10, 50, 100 calls/s..." >&2
e10=$(e2e 10 5)
e50=$(e2e 50 5)
e100=$(e2e 100 5)

jq -n --arg when "$(date -u +%FT%TZ)" --arg host "$(uname -n) $(nproc) CPUs" --arg commit "$(git rev-parse --short HEAD)" \
  --argjson bare "$bare" --argjson bare_p10 "$bare_p10" --argjson bare_wrk "${bare_wrk:-null}" --argjson bare_wrk_p10 "${bare_wrk_p10:-null}" \
  --argjson rest_status "$rest_status" --argjson rest_ext "$rest_ext" --argjson rest_ext_p10 "$rest_ext_p10" \
  --argjson rest_status_wrk "${rest_status_wrk:-null}" \
  --argjson ws "$ws" --argjson e10 "$e10" --argjson e50 "$e50" --argjson e100 "$e100" '
  {when: $when, host: $host, commit: $commit,
   baseline: {bare_nethttp: $bare, bare_nethttp_pipelined10: $bare_p10,
              wrk_bare_nethttp_rps: $bare_wrk, wrk_bare_nethttp_pipelined10_rps: $bare_wrk_p10},
   rest: {status: $rest_status, extensions: $rest_ext, extensions_pipelined10: $rest_ext_p10, wrk_status_rps: $rest_status_wrk},
   ratios: {rest_status_to_bare: ($rest_status.requests.per_second / $bare.requests.per_second),
            loadtest_to_wrk_bare: (if $bare_wrk == null then null else $bare.requests.per_second / $bare_wrk end),
            loadtest_to_wrk_bare_pipelined10: (if $bare_wrk_p10 == null then null else $bare_p10.requests.per_second / $bare_wrk_p10 end)},
   ws_fanout_500_clients_20_calls_per_s: $ws,
   e2e: {"10": $e10, "50": $e50, "100": $e100}}' >"$out"
echo "wrote $out" >&2
jq '{ratios, e2e_p99_ringing_ms: (.e2e | map_values(.latency_ms.p99)), e2e_missing: (.e2e | map_values(.counters.calls_missing))}' "$out"
