#!/usr/bin/env bash
# Side-by-side benchmark: Bascule, haproxy and nginx in front of the same nginx backends, with the
# same load generator, the proxy pinned alone on CPU 0 and everything else on CPU 1.
#
# Usage: bench/run.sh [SCENARIO...]     (default: all of them)
#   tcp-ka      mode tcp,  HTTP/1.1 keep-alive through the tunnel, 64 B responses, 50 connections
#   tcp-close   mode tcp,  a new client connection per request, 64 B
#   http-ka     mode http, keep-alive, 64 B, 50 connections
#   http-close  mode http, a new client connection per request, 64 B
#   idle        mode http, RSS of the proxy holding IDLE (default 2000) keep-alive client
#               connections after one request each: KiB per idle connection
# Environment: DURATION (seconds per measured run, default 10), RUNS (default 3), PROXIES
# (default "haproxy bascule nginx"), CONNS (default 50).
#
# For each scenario and proxy it prints requests/s, the proxy's CPU-µs per request (utime+stime of
# all its threads from /proc/PID/stat over the measured window, divided by the requests wrk
# counted), and how busy each core was, so that a run limited by the load core is visible. With
# RUNS > 1 it prints the median and the range. The ratio column is Bascule / haproxy CPU-µs per
# request. Record figures in docs/BENCHMARKS.md together with this command line.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
CONNS=${CONNS:-50}
PROXIES=${PROXIES:-"haproxy bascule nginx"}
SCENARIOS=${*:-"tcp-ka tcp-close http-ka http-close idle"}
IDLE=${IDLE:-2000}
ulimit -n 20000 2>/dev/null || true
WORK=$(mktemp -d /tmp/bascule-bench.XXXXXX)
chmod 755 "$WORK" # the backend nginx workers run as www-data
TICK_US=$((1000000 / $(getconf CLK_TCK)))

need() { command -v "$1" >/dev/null || missing+=("$2"); }
missing=()
need haproxy haproxy; need nginx nginx; need wrk wrk; need taskset util-linux
[ -e /usr/lib/nginx/modules/ngx_stream_module.so ] || missing+=(libnginx-mod-stream)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
cargo build --release --quiet --bin bascule

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

# Backends: 64 B file, nginx pinned on the load core.
mkdir -p "$WORK/www"
head -c 64 /dev/zero | tr '\0' 'x' > "$WORK/www/64"
sed -e "s#@ROOT@#$WORK/www#" -e "s#@DIR@#$WORK#" bench/backend-nginx.conf > "$WORK/backend.conf"
taskset -c 1 nginx -e "$WORK/backend-error.log" -c "$WORK/backend.conf" & pids+=($!)

wait_port() {
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done
  return 1
}
wait_port 18081 || { echo "backend did not start" >&2; exit 1; }

# utime+stime of a process (all its threads) and of its direct children (nginx's workers).
cpu_ticks() {
  local p t=0
  for p in "$1" $(pgrep -P "$1" || true); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
core_busy() { awk '/^cpu[01] /{print $1, $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }

start_proxy() { # $1 proxy, $2 mode; echoes the pid
  local conf
  case "$1" in
    bascule|haproxy)
      sed "s/@MODE@/$2/" bench/proxy.cfg > "$WORK/proxy.cfg"
      if [ "$1" = bascule ]; then
        taskset -c 0 target/release/bascule -db -f "$WORK/proxy.cfg" >"$WORK/proxy.log" 2>&1 &
      else
        taskset -c 0 haproxy -db -f "$WORK/proxy.cfg" >"$WORK/proxy.log" 2>&1 &
      fi ;;
    nginx)
      if [ "$2" = http ]; then conf=bench/nginx-proxy.conf; else conf=bench/nginx-stream.conf; fi
      { [ "$2" = tcp ] && echo "load_module /usr/lib/nginx/modules/ngx_stream_module.so;"; cat "$conf"; } |
        sed "s#@DIR@#$WORK#" > "$WORK/proxy-nginx.conf"
      taskset -c 0 nginx -e "$WORK/proxy-error.log" -c "$WORK/proxy-nginx.conf" >"$WORK/proxy.log" 2>&1 & ;;
  esac
  echo $!
}

one_run() { # $1 proxy, $2 mode, $3 close(0|1); prints "rps cpu_us_per_req busy0 busy1"
  local pid hdr=() b0 b1 t0 t1 out reqs
  pid=$(start_proxy "$1" "$2")
  if ! wait_port 18080; then kill "$pid" 2>/dev/null; echo "failed"; return; fi
  [ "$3" = 1 ] && hdr=(-H "Connection: close")
  taskset -c 1 wrk -t1 -c"$CONNS" -d2s "${hdr[@]}" http://127.0.0.1:18080/64 >/dev/null 2>&1 || true
  b0=$(core_busy); t0=$(cpu_ticks "$pid")
  out=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"${DURATION}s" "${hdr[@]}" http://127.0.0.1:18080/64 2>&1)
  t1=$(cpu_ticks "$pid"); b1=$(core_busy)
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  [ "$1" = nginx ] && { kill "$(cat "$WORK/proxy-nginx.pid" 2>/dev/null)" 2>/dev/null || true; sleep 0.3; }
  reqs=$(echo "$out" | awk '/requests in/{print $1}')
  local errs; errs=$(echo "$out" | awk '/Non-2xx|Socket errors/{printf "%s ", $0}')
  if [ -z "$reqs" ] || [ "$reqs" = 0 ]; then echo "failed"; return; fi
  paste <(echo "$b0") <(echo "$b1") | awk -v r="$reqs" -v d="$DURATION" -v tk=$((t1 - t0)) -v us="$TICK_US" -v e="$errs" '
    { busy[NR] = 100 * ($5 - $2) / ($6 - $3) }
    END { printf "%.0f %.2f %.0f %.0f %s\n", r / d, tk * us / r, busy[1], busy[2], (e == "" ? "" : "ERRORS:" e) }'
}

