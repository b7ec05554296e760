#!/usr/bin/env bash
# bench/serve.sh: GET /astproxy/extensions through the real `ctibridge
# serve` (a users file, the data directory's store, every middleware,
# pbxsim as the PBX) against a bare net/http handler answering the same
# bytes, in alternated rounds. Each server runs pinned to CPU 0 with one
# P, the load tool on CPU 1; the ratio is serve's requests/s over bare's
# in the same round, and bare's CPU a request over serve's (the server
# process's user and system time over the requests it answered: steadier
# than requests/s when other work shares CPU 0). Prints a line per round
# and the median ratios per size; bench/run.sh runs it.
#
#   bench/serve.sh                      # EXTS="100 500" ROUNDS=3 D=10s C=100
#   EXTS=100 ROUNDS=5 D=5s bench/serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
EXTS=${EXTS:-100 500}
ROUNDS=${ROUNDS:-3}
D=${D:-10s}
C=${C:-100}

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # CPU clock ticks a process used
hz=$(getconf CLK_TCK)
run() { # pid url [token]: "requests/s CPU-µs-a-request" of one load run against process pid
  local tok=() t0 t1 out
  [ -n "${3:-}" ] && tok=(--token "$3")
  t0=$(ticks "$1")
  out=$(taskset -c 1 "$lab" loadtest http "$2" "${tok[@]}" -c "$C" -d "$D" --json)
  t1=$(ticks "$1")
  jq -r --argjson cpu "$(((t1 - t0) * 1000000 / hz))" '"\(.requests.per_second) \($cpu / .requests.total)"' <<<"$out"
}

for n in $EXTS; do
  ami=$(freeport) sip=$(freeport) api=$(freeport) adm=$(freeport) bare=$(freeport)
  "$cb" pbxsim --ami "127.0.0.1:$ami" --sip "127.0.0.1:$sip" --ami-secret synth \
    --extensions "200-$((199 + n))" 2>"$tmp/pbxsim$n.log" &
  pids+=($!)
  waitport "$ami"
  mkdir -p "$tmp/serve$n"
  CTIBRIDGE_AMI_SECRET=synth GOMAXPROCS=1 taskset -c 0 "$cb" serve --ami "127.0.0.1:$ami" --ami-user ctibridge \
    --http "127.0.0.1:$api" --admin "127.0.0.1:$adm" --users "$tmp/users.yaml" --data-dir "$tmp/serve$n" \
    --record-cdr=false --access-log-every -1 --log-level warn 2>"$tmp/serve$n.log" &
  spid=$!
  pids+=($!)
  waitready "$adm" "serve$n"
  tok=$(curl -fs -d '{"username":"admin","password":"admin"}' "http://127.0.0.1:$api/auth/login" | jq -r .token)
  url="http://127.0.0.1:$api/astproxy/extensions"
  curl -fs -H "Authorization: Bearer $tok" "$url" >"$tmp/ext$n.json"
  got=$(jq length "$tmp/ext$n.json")
  if [ "$got" != "$n" ]; then
    echo "serve answered $got extensions, want $n" >&2
    exit 1
  fi
  GOMAXPROCS=1 taskset -c 0 "$lab" restbench -mode bare -body-file "$tmp/ext$n.json" -addr "127.0.0.1:$bare" 2>/dev/null &
  bpid=$!
  pids+=($!)
  waitport "$bare"
  echo "$n extensions, $(wc -c <"$tmp/ext$n.json") bytes:"
  ratios=() cratios=()
  for r in $(seq "$ROUNDS"); do
    if ((r % 2)); then # alternate which goes first
      read -r s sc < <(run "$spid" "$url" "$tok")
      read -r b bc < <(run "$bpid" "http://127.0.0.1:$bare/")
    else
      read -r b bc < <(run "$bpid" "http://127.0.0.1:$bare/")
      read -r s sc < <(run "$spid" "$url" "$tok")
    fi
    ratios+=("$(python3 -c "print(f'{$s / $b:.3f}')")")
    cratios+=("$(python3 -c "print(f'{$bc / $sc:.3f}')")")
    printf '  round %d: serve %.0f req/s, %.1f µs CPU a request; bare %.0f req/s, %.1f µs: %s of bare in req/s, %s in CPU a request\n' \
      "$r" "$s" "$sc" "$b" "$bc" "${ratios[-1]}" "${cratios[-1]}"
  done
  med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
  printf '  median: %s of bare in req/s (%s), %s in CPU a request (%s)\n' "$(med "${ratios[@]}")" "${ratios[*]}" \
    "$(med "${cratios[@]}")" "${cratios[*]}"
  stop_all
done
