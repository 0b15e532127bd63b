#!/usr/bin/env bash
# TLS benchmarks (issue 18, acceptance 7): Bascule and haproxy (Debian's, OpenSSL 3) side by side,
# terminating TLS 1.3 with the same configuration, bench/tls.cfg (`bind ... ssl crt FILE
# ssl-min-ver TLSv1.3`), in front of bench/run.sh's nginx backends (a 64 B file). As in
# bench/run.sh (whose helpers, bench/lib.sh, this script shares): the proxy is pinned alone on
# CPU 0 (`taskset -c 0`), the backends and the load on CPU 1; the cost is the proxy's CPU time
# (utime+stime of all its threads from /proc/PID/stat over the measured window) divided by what
# the load completed; figures are "median [min..max]" over RUNS rounds, the proxies rotated
# between rounds; "paired" is the median of each round's cost ÷ haproxy's in the same round.
#
# Usage: bench/tls.sh [SCENARIO...]     (default: all of them, in this order)
#   tls-hs-ecdsa   (T1)  full TLS 1.3 handshakes, a new connection per request (HTTP/1.0
#                        GET /64), ECDSA P-256 certificate (tests/tls/www-ecdsa.pem): HS_CLIENTS
#                        parallel `openssl s_time -new` (OpenSSL's client: a fresh session every
#                        connection). Handshakes/s and proxy CPU-µs per handshake. oha is not
#                        used: its rustls client resumes sessions even with --disable-keepalive
#                        (checked: 196 of 200 connections resumed against haproxy).
#   tls-hs-rsa     (T1)  the same with RSA-2048 (tests/tls/www-rsa.pem)
#   tls-hs-resumed (T1r) resumed handshakes: `openssl s_time -reuse` (one full handshake per
#                        client process, then every connection resumes its session), ECDSA
#   tls-ka         (T2)  64 B keep-alive requests over TLS 1.3, KA_CONNS connections, wrk
#                        saturating: CPU-µs per request and the ratio to haproxy
#   tls-latency    (T3)  oha at fixed rates with --latency-correction over https keep-alive
#                        (50 connections), each rate of LAT_RATES in turn, both proxies with
#                        `nbthread 2`, both threads pinned with the proxy on LAT_CPUS (default
#                        "0": CPU 0, as bench/run.sh's S8 pins its two threads; the load keeps
#                        CPU 1 to itself). p50/p99/p99.9/p99.99 per rate, and a PNG plot of
#                        latency by percentile per rate and proxy (LAT_PNG), drawn with
#                        matplotlib (installed with `pip install --user matplotlib` if missing)
#   tls-ws         (T4)  WS_CONNS WebSocket connections over TLS (wss), WS_CONC at a time, one
#                        32-byte message each (bench/ws_client.py, pinned on CPU 1) through the
#                        proxy to a plain WebSocket echo server (bench/ws_echo.py, on CPU 1):
#                        mean handshake time (TCP + TLS + upgrade), mean message latency, total
#                        time, the proxy's peak RSS (VmHWM) and its CPU-µs per connection
#   tls-idle       (T5)  RSS per idle TLS client connection after the handshake and one request
#                        (bench/idle_conns.py --tls, TLS_IDLE connections opened one by one):
#                        KiB per connection and the ratio to haproxy
#   tls-flood      (T6)  issue 18's "a handshake flood cannot starve established connections":
#                        keep-alive requests over TLS at FLOOD_RATE req/s (oha, 50 connections,
#                        --latency-correction) while HS_CLIENTS `openssl s_time -new` clients
#                        open new connections as fast as they can (full handshakes, ECDSA), one
#                        thread each: the established connections' p50/p99/p99.9 and the
#                        handshakes/s the flood got through, side by side
# The issue's names are accepted as aliases (t1 = tls-hs-ecdsa, t1rsa, t1r, t2, t3, t4, t5, t6).
#
# Before the measured runs of each scenario, every proxy gets a short check run (CHECK_SECS) with
# a log line per request or connection, `%[ssl_fc_is_resumed] %sslv %sslc`, through the same load
# tool: the "check" row counts full and resumed handshakes and names the versions and ciphers
# seen, and says whether that is what the scenario needs (no resumption for T1, T2, T4 and T5;
# resumption for T1r). The measured runs do not log.
#
# Environment:
#   DURATION   seconds per measured run (default 10; each run has a warm-up before it)
#   RUNS       measured runs per scenario and proxy (default 3)
#   PROXIES    default "haproxy bascule" (nginx is not set up for TLS here)
#   HS_CLIENTS parallel `openssl s_time` processes for T1/T1r (default 4)
#   KA_CONNS   tls-ka's connections (default 50)
#   LAT_RATES  tls-latency's rates in req/s (default "2000 5000 10000 20000"); LAT_RATE is an alias
#   LAT_CPUS   CPUs the two-thread proxy is pinned on in tls-latency (default 0; "0,1" shares
#              the load's core)
#   LAT_PNG    the plot's path (default target/tls-latency.png)
#   WS_CONNS   tls-ws's connections (default 10000); WS_CONC: at a time (default 100)
#   TLS_IDLE   tls-idle's connections (default 2000); IDLE_WAIT: seconds before reading the RSS
#              (default 1)
#   CHECK_SECS length of the check runs (default 1); CHECK=0 skips them
#   STEAL_MAX, STEAL_RETRIES, PORT, BASCULE: as in bench/run.sh. Ports PORT (the proxy), PORT+1
#              and PORT+2 (nginx backends) and PORT+3 (the WebSocket echo server) must be free.
#
# Each scenario prints a row per proxy like bench/run.sh's; the "#" header lines give the machine,
# the versions and the command line.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
PROXIES=${PROXIES:-"haproxy bascule"}
ALL="tls-hs-ecdsa tls-hs-rsa tls-hs-resumed tls-ka tls-latency tls-ws tls-idle tls-flood"
FLOOD_RATE=${FLOOD_RATE:-2000}
SCENARIOS=${*:-$ALL}
HS_CLIENTS=${HS_CLIENTS:-4}
KA_CONNS=${KA_CONNS:-50}
LAT_RATES=${LAT_RATES:-${LAT_RATE:-"2000 5000 10000 20000"}}
LAT_CPUS=${LAT_CPUS:-0}
LAT_PNG=${LAT_PNG:-target/tls-latency.png}
WS_CONNS=${WS_CONNS:-10000}
WS_CONC=${WS_CONC:-100}
TLS_IDLE=${TLS_IDLE:-2000}
IDLE_WAIT=${IDLE_WAIT:-1}
CHECK=${CHECK:-1}
CHECK_SECS=${CHECK_SECS:-1}
STEAL_MAX=${STEAL_MAX:-5}
STEAL_RETRIES=${STEAL_RETRIES:-2}
PORT=${PORT:-18080}
BASCULE=${BASCULE:-}
BE1=$((PORT + 1))
BE2=$((PORT + 2))
WS_PORT=$((PORT + 3))
CA=tests/tls/ca.pem
# shellcheck source=bench/lib.sh
. bench/lib.sh
PROXY_CFG=bench/tls.cfg
PROXY_CPUS=0
PROXY_SED=()
export PATH="$HOME/.cargo/bin:$PATH"

