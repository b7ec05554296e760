# bench/lib.sh: what the bench scripts share; sourced after they set tmp
# (their temporary directory) and pids (the processes they started).

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
