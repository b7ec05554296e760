#!/usr/bin/env bash
# Scale-out on NATS, measured: a synthetic PBX (`ctibridge-lab
# loadtest synth --serve-ami`) followed by a `serve --bus` bridge, EDGES
# `ctibridge edge` processes and, on the same PBX at the same time, a
# plain `serve` (the single process, no bus); one nats-server with
# JetStream in a temporary directory (never the machine's shared one).
# Each round, interleaved:
#
#   scale    CLIENTS WebSocket clients on each edge at once (one wsbench
#            process per edge: the fd limit is per process), then CLIENTS
#            on one edge alone and on the single process alone (the same
#            load, so their latencies compare): each server's RSS per client,
#            CPU per delivered event and per change, change-to-screen and
#            call-to-ringing latency, at RATE new calls/s.
#   latency  LAT_CLIENTS clients on each of the single process, the
#            bridge and every edge, at LAT_RATE calls/s: call placed on
#            the PBX -> ringing on the screen, the same calls through each
#            path in the same run; the edge's addition is edge minus single.
#            With it, the mean time the single process's and the bridge's
#            links spent in Publish per batch over the window (their
#            /metrics; on the bridge the fenced publish and its ack).
#
# Writes bench/out/edges.json (ignored by git): one object per wsbench
# run with the round, phase and load average. See docs/scale-out.md.
#
#   bench/edges.sh                       # 3 rounds, 3 edges x 10,000 clients
#   ROUNDS=1 CLIENTS=1000 bench/edges.sh # a quick one
#   PHASES=latency ROUNDS=5 bench/edges.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
PHASES=${PHASES:-scale latency}
EDGES=${EDGES:-3}
CLIENTS=${CLIENTS:-10000} # per edge, and on the single process
EXTS=${EXTS:-200}
CALLS=${CALLS:-20} # calls held up
RATE=${RATE:-0.2}  # new calls/s in the scale phase
D=${D:-20s}        # each measuring window
LAT_CLIENTS=${LAT_CLIENTS:-20}
LAT_RATE=${LAT_RATE:-10}
LAT_D=${LAT_D:-30s}

for t in /usr/sbin/nats-server jq curl python3; do
  command -v "$t" >/dev/null || { echo "bench/edges.sh: needs $t" >&2; exit 1; }
done
# Each wsbench and each server holds CLIENTS sockets: the hard fd limit
# must be above it (Go raises the soft limit to the hard one).
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -le "$((CLIENTS + 200))" ]; then
  echo "bench/edges.sh: the hard fd limit $(ulimit -Hn) is too low for CLIENTS=$CLIENTS" >&2
  exit 1
fi
. bench/lib.sh
out=bench/out/edges.json
: >"$out"

up() { # rate: nats-server, the synthetic PBX, the bridge, the edges and the single process
  local np ap i
  np=$(freeport)
  ap=$(freeport)
  rm -rf "$tmp/nats" "$tmp/stamps"
  /usr/sbin/nats-server -a 127.0.0.1 -p "$np" -js -sd "$tmp/nats" -n edges 2>"$tmp/nats.log" &
  pids+=($!)
  waitport "$np"
  "$lab" loadtest synth --serve-ami "127.0.0.1:$ap" --stamps "$tmp/stamps" --exts "$EXTS" --calls "$CALLS" -r "$1" --ring 1s -d 0 \
    >"$tmp/synth.out" 2>"$tmp/synth.log" &
  pids+=($!)
  waitport "$ap"
  node bridge serve --bus "nats://127.0.0.1:$np" --bus-node bridge --ami "127.0.0.1:$ap" --ami-user ctibridge
  waitready "${admin[bridge]}" bridge
  for i in $(seq "$EDGES"); do node "edge$i" edge --bus "nats://127.0.0.1:$np" --bus-node "edge$i"; done
  node single serve --ami "127.0.0.1:$ap" --ami-user ctibridge
  for n in single $(seq -f 'edge%g' "$EDGES"); do waitready "${admin[$n]}" "$n"; done
}