canon() {
  case "${1,,}" in
    tls-hs-ecdsa|t1) echo tls-hs-ecdsa ;;
    tls-hs-rsa|t1rsa) echo tls-hs-rsa ;;
    tls-hs-resumed|t1r) echo tls-hs-resumed ;;
    tls-ka|t2) echo tls-ka ;;
    tls-latency|t3) echo tls-latency ;;
    tls-ws|t4) echo tls-ws ;;
    tls-idle|t5) echo tls-idle ;;
    tls-flood|t6) echo tls-flood ;;
    *) return 1 ;;
  esac
}
todo=()
for sc in $SCENARIOS; do
  c=$(canon "$sc") || { echo "unknown scenario '$sc'; known: $ALL (or t1 t1rsa t1r t2 t3 t4 t5)" >&2; exit 2; }
  todo+=("$c")
done
for px in $PROXIES; do
  case "$px" in bascule|haproxy) ;; *) echo "PROXIES: '$px' is not set up for TLS here (haproxy, bascule)" >&2; exit 2 ;; esac
done
wants() { [[ " ${todo[*]} " == *" $1 "* ]]; }

ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
TICK_US=$((1000000 / $(getconf CLK_TCK)))
ports_free "$PORT" "$BE1" "$BE2" "$WS_PORT"

# --- tools -----------------------------------------------------------------------------------
need() { command -v "$1" >/dev/null || missing+=("$2"); }
missing=()
need haproxy haproxy; need nginx nginx; need wrk wrk; need taskset util-linux; need openssl openssl
need python3 python3; need pgrep procps; need ss iproute2
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  systemctl stop nginx haproxy 2>/dev/null || service nginx stop 2>/dev/null || true
  service haproxy stop 2>/dev/null || true
fi
if ! command -v oha >/dev/null; then
  echo "oha not found: installing it with 'cargo install oha --locked' (once, a few minutes)"
  cargo install oha --locked --quiet
fi
if oha --help 2>&1 | grep -q -- '--output-format'; then OHA_JSON=(--output-format json); else OHA_JSON=(--json); fi
if wants tls-latency && ! python3 -c 'import matplotlib' 2>/dev/null; then
  echo "# matplotlib (for tls-latency's plot) not found: installing it with 'python3 -m pip install --user matplotlib'"
  python3 -m pip install --quiet --user matplotlib >/dev/null 2>&1 || python3 -m pip install --quiet matplotlib >/dev/null
fi
if [ -z "$BASCULE" ]; then
  cargo build --release --quiet --bin bascule
  BASCULE=target/release/bascule
fi

