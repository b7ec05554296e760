#!/usr/bin/env bash
# The standard load suite: REST reads through the real `ctibridge serve`
# against a bare net/http handler serving the same bytes, 100 and 500
# extensions, three alternated rounds (bench/serve.sh); the REST handler
# alone against bare (both with `ctibridge-lab loadtest http` and with wrk,
# in this sitting, so the ratios hold on a noisy machine), WebSocket
# fan-out during calls, and end-to-end SIP-to-screen
# runs at 10, 50 and 100 calls/s. Writes bench/results.json (not
# committed). See docs/loadtest.md.
#
#   bench/run.sh            # 10 s per HTTP run, 20 s per e2e run
#   D=30s E2E_D=60s bench/run.sh
#   SCALE=1 bench/run.sh    # also the call-centre scale runs:
#                           # REST reads of 5,000 extensions while the state
#                           # changes, e2e with 1,000 and 10,000 screens, and
#                           # ctibridge-lab wsbench (10,000 screens, the floor,
#                           # 19,000 idle clients),
#                           # each also against BASE (a git revision,
#                           # default main) built in this sitting; the
#                           # engine's Apply+Publish benchmark at 5,000
#                           # extensions and 2,000 calls, plain calls and the
#                           # call centre's mix, interleaved with BASE's;
#                           # and `loadtest synth`, plain and the mix (this
#                           # tree only: BASE may not have it)
set -euo pipefail
cd "$(dirname "$0")/.."
D=${D:-10s}
E2E_D=${E2E_D:-20s}
out=bench/results.json
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/ctibridge" ./cmd/ctibridge
go build -o "$tmp/ctibridge-lab" ./cmd/ctibridge-lab # runs the ctibridge beside it
lt="$tmp/ctibridge-lab loadtest"
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

