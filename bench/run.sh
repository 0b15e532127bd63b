#!/usr/bin/env bash
# Side-by-side benchmark: Bascule, haproxy and nginx in front of the same nginx backends, with the
# same load generators, the proxy pinned alone on CPU 0 and everything else on CPU 1.
#
# Usage: bench/run.sh [SCENARIO...]     (default: all of them, in this order)
#   s1         mode http, keep-alive, 64 B responses, 50 connections, wrk saturating
#   s1r        the same at a fixed RATE (default 10000) req/s with oha: CPU per request at equal rate
#   s2         mode http, a new client connection per request, 64 B (http-reuse safe)
#   s2a        the same with `http-reuse always` (nginx always reuses its upstream connections)
#   s3         mode http, keep-alive, 1 MiB responses, 10 connections, `option splice-auto`
#   s4         mode tcp, 1 MiB responses over keep-alive through the tunnel, 10 connections,
#              `option splice-auto` (nginx's stream proxy copies: it has no splice)
#   s5         mode http, keep-alive, 64 B, 50 connections, fixed rates LAT_RATES (default
#              "5000 10000") with oha --latency-correction: p50 / p99 / p99.9 latency
#   s6         mode http, RSS of the proxy holding IDLE (default 5000) keep-alive client
#              connections after one request each: KiB per idle connection
#   tcp-ka     mode tcp, keep-alive through the tunnel, 64 B, 50 connections
#   tcp-close  mode tcp, a new client connection per request, 64 B
#
# Environment: DURATION (seconds per measured run, default 10), RUNS (default 3), PROXIES
# (default "haproxy bascule nginx"), RATE, LAT_RATES, IDLE as above, SYSCALLS (default 1: one extra
# 3-second run under `strace -c -f` per proxy for s1, s2, s2a, tcp-ka and tcp-close).
#
# Runs are interleaved (run 1 of every proxy, then run 2...), so that a drift of this shared
# machine's speed does not favour one proxy. For each scenario and proxy it prints the rate, the proxy's CPU time per request (or per MiB):
# utime+stime of all its threads (and nginx's worker children) from /proc/PID/stat over the
# measured window, divided by the requests the load generator completed; how busy each core was
# (a load core at ~100% means the run measured the client); and the ratio of the median to
# haproxy's. With RUNS > 1 figures are "median [min..max]". CPU figures never come from the
# strace run, which slows everything down. Record results in docs/BENCHMARKS.md with the command.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
PROXIES=${PROXIES:-"haproxy bascule nginx"}
SCENARIOS=${*:-"s1 s1r s2 s2a s3 s4 s5 s6 tcp-ka tcp-close"}
RATE=${RATE:-10000}
LAT_RATES=${LAT_RATES:-"5000 10000"}
IDLE=${IDLE:-5000}
SYSCALLS=${SYSCALLS:-1}
ulimit -n 20000 2>/dev/null || true
WORK=$(mktemp -d /tmp/bascule-bench.XXXXXX)
chmod 755 "$WORK" # the backend nginx workers run as www-data
TICK_US=$((1000000 / $(getconf CLK_TCK)))
export PATH="$HOME/.cargo/bin:$PATH"

# --- tools -----------------------------------------------------------------------------------
need() { command -v "$1" >/dev/null || missing+=("$2"); }
missing=()
need haproxy haproxy; need nginx nginx; need wrk wrk; need taskset util-linux; need strace strace
need python3 python3
[ -e /usr/lib/nginx/modules/ngx_stream_module.so ] || missing+=(libnginx-mod-stream)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  # Debian starts the packaged services: they must not compete for the cores.
  pkill -x nginx 2>/dev/null || true; pkill -x haproxy 2>/dev/null || true
fi
if ! command -v oha >/dev/null; then
  echo "installing oha (cargo install oha --locked), once"
  cargo install oha --locked --quiet
fi
cargo build --release --quiet --bin bascule