# --- header ----------------------------------------------------------------------------------
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null)" ] && rev="$rev+uncommitted changes"
[ "$BASCULE" = target/release/bascule ] || rev="$BASCULE (given in BASCULE; the tree is at $rev)"
echo "# CPU: $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo) × $(nproc), kernel $(uname -r)"
echo "# $(haproxy -v | head -1 | cut -d' ' -f1-3) (on $(haproxy -vv | sed -n 's/^Running on OpenSSL version : \(OpenSSL [^ ]*\).*/\1/p')), $(openssl version | cut -d' ' -f1-2) (load), wrk $(wrk -v 2>&1 | head -1 | cut -d' ' -f2), $(oha --version), $(python3 --version), $(rustc --version | cut -d' ' -f1-2), bascule $rev"
echo "# $0 ${todo[*]}: DURATION=$DURATION RUNS=$RUNS PROXIES=\"$PROXIES\" HS_CLIENTS=$HS_CLIENTS KA_CONNS=$KA_CONNS LAT_RATES=\"$LAT_RATES\" LAT_CPUS=$LAT_CPUS WS_CONNS=$WS_CONNS WS_CONC=$WS_CONC TLS_IDLE=$TLS_IDLE IDLE_WAIT=$IDLE_WAIT CHECK=$CHECK CHECK_SECS=$CHECK_SECS PORT=$PORT STEAL_MAX=$STEAL_MAX STEAL_RETRIES=$STEAL_RETRIES"

setup_work
mkdir -p "$WORK/www"
head -c 64 /dev/zero | tr '\0' 'x' > "$WORK/www/64"
chmod -R a+rX "$WORK/www"
start_backends
if wants tls-ws; then
  taskset -c 1 python3 bench/ws_echo.py "$WS_PORT" > "$WORK/ws-echo.log" 2>&1 &
  EXTRA_PIDS="$EXTRA_PIDS $!"
  wait_port "$WS_PORT" || { echo "the WebSocket echo server did not start" >&2; exit 1; }
fi

# --- the configuration -----------------------------------------------------------------------
# tls_cfg CRT NBTHREAD LOG(0|1) SERVERS(nginx|ws): sets PROXY_SED for start_proxy.
tls_cfg() {
  local s1=18081 s2=18082 lt="" lg="" lf=""
  [ "$4" = ws ] && s1=$WS_PORT && s2=$WS_PORT
  if [ "$3" = 1 ]; then
    lt="log stdout format raw local0"; lg="log global"
    lf='log-format "TLSCHECK %[ssl_fc_is_resumed] %sslv %sslc"'
  fi
  PROXY_SED=(-e "s#@CRT@#$PWD/$1#" -e "s#@NBTHREAD@#$2#" -e "s#@SRV1@#$s1#" -e "s#@SRV2@#$s2#"
    -e "s#@LOG_TARGET@#$lt#" -e "s#@LOG@#$lg#" -e "s#@LOG_FORMAT@#$lf#")
}

# --- load tools --------------------------------------------------------------------------------
# HS_CLIENTS `openssl s_time` processes on CPU 1 for $1 seconds, $2 = -new or -reuse. Prints
# "connections errors" (errors: lines of s_time's stderr that report a failure).
stime_load() {
  local i pids=() n=0 e=0
  for ((i = 0; i < HS_CLIENTS; i++)); do
    taskset -c 1 openssl s_time -connect "127.0.0.1:$PORT" "$2" -www /64 -time "$1" \
      > "$WORK/stime.$i.out" 2> "$WORK/stime.$i.err" < /dev/null &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || true; done
  for ((i = 0; i < HS_CLIENTS; i++)); do
    # "431 connections in 0.45s; 957.78 connections/user sec, bytes read 36204"
    n=$((n + $(awk '/ connections in [0-9.]+s;/ { print $1; exit }' "$WORK/stime.$i.out" | grep . || echo 0)))
    e=$((e + $(grep -ci 'error' "$WORK/stime.$i.err" || true)))
  done
  echo "$n $e"
}

# The check: proxy $1, certificate $2, servers $3 (nginx|ws), then the load command ("$@" from $4,
# run for about CHECK_SECS). Prints "full=N resumed=M VERSIONS CIPHERS" from the log lines.
tls_check() {
  local px=$1
  tls_cfg "$2" 1 1 "$3"
  shift 3
  start_proxy "$px" http "" "" || { echo "failed: the proxy did not start"; return; }
  "$@" > "$WORK/check.out" 2>&1 || true
  sleep 0.2
  stop_proxy
  awk '$1 == "TLSCHECK" { if ($2 == "1") r++; else if ($2 == "0") f++; else o++; v[$3]++; c[$4]++ }
    END { s = sprintf("full=%d resumed=%d", f, r); if (o) s = s sprintf(" unknown=%d", o)
      for (k in v) s = s " " k; for (k in c) s = s " " k; print s }' "$WORK/proxy-$px.log"
}
check_row() { # $1 scenario $2 proxy $3 check line $4 expect (full|resumed|any)
  local f r note="as expected" l=$3
  f=$(sed -n 's/.*full=\([0-9]*\).*/\1/p' <<< "$l"); r=$(sed -n 's/.*resumed=\([0-9]*\).*/\1/p' <<< "$l")
  if [[ $l == failed* ]] || [[ $l != *TLSv1.3* ]] || [[ $l == *TLSv1.2* ]]; then note="NOT TLS 1.3 ONLY"
  elif [ "$4" = full ] && [ "${r:-0}" != 0 ]; then note="RESUMED HANDSHAKES: the load does not do full handshakes"
  elif [ "$4" = resumed ] && [ "${r:-0}" -le "${f:-0}" ]; then note="TOO FEW RESUMED HANDSHAKES"
  fi
  row "" "" "check: $l" "" "" "" "$note"
}

