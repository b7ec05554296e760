#!/usr/bin/env bash
# Measures the REST read path against a bare net/http handler and fasthttp
# serving the same bytes, in one sitting (docs/http-pipelining.md).
# Server pinned to CPU 0 with GOMAXPROCS=1, wrk pinned to CPU 1.
# Usage: bench/rest.sh [duration, default 10s]   (needs wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
D=${1:-10s}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/ctibridge-lab" ./cmd/ctibridge-lab
(cd bench/fasthttp && go build -o "$tmp/fast" .)
lua=bench/pipeline.lua

server() { # name, command...
  local name=$1; shift
  GOMAXPROCS=1 taskset -c 0 "$@" 2>"$tmp/$name.log" &
  echo $! >"$tmp/pid"
  sleep 0.7
}
stop() { kill "$(cat "$tmp/pid")"; wait "$(cat "$tmp/pid")" 2>/dev/null || true; }
run() { # label, wrk args...
  local label=$1; shift
  local out
  out=$(taskset -c 1 wrk -t1 -c100 -d"$D" --latency "$@")
  printf '%-34s %10s req/s  p99 %s\n' "$label" \
    "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" "$(awk '$1=="99%" {print $2}' <<<"$out")"
}

server bare100 "$tmp/ctibridge-lab" restbench -mode bare -ext 100 -addr 127.0.0.1:8082 -body-out "$tmp/ext100.json"
run "bare net/http 100 ext" http://127.0.0.1:8082/
run "bare net/http 100 ext pipelined" -s $lua http://127.0.0.1:8082/ -- 10
stop
server bare500 "$tmp/ctibridge-lab" restbench -mode bare -ext 500 -addr 127.0.0.1:8082 -body-out "$tmp/ext500.json"
run "bare net/http 500 ext" http://127.0.0.1:8082/
stop
server barestatus "$tmp/ctibridge-lab" restbench -mode bare -body status -addr 127.0.0.1:8082 -body-out "$tmp/status.json"
run "bare net/http status" http://127.0.0.1:8082/
run "bare net/http status pipelined" -s $lua http://127.0.0.1:8082/ -- 10
stop

server fast100 "$tmp/fast" -addr 127.0.0.1:8083 -body "$tmp/ext100.json"
run "fasthttp 100 ext" http://127.0.0.1:8083/
run "fasthttp 100 ext pipelined" -s $lua http://127.0.0.1:8083/ -- 10
stop
server faststatus "$tmp/fast" -addr 127.0.0.1:8083 -body "$tmp/status.json"
run "fasthttp status" http://127.0.0.1:8083/
run "fasthttp status pipelined" -s $lua http://127.0.0.1:8083/ -- 10
stop

server cti100 "$tmp/ctibridge-lab" restbench -mode ctibridge -ext 100 -addr 127.0.0.1:8081 -token-out "$tmp/tok"
A="Authorization: Bearer $(cat "$tmp/tok")"
ver=$(curl -s -H "$A" http://127.0.0.1:8081/astproxy/status | sed 's/.*"version":\([0-9]*\).*/\1/')
run "ctibridge 100 ext" -H "$A" http://127.0.0.1:8081/astproxy/extensions
run "ctibridge 100 ext gzip" -H "$A" -H "Accept-Encoding: gzip" http://127.0.0.1:8081/astproxy/extensions
run "ctibridge 100 ext 304" -H "$A" -H "If-None-Match: W/\"$ver\"" http://127.0.0.1:8081/astproxy/extensions
run "ctibridge 100 ext pipelined" -H "$A" -s $lua http://127.0.0.1:8081/astproxy/extensions -- 10
run "ctibridge status" -H "$A" http://127.0.0.1:8081/astproxy/status
run "ctibridge status pipelined" -H "$A" -s $lua http://127.0.0.1:8081/astproxy/status -- 10
stop
server cti500 "$tmp/ctibridge-lab" restbench -mode ctibridge -ext 500 -addr 127.0.0.1:8081 -token-out "$tmp/tok"
A="Authorization: Bearer $(cat "$tmp/tok")"
run "ctibridge 500 ext" -H "$A" http://127.0.0.1:8081/astproxy/extensions
stop
server ctichurn "$tmp/ctibridge-lab" restbench -mode ctibridge -ext 100 -churn 2000 -addr 127.0.0.1:8081 -token-out "$tmp/tok"
A="Authorization: Bearer $(cat "$tmp/tok")"
run "ctibridge 100 ext, 2000 events/s" -H "$A" http://127.0.0.1:8081/astproxy/extensions
run "ctibridge status, 2000 events/s" -H "$A" http://127.0.0.1:8081/astproxy/status
stop