echo "# CPU: $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo) × $(nproc), kernel $(uname -r)"
echo "# $(haproxy -v | head -1 | cut -d' ' -f1-3), $(nginx -v 2>&1 | cut -d' ' -f3), wrk $(wrk -v 2>&1 | head -1 | cut -d' ' -f2), $(oha --version), $(rustc --version | cut -d' ' -f1-2)"
echo "# DURATION=$DURATION RUNS=$RUNS RATE=$RATE LAT_RATES=\"$LAT_RATES\" IDLE=$IDLE"

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for f in "$WORK"/*.pid; do [ -e "$f" ] && kill "$(cat "$f" 2>/dev/null)" 2>/dev/null; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# --- backends: nginx on the load core, two ports, a 64 B and a 1 MiB file --------------------
mkdir -p "$WORK/www"
head -c 64 /dev/zero | tr '\0' 'x' > "$WORK/www/64"
head -c 1048576 /dev/urandom > "$WORK/www/1m"
chmod -R a+rX "$WORK/www"
sed -e "s#@ROOT@#$WORK/www#" -e "s#@DIR@#$WORK#" bench/backend-nginx.conf > "$WORK/backend.conf"
taskset -c 1 nginx -e "$WORK/backend-error.log" -c "$WORK/backend.conf" & pids+=($!)

wait_port() {
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done
  return 1
}
wait_port 18081 || { echo "backend did not start" >&2; exit 1; }

# --- measuring ---------------------------------------------------------------------------------
# utime+stime (ticks) of a process, all its threads, and its direct children (nginx's workers).
cpu_ticks() {
  local p t=0
  for p in "$1" $(pgrep -P "$1" || true); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
core_busy() { awk '/^cpu[01] /{print $1, $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
busy_pct() { # $1 $2: core_busy before and after -> "busy0 busy1"
  paste <(echo "$1") <(echo "$2") | awk '{ printf "%.0f ", 100 * ($5 - $2) / ($6 - $3) }'
}

# Starts proxy $1 in mode $2 with extra defaults lines $3 and http-reuse $4; echoes its pid.
start_proxy() {
  local px=$1 mode=$2 options=$3 reuse=$4 prefix=${5:-}
  case "$px" in
    bascule|haproxy)
      awk -v mode="$mode" -v opts="$options" -v reuse="$reuse" '
        { gsub(/@MODE@/, mode); gsub(/@REUSE@/, reuse) }
        /^@OPTIONS@$/ { if (opts != "") print "    " opts; next }
        { print }' bench/proxy.cfg > "$WORK/proxy.cfg"
      local bin=haproxy
      [ "$px" = bascule ] && bin=target/release/bascule
      # shellcheck disable=SC2086 # $prefix is a command prefix (strace) or empty
      taskset -c 0 $prefix "$bin" -db -f "$WORK/proxy.cfg" >"$WORK/proxy-$px.log" 2>&1 & ;;
    nginx)
      local conf=bench/nginx-proxy.conf
      [ "$mode" = tcp ] && conf=bench/nginx-stream.conf
      { [ "$mode" = tcp ] && echo "load_module /usr/lib/nginx/modules/ngx_stream_module.so;"; cat "$conf"; } |
        sed "s#@DIR@#$WORK#" > "$WORK/proxy-nginx.conf"
      # shellcheck disable=SC2086
      taskset -c 0 $prefix nginx -e "$WORK/proxy-error.log" -c "$WORK/proxy-nginx.conf" >"$WORK/proxy-$px.log" 2>&1 & ;;
  esac
  echo $!
}

stop_proxy() { # $1 pid
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  if [ -e "$WORK/proxy-nginx.pid" ]; then
    kill "$(cat "$WORK/proxy-nginx.pid" 2>/dev/null)" 2>/dev/null || true
    rm -f "$WORK/proxy-nginx.pid"
  fi
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/18080) 2>/dev/null || return 0; sleep 0.1; done
}

# One wrk run. $1 proxy $2 mode $3 options $4 reuse $5 path $6 conns $7 close(0|1).
# Prints "rate cpu_us_per_request busy0 busy1 errors".
wrk_run() {
  local pid hdr=() b0 b1 t0 t1 out reqs errs
  pid=$(start_proxy "$1" "$2" "$3" "$4")
  if ! wait_port 18080; then stop_proxy "$pid"; echo failed; return; fi
  [ "$7" = 1 ] && hdr=(-H "Connection: close")
  taskset -c 1 wrk -t1 -c"$6" -d2s "${hdr[@]}" "http://127.0.0.1:18080/$5" >/dev/null 2>&1 || true
  b0=$(core_busy); t0=$(cpu_ticks "$pid")
  out=$(taskset -c 1 wrk -t1 -c"$6" -d"${DURATION}s" "${hdr[@]}" "http://127.0.0.1:18080/$5" 2>&1) || true
  t1=$(cpu_ticks "$pid"); b1=$(core_busy)
  stop_proxy "$pid"
  reqs=$(echo "$out" | awk '/requests in/{print $1}')
  errs=$(echo "$out" | awk '/Non-2xx|Socket errors/{gsub(/ +/, "_"); printf "%s ", $0}')
  if [ -z "$reqs" ] || [ "$reqs" = 0 ]; then echo failed; return; fi
  echo "$(awk -v r="$reqs" -v d="$DURATION" -v tk=$((t1 - t0)) -v us="$TICK_US" \
    'BEGIN { printf "%.0f %.2f", r / d, tk * us / r }') $(busy_pct "$b0" "$b1") $errs"
}

# One oha run at a fixed rate. $1 proxy $2 rate. Prints
# "achieved_rate cpu_us_per_request busy0 busy1 p50_ms p99_ms p99.9_ms errors".
oha_run() {
  local pid b0 b1 t0 t1
  pid=$(start_proxy "$1" http "" "http-reuse safe")
  if ! wait_port 18080; then stop_proxy "$pid"; echo failed; return; fi
  taskset -c 1 oha -z 2s -q "$2" -c 50 --no-tui --output-format quiet "http://127.0.0.1:18080/64" >/dev/null 2>&1 || true
  b0=$(core_busy); t0=$(cpu_ticks "$pid")
  taskset -c 1 oha -z "${DURATION}s" -q "$2" -c 50 --latency-correction --no-tui \
    --output-format json "http://127.0.0.1:18080/64" > "$WORK/oha.json" 2>/dev/null || true
  t1=$(cpu_ticks "$pid"); b1=$(core_busy)
  stop_proxy "$pid"
  python3 - "$WORK/oha.json" $((t1 - t0)) "$TICK_US" "$(busy_pct "$b0" "$b1")" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print("failed"); sys.exit()
ok = d["statusCodeDistribution"].get("200", 0)
if ok == 0:
    print("failed"); sys.exit()
bad = sum(v for k, v in d["statusCodeDistribution"].items() if k != "200")
errs = {k: v for k, v in d["errorDistribution"].items() if "deadline" not in k}
p = d["latencyPercentiles"]
note = ("ERRORS:%d_non-200,%s" % (bad, errs)).replace(" ", "") if bad or errs else ""
print("%.0f %.2f %s %.3f %.3f %.3f %s" % (ok / d["summary"]["total"], int(sys.argv[2]) * int(sys.argv[3]) / ok,
      sys.argv[4], p["p50"] * 1e3, p["p99"] * 1e3, p["p99.9"] * 1e3, note))
EOF
}

# Syscalls per request: a 3 s wrk run with the proxy under strace -c -f. $1 proxy $2 mode
# $3 reuse $4 close. Prints "total_per_request top:name=count,...".
syscall_run() {
  local pid hdr=() out reqs child
  pid=$(start_proxy "$1" "$2" "" "$3" "strace -f -c -o $WORK/strace.txt")
  if ! wait_port 18080; then stop_proxy "$pid"; echo failed; return; fi
  [ "$4" = 1 ] && hdr=(-H "Connection: close")
  out=$(taskset -c 1 wrk -t1 -c50 -d3s "${hdr[@]}" "http://127.0.0.1:18080/64" 2>&1) || true
  reqs=$(echo "$out" | awk '/requests in/{print $1}')
  # Stop the traced proxy, not strace, so that strace writes its summary as the proxy exits.
  child=$(pgrep -P "$pid" | head -1)
  if [ "$1" = nginx ]; then kill "$(cat "$WORK/proxy-nginx.pid" 2>/dev/null)" 2>/dev/null || true; rm -f "$WORK/proxy-nginx.pid"
  else kill "$child" 2>/dev/null || true; fi
  wait "$pid" 2>/dev/null || true
  stop_proxy "$pid"
  [ -n "$reqs" ] && [ "$reqs" != 0 ] || { echo failed; return; }
  local total top
  total=$(awk '$NF == "total" { print $4 }' "$WORK/strace.txt")
  top=$(awk 'NF >= 5 && $4 ~ /^[0-9]+$/ && $NF != "total" { print $NF, $4 }' "$WORK/strace.txt" |
    sort -k2 -nr | head -5 | awk -v r="$reqs" '{ printf "%s=%.2f,", $1, $2 / r }')
  awk -v t="$total" -v r="$reqs" -v top="$top" 'BEGIN { printf "%.2f %s\n", t / r, top }'
}

rss_kib() { awk '/^VmRSS:/{print $2}' "/proc/$1/status"; }
rss_tree_kib() { # the process and its direct children (nginx's workers)
  local p t=0
  for p in "$1" $(pgrep -P "$1" || true); do t=$((t + $(rss_kib "$p" 2>/dev/null || echo 0))); done
  echo "$t"
}

# S6: prints "KiB-per-conn rss-before rss-after".
idle_run() {
  local pid before after line
  pid=$(start_proxy "$1" http "" "http-reuse safe")
  if ! wait_port 18080; then stop_proxy "$pid"; echo failed; return; fi
  sleep 0.3
  before=$(rss_tree_kib "$pid")
  coproc HOLD { taskset -c 1 python3 bench/idle_conns.py 18080 "$IDLE"; }
  read -r line <&"${HOLD[0]}" || line=failed
  sleep 1
  after=$(rss_tree_kib "$pid")
  kill "$HOLD_PID" 2>/dev/null; wait "$HOLD_PID" 2>/dev/null || true
  stop_proxy "$pid"
  [ "$line" = ready ] || { echo failed; return; }
  awk -v a="$after" -v b="$before" -v n="$IDLE" 'BEGIN { printf "%.2f %d %d\n", (a - b) / n, b, a }'
}

median_range() { # column of numbers -> "median [min..max]"
  sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "-"; exit}
    if (NR == 1) { print v[1]; exit }
    printf "%s [%s..%s]", v[int((NR+1)/2)], v[1], v[NR]}'
}
median() { sort -g | awk '{v[NR]=$1} END { if (NR) print v[int((NR+1)/2)] }'; }

# haproxy's median per scenario, for the ratio column (set outside of command substitutions).
declare -A base=()
note_base() { [ "$2" = haproxy ] && base[$1]=$3 || true; }
ratio() { # $1 scenario key $2 proxy $3 median
  if [ -n "${base[$1]:-}" ]; then awk -v a="$3" -v b="${base[$1]}" 'BEGIN{printf "%.2f", a / b}'; else echo "-"; fi
}

row() { printf '%-9s %-8s %-26s %-28s %-8s %-6s %s\n' "$@"; }

# A wrk scenario: $1 name $2 mode $3 options $4 reuse $5 path $6 conns $7 close $8 unit
wrk_scenario() {
  local sc=$1 unit=$8 px rate cost busy errs sys
  local opts runs
  for px in $PROXIES; do : > "$WORK/runs.$px"; done
  for _ in $(seq "$RUNS"); do
    for px in $PROXIES; do
      opts=$3
      [ "$px" = nginx ] && opts=""
      wrk_run "$px" "$2" "$opts" "$4" "$5" "$6" "$7" >> "$WORK/runs.$px"
    done
  done
  for px in $PROXIES; do
    runs="$WORK/runs.$px"
    if grep -q failed "$runs"; then
      row "$sc" "$px" "did not run: $(head -c 300 "$WORK/proxy-$px.log" | tr '\n' ' ')"; continue
    fi
    if [ "$unit" = MiB ]; then
      # 1 MiB per request: Gbit/s and CPU-µs per MiB are the same figures scaled.
      rate=$(awk '{printf "%.2f\n", $1 * 8 * 1048576 / 1e9}' "$runs" | median_range)" Gbit/s"
    else
      rate=$(awk '{print $1}' "$runs" | median_range)" req/s"
    fi
    cost=$(awk '{print $2}' "$runs" | median_range)
    busy=$(awk '{print $3 "/" $4}' "$runs" | tail -1)
    errs=$(awk '{$1=$2=$3=$4=""; print}' "$runs" | tr -s ' ' | sort -u | tr '\n' ' ')
    note_base "$sc" "$px" "${cost%% *}"
    row "$sc" "$px" "$rate" "$cost µs/$unit" "$busy" "$(ratio "$sc" "$px" "${cost%% *}")" "$errs"
    if [ "$SYSCALLS" = 1 ] && [ "$unit" = req ]; then
      sys=$(syscall_run "$px" "$2" "$4" "$7")
      row "" "" "syscalls/req: ${sys%% *}" "${sys#* }"
    fi
  done
}

row scenario proxy rate cost "busy0/1%" "÷haproxy"
for sc in $SCENARIOS; do
  case "$sc" in
    s1) wrk_scenario s1 http "" "http-reuse safe" 64 50 0 req ;;
    s2) wrk_scenario s2 http "" "http-reuse safe" 64 50 1 req ;;
    s2a) wrk_scenario s2a http "" "http-reuse always" 64 50 1 req ;;
    s3) wrk_scenario s3 http "option splice-auto" "http-reuse safe" 1m 10 0 MiB ;;
    s4) wrk_scenario s4 tcp "option splice-auto" "" 1m 10 0 MiB ;;
    tcp-ka) wrk_scenario tcp-ka tcp "" "" 64 50 0 req ;;
    tcp-close) wrk_scenario tcp-close tcp "" "" 64 50 1 req ;;
    s1r|s5)
      rates=$RATE
      [ "$sc" = s5 ] && rates=$LAT_RATES
      for q in $rates; do
        for px in $PROXIES; do : > "$WORK/runs.$px"; done
        for _ in $(seq "$RUNS"); do
          for px in $PROXIES; do oha_run "$px" "$q" >> "$WORK/runs.$px"; done
        done
        for px in $PROXIES; do
          runs="$WORK/runs.$px"
          if grep -q failed "$runs"; then row "$sc@$q" "$px" "did not run"; continue; fi
          rate=$(awk '{print $1}' "$runs" | median_range)" req/s"
          busy=$(awk '{print $3 "/" $4}' "$runs" | tail -1)
          errs=$(awk '{print $8}' "$runs" | sort -u | tr '\n' ' ')
          if [ "$sc" = s1r ]; then
            cost=$(awk '{print $2}' "$runs" | median_range)
            note_base "s1r$q" "$px" "${cost%% *}"
            row "s1r@$q" "$px" "$rate" "$cost µs/req" "$busy" "$(ratio "s1r$q" "$px" "${cost%% *}")" "$errs"
          else
            p50=$(awk '{print $5}' "$runs" | median); p99=$(awk '{print $6}' "$runs" | median)
            p999=$(awk '{print $7}' "$runs" | median_range)
            row "s5@$q" "$px" "$rate" "p50 $p50 p99 $p99 ms" "$busy" "-" "p99.9: $p999 ms $errs"
          fi
        done
      done ;;
    s6)
      for px in $PROXIES; do : > "$WORK/runs.$px"; done
      for _ in $(seq "$RUNS"); do
        for px in $PROXIES; do idle_run "$px" >> "$WORK/runs.$px"; done
      done
      for px in $PROXIES; do
        runs="$WORK/runs.$px"
        if grep -q failed "$runs"; then row s6 "$px" "did not run"; continue; fi
        kib=$(awk '{print $1}' "$runs" | median_range)
        note_base s6 "$px" "${kib%% *}"
        row s6 "$px" "$IDLE idle conns" "$kib KiB/conn" "-" "$(ratio s6 "$px" "${kib%% *}")" \
          "RSS before/after (last run): $(tail -1 "$runs" | awk '{print $2 " -> " $3 " KiB"}')"
      done ;;
    *) echo "unknown scenario $sc" >&2; exit 2 ;;
  esac
done