# What the proxy $1 wrote on stdout/stderr during a measured run (it logs nothing there when all
# goes well): "proxy_output_lines=N:first_line" for the notes, or nothing.
proxy_note() {
  local f="$WORK/proxy-$1.log" n
  n=$(grep -c . "$f" 2>/dev/null || true)
  [ "${n:-0}" = 0 ] || echo "proxy_output_lines=$n:$(grep -m1 . "$f" | tr ' ' '_' | head -c 100)"
}

# --- one run per scenario kind -------------------------------------------------------------------
# Handshakes: $1 proxy $2 cert $3 -new|-reuse. Prints "hs_per_s cpu_us_per_hs busy0 busy1 [notes]".
hs_run() {
  local b0 b1 t0 t1 s0 s1 w0 w1 n e note pn
  tls_cfg "$2" 1 0 nginx
  start_proxy "$1" http "" "" || { echo failed; return; }
  stime_load 1 "$3" > /dev/null
  b0=$(core_busy); t0=$(cpu_ticks "$PROXY_PID"); s0=$(steal_ticks); w0=$(date +%s.%N)
  read -r n e < <(stime_load "$DURATION" "$3")
  w1=$(date +%s.%N); t1=$(cpu_ticks "$PROXY_PID"); b1=$(core_busy); s1=$(steal_ticks)
  stop_proxy
  if [ -n "$PROXY_EARLY" ]; then echo "failed: $PROXY_EXIT"; return; fi
  if [ "$n" = 0 ]; then echo "failed: no handshake completed ($(head -c 200 "$WORK/stime.0.err" | tr '\n' ' '))"; return; fi
  note=""
  [ "$e" = 0 ] || note="ERRORS:s_time_error_lines=$e"
  [ -z "$PROXY_EXIT" ] || note="${note:-ERRORS:}${note:+,}$PROXY_EXIT"
  pn=$(proxy_note "$1"); [ -z "$pn" ] || note="${note:-ERRORS:}${note:+,}$pn"
  awk -v n="$n" -v w0="$w0" -v w1="$w1" -v tk=$((t1 - t0)) -v us="$TICK_US" \
    'BEGIN { printf "%.0f %.2f ", n / (w1 - w0), tk * us / n }'
  echo "$(busy_pct "$b0" "$b1")$note $(steal_note "$s0" "$s1")"
}

# Keep-alive: $1 proxy. Prints "req_per_s cpu_us_per_req busy0 busy1 [notes]".
ka_run() {
  local b0 b1 t0 t1 s0 s1 out reqs rps read tps errs
  tls_cfg tests/tls/www-ecdsa.pem 1 0 nginx
  start_proxy "$1" http "" "" || { echo failed; return; }
  taskset -c 1 wrk -t1 -c"$KA_CONNS" -d2s "https://127.0.0.1:$PORT/64" >/dev/null 2>&1 || true
  b0=$(core_busy); t0=$(cpu_ticks "$PROXY_PID"); s0=$(steal_ticks)
  out=$(taskset -c 1 wrk -t1 -c"$KA_CONNS" -d"${DURATION}s" "https://127.0.0.1:$PORT/64" 2>&1) || true
  t1=$(cpu_ticks "$PROXY_PID"); b1=$(core_busy); s1=$(steal_ticks)
  stop_proxy
  if [ -n "$PROXY_EARLY" ]; then echo "failed: $PROXY_EXIT"; return; fi
  read -r reqs rps read tps errs < <(echo "$out" | wrk_parse)
  if [ "$reqs" = 0 ]; then echo "failed: $(echo "$out" | tail -2 | tr '\n' ' ')"; return; fi
  errs="$errs $PROXY_EXIT $(proxy_note "$1")"
  errs=$(echo $errs)
  awk -v r="$reqs" -v rps="$rps" -v tk=$((t1 - t0)) -v us="$TICK_US" 'BEGIN { printf "%.0f %.2f ", rps, tk * us / r }'
  echo "$(busy_pct "$b0" "$b1")${errs:+ERRORS: $errs }$(steal_note "$s0" "$s1")"
}