# clients round phase n names...: n clients on each named node, one
# wsbench each, measuring the same window; appends their results.
clients() {
  local round=$1 phase=$2 n=$3 name ws=()
  shift 3
  rm -f "$tmp"/ready.* "$tmp/go" "$tmp"/res.*
  for name in "$@"; do
    "$lab" wsbench -url "ws://127.0.0.1:${http[$name]}/ws" -login admin:admin -pid "${pid[$name]}" \
      -admin "http://127.0.0.1:${admin[$name]}" -clients "$n" -stamps "$tmp/stamps" -idle-cpu 5s \
      -duration "$( [ "$phase" = latency ] && echo "$LAT_D" || echo "$D")" \
      -ready "$tmp/ready.$name" -go "$tmp/go" -out "$tmp/res.$name" -label "$name" -calls-out "$tmp/calls.$name" \
      >"$tmp/ws.$name.log" 2>&1 &
    ws+=($!)
  done
  for _ in $(seq 6000); do # every client process subscribed (10 minutes at most)
    [ "$(ls "$tmp"/ready.* 2>/dev/null | wc -l)" -ge $# ] && break
    for p in "${ws[@]}"; do kill -0 "$p" 2>/dev/null || break 2; done
    sleep 0.1
  done
  local load
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  for name in single bridge; do engine_time "$name" >"$tmp/engine0.$name"; done
  touch "$tmp/go"
  for p in "${ws[@]}"; do wait "$p" || true; done
  [ "$phase" = latency ] && for name in single bridge; do publish_time "$round" "$name"; done
  for name in "$@"; do
    if [ -s "$tmp/res.$name" ]; then
      jq -c --argjson round "$round" --arg phase "$phase" --arg start_load "$load" --arg when "$(date -u +%T)" \
        '{round: $round, phase: $phase, when: $when, start_load: $start_load} + .' "$tmp/res.$name" | tee -a "$out"
    else
      echo "wsbench on $name failed:" >&2
      tail -5 "$tmp/ws.$name.log" >&2
    fi
  done
}

# engine_time name: the link's batches and time in Publish so far (its
# /metrics): "batches publish_seconds apply_seconds".
engine_time() {
  curl -s "http://127.0.0.1:${admin[$1]}/metrics" | awk '/^ctibridge_engine_batches_total / {b = $2}
    /^ctibridge_engine_seconds_total\{step="publish"\}/ {p = $2} /^ctibridge_engine_seconds_total\{step="apply"\}/ {a = $2}
    END {print b + 0, p + 0, a + 0}'
}

# publish_time round name: the mean time name's link spent in Publish per
# batch over the window (on the bus bridge the fenced publish and its
# acknowledgement: what the served replica's delivery comes with),
# appended.
publish_time() {
  local b0 p0 a0 b1 p1 a1
  read -r b0 p0 a0 <"$tmp/engine0.$2"
  read -r b1 p1 a1 < <(engine_time "$2")
  jq -nc --argjson round "$1" --arg name "$2" --argjson b "$((b1 - b0))" --argjson p "$p1" --argjson p0 "$p0" \
    --argjson a "$a1" --argjson a0 "$a0" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
    '{round: $round, phase: "latency-publish", label: $name, batches: $b, loadavg: $load,
      publish_ms_per_batch: (if $b > 0 then (($p - $p0) * 1000 / $b * 1000 | round) / 1000 else null end),
      apply_ms_per_batch: (if $b > 0 then (($a - $a0) * 1000 / $b * 1000 | round) / 1000 else null end)}' | tee -a "$out"
}

# paired round path: the same calls on path and on the single process:
# per call, path's median screen minus the single process's median, and
# the same for the slowest screen; their quantiles, appended.
paired() {
  awk 'NR == FNR {med[$1 " " $2] = $4; mx[$1 " " $2] = $5; next}
    ($1 " " $2) in med {print ($4 - med[$1 " " $2]) / 1000, ($5 - mx[$1 " " $2]) / 1000}' \
    "$tmp/calls.single" "$tmp/calls.$2" >"$tmp/pairs"
  local n
  n=$(wc -l <"$tmp/pairs")
  [ "$n" -gt 0 ] || return 0
  q() { cut -d' ' -f"$1" "$tmp/pairs" | sort -g | awk -v q="$2" -v n="$n" 'NR == int((n - 1) * q) + 1'; }
  jq -nc --argjson round "$1" --arg path "$2" --argjson n "$n" --arg load "$(cut -d' ' -f1-3 /proc/loadavg)" \
    --argjson m50 "$(q 1 0.5)" --argjson m90 "$(q 1 0.9)" --argjson m99 "$(q 1 0.99)" \
    --argjson x50 "$(q 2 0.5)" --argjson x99 "$(q 2 0.99)" \
    '{round: $round, phase: "latency-paired", label: $path, calls: $n, loadavg: $load,
      median_screen_minus_single_ms: {p50: $m50, p90: $m90, p99: $m99}, slowest_screen_minus_single_ms: {p50: $x50, p99: $x99}}' |
    tee -a "$out"
}

edges=$(seq -f 'edge%g' "$EDGES")
for round in $(seq "$ROUNDS"); do
  for phase in $PHASES; do
    echo "round $round, $phase: $(uptime)" >&2
    case $phase in
    scale)
      up "$RATE"
      # shellcheck disable=SC2086
      clients "$round" scale "$CLIENTS" $edges
      stop_all # fresh processes: a process that had clients keeps their memory
      up "$RATE"
      clients "$round" scale-one-edge "$CLIENTS" edge1
      clients "$round" scale-single "$CLIENTS" single
      ;;
    latency)
      up "$LAT_RATE"
      # shellcheck disable=SC2086
      clients "$round" latency "$LAT_CLIENTS" single bridge $edges
      for p in bridge $edges; do paired "$round" "$p"; done
      ;;
    esac
    stop_all
  done
done
echo "wrote $out" >&2
jq -rs '.[] | if .phase == "latency-paired" then [.round, .phase, .label, .calls, .median_screen_minus_single_ms.p50,
    .median_screen_minus_single_ms.p99, .slowest_screen_minus_single_ms.p99, .loadavg]
  elif .phase == "latency-publish" then [.round, .phase, .label, .batches, .publish_ms_per_batch, .apply_ms_per_batch, .loadavg]
  else [.round, .phase, .label, .clients, .rss_bytes_per_client, .server_cpu_cores, .cpu_us_per_delivered,
    .ringing.p50_ms, .ringing.p99_ms, .ringing.missing, .loadavg] end | @tsv' "$out"