rb="$tmp/ctibridge-lab restbench" # the REST read's server: split into words where used
lua=bench/pipeline.lua
echo "bare net/http (status body)..." >&2
server $rb -mode bare -body status -addr 127.0.0.1:18082
bare=$(ltj http http://127.0.0.1:18082/ -c 100 -d "$D")
bare_p10=$(ltj http http://127.0.0.1:18082/ -c 100 -p 10 -d "$D")
bare_wrk=$(wrk_rps http://127.0.0.1:18082/)
bare_wrk_p10=$(wrk_rps -s $lua http://127.0.0.1:18082/ -- 10)
stop

echo "ctibridge REST reads (100 extensions)..." >&2
server $rb -mode ctibridge -ext 100 -addr 127.0.0.1:18081 -token-out "$tmp/tok"
tok=$(cat "$tmp/tok")
rest_status=$(ltj http http://127.0.0.1:18081/astproxy/status --token "$tok" -c 100 -d "$D")
rest_ext=$(ltj http http://127.0.0.1:18081/astproxy/extensions --token "$tok" -c 100 -d "$D")
rest_ext_p10=$(ltj http http://127.0.0.1:18081/astproxy/extensions --token "$tok" -c 100 -p 10 -d "$D")
rest_status_wrk=$(wrk_rps -H "Authorization: Bearer $tok" http://127.0.0.1:18081/astproxy/status)
stop

echo "REST reads through serve against bare (bench/serve.sh)..." >&2
rest_serve=$(ROUNDS=${ROUNDS:-3} D="$D" bench/serve.sh | jq -Rs .)

e2e() { # rate clients: pbxsim + bridge in a child process, SIPp when installed
  $lt e2e -r "$1" -c "$2" -d "$E2E_D" --json --max-missing -1 --max-ghosts -1 || true
}
echo "WebSocket fan-out: 500 clients watching 20 calls/s..." >&2
ws=$(e2e 20 500)
echo "e2e 10, 50, 100 calls/s..." >&2
e10=$(e2e 10 5)
e50=$(e2e 50 5)
e100=$(e2e 100 5)

scale=null
if [ -n "${SCALE:-}" ]; then
  # The baseline: the same runs against BASE, interleaved with this tree's,
  # so the ratios hold on a shared machine.
  base=${BASE:-main}
  mkdir "$tmp/base"
  git archive "$base" | tar -x -C "$tmp/base"
  (cd "$tmp/base" && go build -o "$tmp/base-ctibridge" ./cmd/ctibridge)
  # BASE's REST bench server and hub bench: its lab's, or its standalone
  # programs before the lab.
  if [ -d "$tmp/base/cmd/ctibridge-lab" ]; then
    (cd "$tmp/base" && go build -o "$tmp/base-lab" ./cmd/ctibridge-lab)
    base_rb="$tmp/base-lab restbench" base_wsbench="$tmp/base-lab wsbench"
  else
    (cd "$tmp/base" && go build -o "$tmp/base-bench" ./rest/internal/bench && go build -o "$tmp/base-wsbench" ./loadtest/wsbench)
    base_rb=$tmp/base-bench base_wsbench=$tmp/base-wsbench
  fi
  ext5k() { # "server command" churn: GET /astproxy/extensions of 5,000 extensions, 2,000 calls up
    server $1 -mode ctibridge -ext 5000 -incall 4000 -churn "$2" -addr 127.0.0.1:18083 -token-out "$tmp/tok5k"
    ltj http http://127.0.0.1:18083/astproxy/extensions --token "$(cat "$tmp/tok5k")" -c 20 -d "$D"
    stop
  }
  echo "scale: REST reads of 5,000 extensions, bare and at 0 and 200 changes/s..." >&2
  server $rb -mode bare -body extensions -ext 5000 -incall 4000 -addr 127.0.0.1:18084
  bare5k=$(ltj http http://127.0.0.1:18084/ -c 20 -d "$D")
  stop
  ext5k_0=$(ext5k "$rb" 0)
  ext5k_200=$(ext5k "$rb" 200)
  base_ext5k_200=$(ext5k "$base_rb" 200)
  e2e_at() { # ctibridge rate clients [duration]: the report, or null when the run could not start
    # This tree's lab drives both bridges: pbxsim in a child process, the
    # bridge (this tree's or BASE's ctibridge serve) in a process of its
    # own, apart from the screens; the report's bridge_cpu_ms and ws_*
    # counters are the bridge's.
    local r
    r=$($lt e2e --bin "$1" -r "$2" -c "$3" -d "${4:-$E2E_D}" -rest-rate -1 --json --max-missing -1 --max-ghosts -1) || true
    echo "${r:-null}"
  }
  echo "scale: e2e 50 and 500 calls/s with 1,000 and 100 screens, 2 calls/s with 10,000..." >&2
  s50=$(e2e_at "$tmp/ctibridge" 50 1000)
  base_s50=$(e2e_at "$tmp/base-ctibridge" 50 1000)
  s50_100=$(e2e_at "$tmp/ctibridge" 50 100)
  base_s50_100=$(e2e_at "$tmp/base-ctibridge" 50 100)
  s500=$(e2e_at "$tmp/ctibridge" 500 1000 10s)
  base_s500=$(e2e_at "$tmp/base-ctibridge" 500 1000 10s)
  s500_100=$(e2e_at "$tmp/ctibridge" 500 100 10s)
  base_s500_100=$(e2e_at "$tmp/base-ctibridge" 500 100 10s)
  s10k=$(e2e_at "$tmp/ctibridge" 2 10000)
  # The hub alone in a server process of its own, the clients read through
  # epoll (ctibridge-lab wsbench): this tree, BASE's hub driven by this load,
  # and the floor (a bare loop writing each change to every socket).
  wsb() { # args...: wsbench's summary lines, as a JSON string
    "$tmp/ctibridge-lab" wsbench "$@" 2>/dev/null | grep -E 'connected|memstats|latency|CPU|wrote|closed' | jq -Rs . || echo null
  }
  echo "scale: wsbench, 10,000 screens at 2 changes/s (this tree, BASE's hub, the floor) and 19,000 idle..." >&2
  ws10k=$(wsb -clients 10000 -rate 2 -exts 5000 -duration 15s)
  base_ws10k=$(wsb -clients 10000 -rate 2 -exts 5000 -duration 15s -server "$base_wsbench")
  floor_ws10k=$(wsb -clients 10000 -rate 2 -exts 5000 -duration 15s -floor)
  idle19k=$(wsb -clients 19000 -rate 0 -exts 5000 -duration 3s)
  base_idle19k=$(wsb -clients 19000 -rate 0 -exts 5000 -duration 3s -server "$base_wsbench")
  echo "scale: engine benchmark, 5,000 extensions, 2,000 calls up (plain calls, and the call centre's mix), this tree and BASE interleaved..." >&2
  # BASE runs this tree's benchmark file and traffic generator, so both
  # engines see the same events (BASE may predate the mix).
  cp calls/scale_bench_test.go "$tmp/base/calls/" && rm -rf "$tmp/base/loadtest/synthpbx" && cp -r loadtest/synthpbx "$tmp/base/loadtest/"
  (cd "$tmp/base" && go test -c -o "$tmp/base-calls.test" ./calls)
  go test -c -o "$tmp/calls.test" ./calls
  engine_bench() { # test-binary bench: events per CPU second
    GOMAXPROCS=1 taskset -c 0 "$1" -test.run X -test.bench "ApplyPublishAtScale/$2\$" -test.benchtime 2s |
      awk '/^Benchmark/ {for (i = 1; i < NF; i++) if ($(i+1) == "events/cpu-s") print $i}'
  }
  # At Go's default collector (GOGC 100, as serve runs) and, this tree's
  # mix, at GOGC 400: the collector's share (docs/operations.md, "Memory
  # and the garbage collector").
  eng= base_eng= mix= base_mix= mix_gogc400=
  for _ in 1 2 3; do
    eng+=" $(GOGC=100 engine_bench "$tmp/calls.test" batch64)"
    base_eng+=" $(GOGC=100 engine_bench "$tmp/base-calls.test" batch64)"
    mix+=" $(GOGC=100 engine_bench "$tmp/calls.test" mix/batch64)"
    base_mix+=" $(GOGC=100 engine_bench "$tmp/base-calls.test" mix/batch64)"
    mix_gogc400+=" $(GOGC=400 engine_bench "$tmp/calls.test" mix/batch64)"
  done
  eng=$(echo $eng | jq -s .) base_eng=$(echo $base_eng | jq -s .) mix=$(echo $mix | jq -s .) base_mix=$(echo $base_mix | jq -s .)
  mix_gogc400=$(echo $mix_gogc400 | jq -s .)
  echo "scale: loadtest synth, 5,000 extensions, 2,000 calls up, 50 calls/s, plain and the mix..." >&2
  synth=$($lt synth --exts 5000 --calls 2000 -r 50 -d "$E2E_D" --json --max-missing -1 --max-ghosts -1) || true
  synth=${synth:-null}
  synth_mix=$($lt synth --exts 5000 --queues 25 --members 40 --calls 2000 -r 50 -d "$E2E_D" \
    --queue-share 0.3 --trunk-share 0.3 --transfer-share 0.1 --json --max-missing -1 --max-ghosts -1) || true
  synth_mix=${synth_mix:-null}
  scale=$(jq -n --arg base "$base" --argjson bare5k "$bare5k" --argjson ext5k_0 "$ext5k_0" --argjson ext5k_200 "$ext5k_200" \
    --argjson base_ext5k_200 "$base_ext5k_200" --argjson s50 "$s50" --argjson base_s50 "$base_s50" \
    --argjson s500 "$s500" --argjson base_s500 "$base_s500" --argjson s10k "$s10k" \
    --argjson s50_100 "$s50_100" --argjson base_s50_100 "$base_s50_100" --argjson s500_100 "$s500_100" --argjson base_s500_100 "$base_s500_100" \
    --argjson ws10k "$ws10k" --argjson base_ws10k "$base_ws10k" --argjson floor_ws10k "$floor_ws10k" \
    --argjson idle19k "$idle19k" --argjson base_idle19k "$base_idle19k" \
    --argjson eng "$eng" --argjson base_eng "$base_eng" --argjson mix "$mix" --argjson base_mix "$base_mix" \
    --argjson mix_gogc400 "$mix_gogc400" \
    --argjson synth "$synth" --argjson synth_mix "$synth_mix" '
    {base: $base,
     rest_5000_extensions: {bare: $bare5k, churn0: $ext5k_0, churn200: $ext5k_200, base_churn200: $base_ext5k_200,
       ratio_to_bare: {churn0: ($ext5k_0.requests.per_second / $bare5k.requests.per_second),
                       churn200: ($ext5k_200.requests.per_second / $bare5k.requests.per_second),
                       base_churn200: ($base_ext5k_200.requests.per_second / $bare5k.requests.per_second)}},
     e2e_1000_screens: {"50": $s50, base_50: $base_s50, "500": $s500, base_500: $base_s500},
     e2e_100_screens: {"50": $s50_100, base_50: $base_s50_100, "500": $s500_100, base_500: $base_s500_100},
     e2e_10000_screens_2_calls_per_s: $s10k,
     wsbench: {screens_10000_2_per_s: $ws10k, base_screens_10000_2_per_s: $base_ws10k, floor_screens_10000_2_per_s: $floor_ws10k,
               idle_19000: $idle19k, base_idle_19000: $base_idle19k},
     engine_apply_publish_events_per_cpu_s: {this: $eng, base: $base_eng, mix: $mix, base_mix: $base_mix, mix_gogc400: $mix_gogc400},
     synth_5000_extensions_2000_calls_50_per_s: $synth, synth_mix_5000_extensions_2000_calls_50_per_s: $synth_mix}')
fi

jq -n --arg when "$(date -u +%FT%TZ)" --arg host "$(uname -n) $(nproc) CPUs" --arg commit "$(git rev-parse --short HEAD)" \
  --argjson bare "$bare" --argjson bare_p10 "$bare_p10" --argjson bare_wrk "${bare_wrk:-null}" --argjson bare_wrk_p10 "${bare_wrk_p10:-null}" \
  --argjson rest_status "$rest_status" --argjson rest_ext "$rest_ext" --argjson rest_ext_p10 "$rest_ext_p10" \
  --argjson rest_status_wrk "${rest_status_wrk:-null}" --argjson rest_serve "$rest_serve" \
  --argjson ws "$ws" --argjson e10 "$e10" --argjson e50 "$e50" --argjson e100 "$e100" --argjson scale "$scale" '
  {when: $when, host: $host, commit: $commit,
   baseline: {bare_nethttp: $bare, bare_nethttp_pipelined10: $bare_p10,
              wrk_bare_nethttp_rps: $bare_wrk, wrk_bare_nethttp_pipelined10_rps: $bare_wrk_p10},
   rest: {status: $rest_status, extensions: $rest_ext, extensions_pipelined10: $rest_ext_p10, wrk_status_rps: $rest_status_wrk},
   rest_through_serve: $rest_serve,
   ratios: {rest_status_to_bare: ($rest_status.requests.per_second / $bare.requests.per_second),
            loadtest_to_wrk_bare: (if $bare_wrk == null then null else $bare.requests.per_second / $bare_wrk end),
            loadtest_to_wrk_bare_pipelined10: (if $bare_wrk_p10 == null then null else $bare_p10.requests.per_second / $bare_wrk_p10 end)},
   ws_fanout_500_clients_20_calls_per_s: $ws,
   e2e: {"10": $e10, "50": $e50, "100": $e100}, scale: $scale}' >"$out"
echo "wrote $out" >&2
jq '{ratios, e2e_p99_ringing_ms: (.e2e | map_values(.latency_ms.p99)), e2e_missing: (.e2e | map_values(.counters.calls_missing)),
  scale: (if .scale == null then null else {rest_5000_ratio_to_bare: .scale.rest_5000_extensions.ratio_to_bare,
    e2e_1000_screens_p99_ringing_ms: (.scale.e2e_1000_screens | map_values(.latency_ms?.p99)),
    e2e_100_screens_p99_ringing_ms: (.scale.e2e_100_screens | map_values(.latency_ms?.p99)),
    e2e_10000_screens_p99_ringing_ms: .scale.e2e_10000_screens_2_calls_per_s.latency_ms?.p99,
    engine_events_per_cpu_s: .scale.engine_apply_publish_events_per_cpu_s,
    synth_p99_ringing_ms: .scale.synth_5000_extensions_2000_calls_50_per_s.latency_ms?.p99,
    synth_mix_p99_ringing_ms: .scale.synth_mix_5000_extensions_2000_calls_50_per_s.latency_ms?.p99} end)}' "$out"