# Latency: $1 proxy $2 rate $3 round. Keeps oha's JSON as $WORK/lat.PROXY.RATE.ROUND.json. Prints
# "rate cpu_us busy0 busy1 p50 p99 p99.9 p99.99 notes" (ms; notes "-" when none), or "failed".
lat_run() {
  local b0 b1 t0 t1 s0 s1 json="$WORK/lat.$1.$2.$3.json"
  tls_cfg tests/tls/www-ecdsa.pem 2 0 nginx
  PROXY_CPUS=$LAT_CPUS
  start_proxy "$1" http "" "" || { PROXY_CPUS=0; echo failed; return; }
  PROXY_CPUS=0
  taskset -c 1 oha -z 2s -q "$2" -c 50 --insecure --no-tui "${OHA_JSON[@]}" "https://127.0.0.1:$PORT/64" >/dev/null 2>&1 || true
  b0=$(core_busy); t0=$(cpu_ticks "$PROXY_PID"); s0=$(steal_ticks)
  taskset -c 1 oha -z "${DURATION}s" -q "$2" -c 50 --latency-correction --insecure --no-tui "${OHA_JSON[@]}" \
    "https://127.0.0.1:$PORT/64" > "$json" 2>"$WORK/oha.err" || true
  t1=$(cpu_ticks "$PROXY_PID"); b1=$(core_busy); s1=$(steal_ticks)
  stop_proxy
  if [ -n "$PROXY_EARLY" ]; then echo "failed: $PROXY_EXIT"; return; fi
  python3 - "$json" $((t1 - t0)) "$TICK_US" "$(busy_pct "$b0" "$b1")" "$PROXY_EXIT" "$(steal_note "$s0" "$s1")" "$(proxy_note "$1")" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print("failed"); sys.exit()
ok = d["statusCodeDistribution"].get("200", 0)
if ok == 0:
    print("failed: no 200 (%s)" % str(d.get("errorDistribution"))[:200].replace(" ", "_")); sys.exit()
bad = sum(v for k, v in d["statusCodeDistribution"].items() if k != "200")
errs = {k: v for k, v in d["errorDistribution"].items() if "deadline" not in k}
p = d["latencyPercentiles"]
notes = [("ERRORS:%d_non-200,%s" % (bad, errs)).replace(" ", "_")] if bad or errs else []
notes += [a for a in sys.argv[5:8] if a]
print("%.0f %.2f %s %.3f %.3f %.3f %.3f %s" % (ok / d["summary"]["total"], int(sys.argv[2]) * int(sys.argv[3]) / ok,
      sys.argv[4], p["p50"] * 1e3, p["p99"] * 1e3, p["p99.9"] * 1e3, p["p99.99"] * 1e3, ",".join(notes) or "-"))
EOF
}

# Flood: $1 proxy $2 round. Keep-alive requests at FLOOD_RATE while s_time clients flood new
# connections. Prints "rate cpu_us busy0 busy1 p50 p99 p99.9 hs_per_s notes".
flood_run() {
  local b0 b1 t0 t1 s0 s1 json="$WORK/flood.$1.$2.json" w0 w1 n e
  tls_cfg tests/tls/www-ecdsa.pem 1 0 nginx
  start_proxy "$1" http "" "" || { echo failed; return; }
  taskset -c 1 oha -z 2s -q "$FLOOD_RATE" -c 50 --insecure --no-tui "${OHA_JSON[@]}" "https://127.0.0.1:$PORT/64" >/dev/null 2>&1 || true
  b0=$(core_busy); t0=$(cpu_ticks "$PROXY_PID"); s0=$(steal_ticks); w0=$(date +%s.%N)
  stime_load "$DURATION" -new > "$WORK/flood.stime" &
  local sp=$!
  taskset -c 1 oha -z "${DURATION}s" -q "$FLOOD_RATE" -c 50 --latency-correction --insecure --no-tui "${OHA_JSON[@]}" \
    "https://127.0.0.1:$PORT/64" > "$json" 2>"$WORK/oha.err" || true
  wait "$sp" || true
  w1=$(date +%s.%N); t1=$(cpu_ticks "$PROXY_PID"); b1=$(core_busy); s1=$(steal_ticks)
  stop_proxy
  if [ -n "$PROXY_EARLY" ]; then echo "failed: $PROXY_EXIT"; return; fi
  read -r n e < "$WORK/flood.stime"
  python3 - "$json" $((t1 - t0)) "$TICK_US" "$(busy_pct "$b0" "$b1")" \
    "$(awk -v n="$n" -v w0="$w0" -v w1="$w1" 'BEGIN { printf "%.0f", n / (w1 - w0) }')" \
    "$PROXY_EXIT" "$(steal_note "$s0" "$s1")" "$(proxy_note "$1")" "$([ "$e" = 0 ] || echo "s_time_errors=$e")" <<'EOF2'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print("failed"); sys.exit()
ok = d["statusCodeDistribution"].get("200", 0)
if ok == 0:
    print("failed: no 200"); sys.exit()
bad = sum(v for k, v in d["statusCodeDistribution"].items() if k != "200")
errs = {k: v for k, v in d["errorDistribution"].items() if "deadline" not in k}
p = d["latencyPercentiles"]
notes = [("ERRORS:%d_non-200,%s" % (bad, errs)).replace(" ", "_")] if bad or errs else []
notes += [a for a in sys.argv[6:10] if a]
print("%.0f %.2f %s %.3f %.3f %.3f %s %s" % (ok / d["summary"]["total"], int(sys.argv[2]) * int(sys.argv[3]) / ok,
      sys.argv[4], p["p50"] * 1e3, p["p99"] * 1e3, p["p99.9"] * 1e3, sys.argv[5], ",".join(notes) or "-"))
EOF2
}

