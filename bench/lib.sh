# bench/lib.sh: what the bench scripts share, sourced from the repository's
# root: a temporary directory (tmp) removed at exit with every process the
# script started (pids, killed newest first), ctibridge built there (cb)
# and the lab beside it (lab: it finds that ctibridge),
# a users file with admin/admin ($tmp/users.yaml), and the helpers below.

stop_all() { # the processes this script started, newest first
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
freeport() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
waitport() { # port: until something listens on it (10 s)
  for _ in $(seq 200); do
    (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listens on $1" >&2
  return 1
}
waitready() { # admin-port name: until /readyz answers 200 (60 s)
  for _ in $(seq 600); do
    curl -fs "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "$2 not ready; its log:" >&2
  tail -20 "$tmp/$2.log" >&2
  return 1
}
# node name args...: a ctibridge serve or edge started (not waited for):
# its ports in http and admin, its pid in pid.
declare -A http admin pid
node() {
  local name=$1
  shift
  http[$name]=$(freeport)
  admin[$name]=$(freeport)
  mkdir -p "$tmp/$name"
  CTIBRIDGE_AMI_SECRET=synth "$cb" "$@" --http "127.0.0.1:${http[$name]}" --admin "127.0.0.1:${admin[$name]}" \
    --users "$tmp/users.yaml" --data-dir "$tmp/$name" --record-cdr=false --access-log-every -1 --log-level warn \
    2>"$tmp/$name.log" &
  pid[$name]=$!
  pids+=($!)
}

mkdir -p bench/out
tmp=$(mktemp -d)
pids=()
trap 'stop_all; rm -rf "$tmp"' EXIT
go build -o "$tmp/ctibridge" ./cmd/ctibridge
go build -o "$tmp/ctibridge-lab" ./cmd/ctibridge-lab
cb=$tmp/ctibridge
lab=$tmp/ctibridge-lab
hash=$(echo admin | "$cb" passwd)
printf 'users:\n  - username: admin\n    password_hash: "%s"\n    role: admin\n' "$hash" >"$tmp/users.yaml"
