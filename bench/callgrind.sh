#!/usr/bin/env bash
# User-space instructions per request, deterministic enough to compare two builds on a noisy
# machine: Bascule runs under `valgrind --tool=callgrind` (pinned on CPU 0) in front of the
# benchmark's nginx backends, wrk (pinned on CPU 1) sends keep-alive requests for 64 B over 10
# connections for SECS seconds, and the script prints the instructions Bascule executed divided by
# the requests wrk completed (startup included: a few million instructions, under 1% of a run).
#
# Usage: bench/callgrind.sh [BINARY] [keep-alive|close]
#   BINARY      default target/release/bascule (built first when it is the default)
#   keep-alive  (default) or close: wrk sends `Connection: close`, with `http-reuse always`
# Environment: SECS (default 5), OUT (callgrind output file, default a temporary one; read it with
# `callgrind_annotate --inclusive=yes OUT`).
# WARM=1 runs the load for one second first and then zeroes the counters (`callgrind_control
# -z`): the figure leaves out startup (loading maps and pattern files is millions of
# instructions) and the first requests, so it does not depend on how many requests wrk completes.
# Ports PORT (default 18080), PORT+1 and PORT+2 must be free (as for bench/run.sh).
# LOG=1 adds `log 127.0.0.1:PORT+3 local0` and `option httplog` (a UDP sink on PORT+3 discards
# the lines): the cost of an access log line. BINARY may be /usr/sbin/haproxy, for its cost; its
# startup is much larger than Bascule's, so compare two durations (SECS) and take the
# difference (instructions and requests) rather than the ratio printed here.
# RULES=1 measures bench/run.sh's http-rules scenario (S7): bench/rules.cfg with the data files of
# bench/gen_rules.py, and the request of bench/rules-traffic.sh (RULES=off: that request through
# bench/proxy.cfg, S7o). CFG=FILE uses another configuration template instead of
# bench/proxy.cfg (its @MODE@, @OPTIONS@, @REUSE@ and @DIR@, the work directory, are substituted).
# VG_OPTS adds valgrind options, e.g. VG_OPTS='--toggle-collect=*policy::http_request*' to count
# only inside the request rules (exclusive costs of that phase alone).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-5}
PORT=${PORT:-18080}
ports() { sed -e "s/18080/$PORT/g; s/18081/$((PORT + 1))/g; s/18082/$((PORT + 2))/g"; }
bin=${1:-}
mode=${2:-keep-alive}
if [ -z "$bin" ]; then
  cargo build --release --quiet --bin bascule
  bin=target/release/bascule
fi
for tool in valgrind callgrind_annotate nginx wrk taskset; do
  command -v "$tool" >/dev/null || { echo "$tool is missing (apt-get install valgrind nginx wrk)" >&2; exit 1; }
done
ulimit -n 20000 2>/dev/null || true

WORK=$(mktemp -d /tmp/bascule-callgrind.XXXXXX)
chmod 755 "$WORK"
OUT=${OUT:-$WORK/callgrind.out}
BACKEND_PID=
PROXY_PID=
SINK_PID=
cleanup() {
  set +e
  [ -n "$SINK_PID" ] && kill "$SINK_PID" 2>/dev/null
  [ -n "$PROXY_PID" ] && kill "$PROXY_PID" 2>/dev/null
  [ -n "$BACKEND_PID" ] && kill "$BACKEND_PID" $(pgrep -P "$BACKEND_PID") 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK/www" "$WORK"/*.conf "$WORK"/*.cfg "$WORK"/hosts.map "$WORK"/networks.lst
}
trap cleanup EXIT

for port in $PORT $((PORT + 1)) $((PORT + 2)); do
  if (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
    echo "port $port is in use (another run?): set PORT" >&2
    exit 1
  fi
done
mkdir -p "$WORK/www"
head -c 64 /dev/zero | tr '\0' 'x' > "$WORK/www/64"
# shellcheck source=bench/rules-traffic.sh
. bench/rules-traffic.sh
rules_www "$WORK/www"
chmod -R a+rX "$WORK/www"
cfg=${CFG:-bench/proxy.cfg}
path=64
extra=()
case "${RULES:-}" in
  "") ;;
  off) path=$RULES_PATH; extra=("${RULES_HDRS[@]}") ;;
  *) cfg=${CFG:-bench/rules.cfg}; path=$RULES_PATH; extra=("${RULES_HDRS[@]}")
     python3 bench/gen_rules.py "$WORK" ;;
esac
sed -e "s#@ROOT@#$WORK/www#" -e "s#@DIR@#$WORK#" bench/backend-nginx.conf | ports > "$WORK/backend.conf"
taskset -c 1 nginx -e "$WORK/backend-error.log" -c "$WORK/backend.conf" & BACKEND_PID=$!

reuse="http-reuse safe"
hdr=("${extra[@]}")
if [ "$mode" = close ]; then
  reuse="http-reuse always"
  hdr+=(-H "Connection: close")
fi
options=
if [ -n "${LOG:-}" ]; then
  # An access log line per request, over UDP to a sink that discards it.
  options="    log 127.0.0.1:$((PORT + 3)) local0\n    option httplog"
  taskset -c 1 python3 -c "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('127.0.0.1', $((PORT + 3))))
while True: s.recv(65536)" & SINK_PID=$!
fi
awk -v reuse="$reuse" -v options="$options" '{ gsub(/@MODE@/, "http"); gsub(/@REUSE@/, reuse) } /^@OPTIONS@$/ { if (options != "") print options; next } { print }' \
  "$cfg" | sed "s#@DIR@#$WORK#g" | ports > "$WORK/proxy.cfg"
# shellcheck disable=SC2086 # VG_OPTS is a list of options
taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$OUT" ${VG_OPTS:-} "$bin" -db -f "$WORK/proxy.cfg" \
  > "$WORK/proxy.log" 2>&1 & PROXY_PID=$!
# Up to 2 minutes: haproxy under callgrind loads bench/rules.cfg's 20,000 entries slowly.
for _ in $(seq 600); do
  (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break
  sleep 0.2
done
if [ "${WARM:-0}" = 1 ]; then
  # One second of the same load, then the counters zeroed: startup and warm-up left out.
  taskset -c 1 wrk -t1 -c10 -d1s "${hdr[@]}" "http://127.0.0.1:$PORT/$path" >/dev/null
  callgrind_control -z "$PROXY_PID" >/dev/null 2>&1 || callgrind_control -z >/dev/null
fi
wrk_out=$(taskset -c 1 wrk -t1 -c10 -d"${SECS}s" "${hdr[@]}" "http://127.0.0.1:$PORT/$path")
requests=$(echo "$wrk_out" | awk '/ requests in /{print $1}')
if echo "$wrk_out" | grep -q "Non-2xx"; then
  echo "errors in the run, not a measurement: $(echo "$wrk_out" | grep Non-2xx)" >&2
  requests=0
fi
kill "$PROXY_PID"
wait "$PROXY_PID" 2>/dev/null || true
PROXY_PID=
total=$(callgrind_annotate "$OUT" 2>/dev/null | awk '/PROGRAM TOTALS/{gsub(",", "", $1); print $1}')
[ -n "$total" ] && [ "${requests:-0}" -gt 0 ] || { echo "no measurement (see $WORK/proxy.log)" >&2; exit 1; }
echo "$mode${RULES:+ RULES=$RULES}: $requests requests, $total instructions, $((total / requests)) per request ($OUT)"