# WebSocket: $1 proxy. Prints "total_s hs_ms msg_ms hwm_kib cpu_us_per_conn busy0 busy1 notes".
ws_run() {
  local b0 b1 t0 t1 s0 s1 out hwm hs msg total ok errs pn
  tls_cfg tests/tls/www-ecdsa.pem 1 0 ws
  start_proxy "$1" http "" "" || { echo failed; return; }
  b0=$(core_busy); t0=$(cpu_ticks "$PROXY_PID"); s0=$(steal_ticks)
  out=$(taskset -c 1 python3 bench/ws_client.py "$PORT" "$WS_CONNS" "$WS_CONC" "$CA" 2>&1 | tail -1) || true
  t1=$(cpu_ticks "$PROXY_PID"); b1=$(core_busy); s1=$(steal_ticks)
  hwm=$(awk '/^VmHWM:/{print $2}' "/proc/$PROXY_PID/status" 2>/dev/null || echo 0)
  stop_proxy
  if [ -n "$PROXY_EARLY" ]; then echo "failed: $PROXY_EXIT"; return; fi
  read -r hs msg total ok errs <<< "$out"
  if [[ ${ok:-} != ok=* ]] || [ "${ok#ok=}" = 0 ]; then echo "failed: $out"; return; fi
  [ "$errs" = errors=0 ] && errs="" || errs="ERRORS:$errs"
  [ -z "$PROXY_EXIT" ] || errs="${errs:-ERRORS:}${errs:+,}$PROXY_EXIT"
  pn=$(proxy_note "$1"); [ -z "$pn" ] || errs="${errs:-ERRORS:}${errs:+,}$pn"
  awk -v t="$total" -v hs="$hs" -v m="$msg" -v h="$hwm" -v tk=$((t1 - t0)) -v us="$TICK_US" -v n="${ok#ok=}" \
    'BEGIN { printf "%s %s %s %d %.1f ", t, hs, m, h, tk * us / n }'
  echo "$(busy_pct "$b0" "$b1")$errs $(steal_note "$s0" "$s1")"
}

# Idle TLS clients: $1 proxy. Prints "KiB-per-conn rss-before rss-after [notes]" or "failed: ...".
idle_run() {
  local before after line
  tls_cfg tests/tls/www-ecdsa.pem 1 0 nginx
  start_proxy "$1" http "" "" || { echo "failed: the proxy did not start"; return; }
  sleep 0.3
  before=$(rss_tree_kib "$PROXY_PID")
  : > "$WORK/idle.out"
  taskset -c 1 python3 bench/idle_conns.py "$PORT" "$TLS_IDLE" --tls < /dev/null > "$WORK/idle.out" 2>&1 &
  CLIENT_PID=$!
  for _ in $(seq 3000); do [ -s "$WORK/idle.out" ] && break; exited "$CLIENT_PID" && break; sleep 0.1; done
  sleep 0.05
  line=$(head -1 "$WORK/idle.out")
  [ -n "$line" ] || line="failed: no answer from bench/idle_conns.py"
  sleep "$IDLE_WAIT"
  after=$(rss_tree_kib "$PROXY_PID")
  kill "$CLIENT_PID" 2>/dev/null || true; wait "$CLIENT_PID" 2>/dev/null || true
  CLIENT_PID=
  stop_proxy
  [ -z "$PROXY_EARLY" ] || line="failed: $PROXY_EXIT"
  [ -z "$PROXY_EXIT" ] || line="$line $PROXY_EXIT"
  case "$line" in
    ready*) awk -v a="$after" -v b="$before" -v n="$TLS_IDLE" -v note="${line#ready}" \
              'BEGIN { printf "%.2f %d %d%s\n", (a - b) / n, b, a, note }' ;;
    *) echo "$line" ;;
  esac
}

# --- scenarios -----------------------------------------------------------------------------------
runs_reset() { for px in $PROXIES; do : > "$WORK/runs.$px"; done; }
notes_of() { # $1 runs file, $2 first notes column: the distinct notes of all runs
  awk -v c="$2" '{ s = ""; for (i = c; i <= NF; i++) s = s (s == "" ? "" : " ") $i; print s }' "$1" | sort -u | tr '\n' ' '
}

# T1, T1r: $1 name $2 cert $3 -new|-reuse $4 expected check (full|resumed)
hs_scenario() {
  local sc=$1 px runs rate cost
  declare -A chk=()
  if [ "$CHECK" = 1 ]; then
    for px in $PROXIES; do chk[$px]=$(tls_check "$px" "$2" nginx stime_load "$CHECK_SECS" "$3"); done
  fi
  runs_reset
  for r in $(seq 0 $((RUNS - 1))); do
    for px in $(round_order "$r"); do unstolen hs_run "$px" "$2" "$3" >> "$WORK/runs.$px"; done
  done
  set_base "$sc" 2
  for px in $PROXIES; do
    runs="$WORK/runs.$px"
    if grep -q failed "$runs"; then failed_row "$sc" "$px" "$runs"; else
      rate="$(awk '{print $1}' "$runs" | median_range) hs/s"
      cost=$(awk '{print $2}' "$runs" | median_range)
      row "$sc" "$px" "$rate" "$cost µs/hs" "$(busy_med "$runs" 3 4)" "$(ratio "$sc" "${cost%% *}")" \
        "paired $(paired "$runs" 2), $(awk -v c="${cost%% *}" 'BEGIN { printf "%.0f", 1e6 / c }') hs per proxy CPU-second $(notes_of "$runs" 5)"
    fi
    [ -z "${chk[$px]:-}" ] || check_row "$sc" "$px" "${chk[$px]}" "$4"
  done
  echo "#   load: $HS_CLIENTS × taskset -c 1 openssl s_time -connect 127.0.0.1:$PORT $3 -www /64 -time $DURATION; cert $2"
}