rss_kib() { awk '/^VmRSS:/{print $2}' "/proc/$1/status"; }
rss_tree_kib() { # the process and its direct children (nginx's workers)
  local p t=0
  for p in "$1" $(pgrep -P "$1" || true); do t=$((t + $(rss_kib "$p" 2>/dev/null || echo 0))); done
  echo "$t"
}

idle_run() { # $1 proxy; prints "KiB-per-conn rss-before rss-after"
  local pid before after
  pid=$(start_proxy "$1" http)
  if ! wait_port 18080; then kill "$pid" 2>/dev/null; echo "failed"; return; fi
  sleep 0.3
  before=$(rss_tree_kib "$pid")
  coproc HOLD { taskset -c 1 python3 bench/idle_conns.py 18080 "$IDLE"; }
  local line; read -r line <&"${HOLD[0]}"
  sleep 1
  after=$(rss_tree_kib "$pid")
  kill "$HOLD_PID" 2>/dev/null; wait "$HOLD_PID" 2>/dev/null || true
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  [ "$1" = nginx ] && { kill "$(cat "$WORK/proxy-nginx.pid" 2>/dev/null)" 2>/dev/null || true; sleep 0.3; }
  [ "$line" = ready ] || { echo "failed"; return; }
  awk -v a="$after" -v b="$before" -v n="$IDLE" 'BEGIN { printf "%.2f %d %d\n", (a - b) / n, b, a }'
}

median_range() { sort -n | awk '{v[NR]=$1} END {if (NR==0) {print "-"; exit} printf "%s [%s..%s]", v[int((NR+1)/2)], v[1], v[NR]}'; }

printf '%-11s %-8s %-24s %-26s %-9s %s\n' scenario proxy "req/s" "CPU-us/req" "busy0/1%" "ratio(CPU/req vs haproxy)"
for sc in $SCENARIOS; do
  if [ "$sc" = idle ]; then
    for px in $PROXIES; do
      : > "$WORK/runs"
      for _ in $(seq "$RUNS"); do idle_run "$px" >> "$WORK/runs"; done
      if grep -q failed "$WORK/runs"; then printf '%-11s %-8s did not run\n' idle "$px"; continue; fi
      kib=$(awk '{print $1}' "$WORK/runs" | median_range)
      printf '%-11s %-8s KiB per idle connection (%s connections): %s; RSS before/after (last run): %s\n' \
        idle "$px" "$IDLE" "$kib" "$(tail -1 "$WORK/runs" | awk '{print $2 "/" $3 " KiB"}')"
    done
    continue
  fi
  case "$sc" in
    tcp-ka) mode=tcp close=0 ;; tcp-close) mode=tcp close=1 ;;
    http-ka) mode=http close=0 ;; http-close) mode=http close=1 ;;
    *) echo "unknown scenario $sc" >&2; exit 2 ;;
  esac
  declare -A cpu_med=()
  for px in $PROXIES; do
    : > "$WORK/runs"
    for _ in $(seq "$RUNS"); do one_run "$px" "$mode" "$close" >> "$WORK/runs"; done
    if grep -q failed "$WORK/runs"; then
      printf '%-11s %-8s %s\n' "$sc" "$px" "did not run (see: $(head -c 200 "$WORK/proxy.log" | tr '\n' ' '))"
      continue
    fi
    rps=$(awk '{print $1}' "$WORK/runs" | median_range)
    cpu=$(awk '{print $2}' "$WORK/runs" | median_range)
    cpu_med[$px]=${cpu%% *}
    busy=$(awk '{print $3 "/" $4}' "$WORK/runs" | tail -1)
    errs=$(awk '{$1=$2=$3=$4=""; print}' "$WORK/runs" | tr -s ' ' | sort -u | tr '\n' ' ')
    ratio=-
    if [ -n "${cpu_med[haproxy]:-}" ] && [ "$px" != haproxy ]; then
      ratio=$(awk -v a="${cpu_med[$px]}" -v b="${cpu_med[haproxy]}" 'BEGIN{printf "%.2f", a / b}')
    fi
    printf '%-11s %-8s %-24s %-26s %-9s %s %s\n' "$sc" "$px" "$rps" "$cpu" "$busy" "$ratio" "$errs"
  done
  unset cpu_med
done
