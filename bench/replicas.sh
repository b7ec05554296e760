#!/bin/bash
# bench/replicas.sh: what a PBX costs a bus node, by role (docs/scale-out.md,
# "Several PBXs on the bus"). For each of PBXS (1 4) synthetic PBXs (`loadtest
# synth --serve-ami`, EXTS (200) extensions, CALLS (20) calls up, RATE (2)
# new calls/s each), on fresh processes: one nats-server -js (a free port,
# not the machine's), a leading `serve --bus` bridge (three replicas a PBX:
# the served one, its candidate's follower and the primary the link drives),
# a standby bridge (the same three, the primary following), an edge (one)
# and a plain `serve` (one engine, no bus), each following every PBX, no
# client. After WARM (20) seconds it reads each process's RSS, Go heap in
# use and CPU time, and again D (30) seconds later; one JSON line per
# process and PBX count to bench/out/replicas.json. The cost of a PBX is
# the difference between two counts divided by the PBXs added (the
# process's own baseline cancels out).
set -euo pipefail
cd "$(dirname "$0")/.."
PBXS=${PBXS:-1 4}
EXTS=${EXTS:-200}
CALLS=${CALLS:-20}
RATE=${RATE:-2}
WARM=${WARM:-20}
D=${D:-30}
for t in /usr/sbin/nats-server curl python3; do
  command -v "$t" >/dev/null || { echo "bench/replicas.sh: needs $t" >&2; exit 1; }
done
. bench/lib.sh
out=bench/out/replicas.json
: >"$out"
sample() { # name: RSS bytes, Go heap in use bytes, CPU ticks
  local p=${pid[$1]} rss heap cpu
  rss=$(awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$p/status")
  cpu=$(awk '{print $14 + $15}' "/proc/$p/stat")
  heap=$(curl -fs "http://127.0.0.1:${admin[$1]}/metrics" | awk '/^go_memstats_heap_inuse_bytes / {printf "%d", $2}')
  echo "$rss $heap $cpu"
}
hz=$(getconf CLK_TCK)
roles="leader standby edge single"
for k in $PBXS; do
  np=$(freeport)
  rm -rf "$tmp/nats"
  /usr/sbin/nats-server -a 127.0.0.1 -p "$np" -js -sd "$tmp/nats" -n replicas 2>"$tmp/nats.log" &
  pids+=($!)
  waitport "$np"
  aps=()
  for i in $(seq "$k"); do
    ap=$(freeport)
    "$lab" loadtest synth --serve-ami "127.0.0.1:$ap" --exts "$EXTS" --calls "$CALLS" -r "$RATE" --ring 1s -d 0 \
      >"$tmp/synth$i.out" 2>"$tmp/synth$i.log" &
    pids+=($!)
    waitport "$ap"
    aps+=("$ap")
  done
  more=() names=()
  for i in $(seq 2 "$k"); do
    more+=(--pbx "p$i=127.0.0.1:${aps[i - 1]}")
    names+=("p$i")
  done
  edgepbx=()
  if [ "$k" -gt 1 ]; then edgepbx=(--pbx "$(IFS=,; echo "${names[*]}")"); fi
  bus=(--bus "nats://127.0.0.1:$np")
  node leader serve "${bus[@]}" --bus-node leader --ami "127.0.0.1:${aps[0]}" --ami-user ctibridge "${more[@]}"
  waitready "${admin[leader]}" leader
  node standby serve "${bus[@]}" --bus-node standby --ami "127.0.0.1:${aps[0]}" --ami-user ctibridge "${more[@]}"
  node edge edge "${bus[@]}" --bus-node edge "${edgepbx[@]}"
  node single serve --ami "127.0.0.1:${aps[0]}" --ami-user ctibridge "${more[@]}"
  for n in standby edge single; do waitready "${admin[$n]}" "$n"; done
  sleep "$WARM"
  declare -A s0=()
  for n in $roles; do s0[$n]=$(sample "$n"); done
  load0=$(cut -d' ' -f1 /proc/loadavg)
  sleep "$D"
  load1=$(cut -d' ' -f1 /proc/loadavg)
  for n in $roles; do
    read -r _ _ c0 <<<"${s0[$n]}"
    read -r rss heap c1 <<<"$(sample "$n")"
    python3 -c "import json; print(json.dumps({'pbxs': $k, 'role': '$n', 'exts': $EXTS, 'calls': $CALLS, 'rate': $RATE,
      'rss_mib': round($rss/2**20, 1), 'heap_inuse_mib': round($heap/2**20, 1),
      'cpu_share': round(($c1-$c0)/$hz/$D, 4), 'load': [$load0, $load1]}))" | tee -a "$out"
  done
  stop_all
done