ka_scenario() {
  local sc=tls-ka px runs rate cost
  declare -A chk=()
  if [ "$CHECK" = 1 ]; then
    for px in $PROXIES; do
      chk[$px]=$(tls_check "$px" tests/tls/www-ecdsa.pem nginx taskset -c 1 wrk -t1 -c"$KA_CONNS" -d"${CHECK_SECS}s" "https://127.0.0.1:$PORT/64")
    done
  fi
  runs_reset
  for r in $(seq 0 $((RUNS - 1))); do
    for px in $(round_order "$r"); do unstolen ka_run "$px" >> "$WORK/runs.$px"; done
  done
  set_base "$sc" 2
  for px in $PROXIES; do
    runs="$WORK/runs.$px"
    if grep -q failed "$runs"; then failed_row "$sc" "$px" "$runs"; else
      rate="$(awk '{print $1}' "$runs" | median_range) req/s"
      cost=$(awk '{print $2}' "$runs" | median_range)
      row "$sc" "$px" "$rate" "$cost µs/req" "$(busy_med "$runs" 3 4)" "$(ratio "$sc" "${cost%% *}")" "paired $(paired "$runs" 2) $(notes_of "$runs" 5)"
    fi
    [ -z "${chk[$px]:-}" ] || check_row "$sc" "$px" "${chk[$px]}" full
  done
  echo "#   load: taskset -c 1 wrk -t1 -c$KA_CONNS -d${DURATION}s https://127.0.0.1:$PORT/64"
}

lat_scenario() {
  local q px runs rate p50 p99 p999 p9999 list="$WORK/lat.list"
  : > "$list"
  for q in $LAT_RATES; do
    runs_reset
    for r in $(seq 0 $((RUNS - 1))); do
      for px in $(round_order "$r"); do
        unstolen lat_run "$px" "$q" "$r" >> "$WORK/runs.$px"
        echo "$px $q $WORK/lat.$px.$q.$r.json" >> "$list"
      done
    done
    set_base "tls-latency$q" 6
    for px in $PROXIES; do
      runs="$WORK/runs.$px"
      if grep -q failed "$runs"; then failed_row "tls-latency@$q" "$px" "$runs"; continue; fi
      rate="$(awk '{print $1}' "$runs" | median_range) req/s"
      # oha sends at most RATE: a median below 97% of it means the proxy (or the load) saturated.
      awk -v q="$q" '{print $1}' "$runs" | median | awk -v q="$q" '{ exit !($1 < 0.97 * q) }' && rate="$rate SATURATED"
      p50=$(awk '{print $5}' "$runs" | median); p99=$(awk '{print $6}' "$runs" | median)
      p999=$(awk '{print $7}' "$runs" | median); p9999=$(awk '{print $8}' "$runs" | median)
      row "tls-latency@$q" "$px" "$rate" "p50 $p50 p99 $p99 p99.9 $p999 p99.99 $p9999 ms" "$(busy_med "$runs" 3 4)" \
        "$(ratio "tls-latency$q" "$p99")" "(÷haproxy: p99) p99.9 $(awk '{print $7}' "$runs" | median_range) ms, p99.99 $(awk '{print $8}' "$runs" | median_range) ms, CPU $(awk '{print $2}' "$runs" | median) µs/req $(notes_of "$runs" 9 | sed 's/^- //; s/^-$//')"
    done
  done
  echo "#   load: taskset -c 1 oha -z ${DURATION}s -q RATE -c 50 --latency-correction --insecure https://127.0.0.1:$PORT/64; nbthread 2 on CPU(s) $LAT_CPUS"
  mkdir -p "$(dirname "$LAT_PNG")"
  if python3 bench/tls_plot.py "$LAT_PNG" "$list" "CPU $LAT_CPUS, $DURATION s × $RUNS runs" > "$WORK/plot.out" 2>&1; then
    echo "#   plot: $LAT_PNG ($(cat "$WORK/plot.out"))"
  else
    echo "#   plot FAILED: $(tail -3 "$WORK/plot.out" | tr '\n' ' ')"
  fi
}

flood_scenario() {
  local px runs r
  runs_reset
  for r in $(seq 0 $((RUNS - 1))); do
    for px in $(round_order "$r"); do
      unstolen flood_run "$px" "$r" >> "$WORK/runs.$px"
    done
  done
  set_base tls-flood 6
  for px in $PROXIES; do
    runs="$WORK/runs.$px"
    if grep -q failed "$runs"; then failed_row tls-flood "$px" "$runs"; continue; fi
    row tls-flood "$px" "$(awk '{print $1}' "$runs" | median) req/s + $(awk '{print $8}' "$runs" | median) hs/s" \
      "p50 $(awk '{print $5}' "$runs" | median) p99 $(awk '{print $6}' "$runs" | median_range) p99.9 $(awk '{print $7}' "$runs" | median) ms" \
      "$(busy_med "$runs" 3 4)" "$(ratio tls-flood "$(awk '{print $6}' "$runs" | median)")" "(÷haproxy: p99) $(notes_of "$runs" 9 | sed 's/^- //; s/^-$//')"
  done
  echo "#   load: taskset -c 1 oha -z ${DURATION}s -q $FLOOD_RATE -c 50 --latency-correction https://127.0.0.1:$PORT/64 while $HS_CLIENTS × taskset -c 1 openssl s_time -new -www /64 -time $DURATION; nbthread 1 on CPU 0"
}

ws_scenario() {
  local sc=tls-ws px runs
  declare -A chk=()
  if [ "$CHECK" = 1 ]; then
    for px in $PROXIES; do
      chk[$px]=$(tls_check "$px" tests/tls/www-ecdsa.pem ws taskset -c 1 python3 bench/ws_client.py "$PORT" 200 "$WS_CONC" "$CA")
    done
  fi
  runs_reset
  for r in $(seq 0 $((RUNS - 1))); do
    for px in $(round_order "$r"); do unstolen ws_run "$px" >> "$WORK/runs.$px"; done
  done
  set_base "$sc" 4
  for px in $PROXIES; do
    runs="$WORK/runs.$px"
    if grep -q failed "$runs"; then failed_row "$sc" "$px" "$runs"; else
      row "$sc" "$px" "total $(awk '{print $1}' "$runs" | median_range) s" \
        "hs $(awk '{print $2}' "$runs" | median) ms, msg $(awk '{print $3}' "$runs" | median) ms" \
        "$(busy_med "$runs" 6 7)" "$(ratio "$sc" "$(awk '{print $4}' "$runs" | median)")" \
        "(÷haproxy: peak RSS) peak RSS $(awk '{print $4}' "$runs" | median_range) KiB, CPU $(awk '{print $5}' "$runs" | median_range) µs/conn, hs $(awk '{print $2}' "$runs" | median_range) ms, msg $(awk '{print $3}' "$runs" | median_range) ms $(notes_of "$runs" 8)"
    fi
    [ -z "${chk[$px]:-}" ] || check_row "$sc" "$px" "${chk[$px]}" full
  done
  echo "#   load: taskset -c 1 python3 bench/ws_client.py $PORT $WS_CONNS $WS_CONC $CA (echo: bench/ws_echo.py on CPU 1)"
}

# tls-idle's check load: 20 idle TLS clients (bench/idle_conns.py holds them until killed).
idle_check_load() {
  local pid
  taskset -c 1 python3 bench/idle_conns.py "$PORT" 20 --tls < /dev/null > "$WORK/idle-check.out" 2>&1 &
  pid=$!
  for _ in $(seq 300); do [ -s "$WORK/idle-check.out" ] && break; exited "$pid" && break; sleep 0.1; done
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
}

idle_scenario() {
  local sc=tls-idle px runs kib
  declare -A chk=()
  if [ "$CHECK" = 1 ]; then
    for px in $PROXIES; do
      chk[$px]=$(tls_check "$px" tests/tls/www-ecdsa.pem nginx idle_check_load)
    done
  fi
  runs_reset
  for r in $(seq 0 $((RUNS - 1))); do
    for px in $(round_order "$r"); do idle_run "$px" >> "$WORK/runs.$px"; done
  done
  set_base "$sc" 1
  for px in $PROXIES; do
    runs="$WORK/runs.$px"
    if grep -q failed "$runs"; then failed_row "$sc" "$px" "$runs"; else
      kib=$(awk '{print $1}' "$runs" | median_range)
      row "$sc" "$px" "$TLS_IDLE idle TLS conns" "$kib KiB/conn" "-" "$(ratio "$sc" "${kib%% *}")" \
        "RSS before -> after (last run): $(tail -1 "$runs" | awk '{ s = $2 " -> " $3 " KiB"; for (i = 4; i <= NF; i++) s = s " " $i; print s }')"
    fi
    [ -z "${chk[$px]:-}" ] || check_row "$sc" "$px" "${chk[$px]}" full
  done
  echo "#   load: taskset -c 1 python3 bench/idle_conns.py $PORT $TLS_IDLE --tls"
}

row scenario proxy rate cost "busy0/1%" "÷haproxy"
for sc in "${todo[@]}"; do
  case "$sc" in
    tls-hs-ecdsa) hs_scenario "$sc" tests/tls/www-ecdsa.pem -new full ;;
    tls-hs-rsa) hs_scenario "$sc" tests/tls/www-rsa.pem -new full ;;
    tls-hs-resumed) hs_scenario "$sc" tests/tls/www-ecdsa.pem -reuse resumed ;;
    tls-ka) ka_scenario ;;
    tls-latency) lat_scenario ;;
    tls-ws) ws_scenario ;;
    tls-idle) idle_scenario ;;
    tls-flood) flood_scenario ;;
  esac
done
