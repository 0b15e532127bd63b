#!/usr/bin/env bash
# Side-by-side benchmark: Bascule, haproxy and nginx in front of the same nginx backends (two
# ports, a 64 B and a 1 MiB static file), with the same load generators, the proxy pinned alone on
# CPU 0 (`taskset -c 0`, one thread / one worker) and the backends plus the load generator on
# CPU 1. Bascule and haproxy read the same configuration, bench/proxy.cfg.
#
# Usage: bench/run.sh [SCENARIO...]     (default: all of them, in this order)
#   http-ka            (S1)  mode http, keep-alive, 64 B responses, 50 connections, wrk saturating
#   http-rate          (S1r) the same at a fixed RATE req/s with oha -q: CPU per request at an
#                            equal rate (CPU ticks over the window ÷ requests oha completed)
#   http-close         (S2)  mode http, a new client connection per request (wrk sends
#                            `Connection: close`), 64 B, 50 connections, `http-reuse safe`
#   http-close-always  (S2a) the same with `http-reuse always` (nginx always reuses its upstream
#                            connections: `keepalive 64`)
#   http-big           (S3)  mode http, keep-alive, 1 MiB responses, 10 connections, wrk
#                            saturating, `option splice-auto`: Gbit/s and CPU-µs per MiB
#   tcp-big            (S4)  mode tcp, the same 1 MiB file over keep-alive through the tunnel, 10
#                            connections, `option splice-auto` (nginx's stream proxy has no splice
#                            and runs as is): Gbit/s and CPU-µs per MiB
#   latency            (S5)  mode http, keep-alive, 64 B, 50 connections, oha at the fixed rate
#                            LAT_RATE with --latency-correction: p50 / p99 / p99.9 latency in ms
#   idle               (S6)  mode http, RSS of the proxy (with nginx's worker) holding IDLE
#                            keep-alive client connections, each after one request: KiB per idle
#                            connection (client: bench/idle_conns.py, pinned on CPU 1), opened
#                            one by one (connect, request, response, then the next)
#   idle-burst         (S6b) the same, the connections arriving BURST at a time (connect BURST,
#                            send a request on each, read the BURST responses, then the next
#                            BURST), so that BURST sessions are live at once, as real clients
#                            arrive
#   tcp-ka                   mode tcp, keep-alive through the tunnel, 64 B, 50 connections
#   tcp-close                mode tcp, a new client connection per request, 64 B
#   http-rules         (S7)  S1's keep-alive 64 B traffic, 50 connections, wrk saturating, through
#                            a rule-heavy configuration that Bascule and haproxy both load:
#                            bench/rules.cfg (20 ACLs on the path, the query, the method, headers, a
#                            cookie, the source and a variable; 10 http-request rules: set-header
#                            with %[...] values, a map lookup, set-var then var, del-header,
#                            capture, a deny and a redirect that do not fire), its 10,000-entry map
#                            and 10,000-network ACL file written by bench/gen_rules.py. The request
#                            is a browser-like one (bench/rules-traffic.sh: a path with a query
#                            string, 7 headers). Before the runs, each proxy is checked: that
#                            request answers 200, a bot's 403 (deny), a POST to /api/ 302
#                            (redirect); the "check" row shows the statuses.
#   http-rules-off     (S7o) S7's request through bench/proxy.cfg (no rules): S7's baseline, to
#                            run in the same invocation (`bench/run.sh http-ka http-rules-off
#                            http-rules`) so that the cost of the rules is S7 ÷ S7o in one run.
#   http-rules-rate    (S7r) S7 at the fixed rate RATE with oha -q (50 connections), and
#   http-rules-off-rate (S7or) S7o likewise: the rules' CPU per request at an equal rate, where
#                            neither proxy nor load generator saturates and both proxies see the
#                            same arrivals (`bench/run.sh http-rules-off-rate http-rules-rate`)
#   http-stick         (S8)  S1's keep-alive 64 B traffic with `nbthread 2` (both threads pinned
#                            on CPU 0 like every proxy) through bench/stick.cfg: every request
#                            tracked by source in a stick table (`http-request track-sc0 src`) and
#                            checked against a rate limit it never reaches (`http-request deny if
#                            { sc_http_req_rate(0) gt 1000000000 }`)
#   http-stick-off     (S8o) the same two threads through bench/stick-off.cfg (no table, no
#                            rules): S8's baseline, to run in the same invocation
# The issue's names are accepted as aliases (s1 s1r s2 s2a s3 s4 s5 s6 s6b s7 s7o, any case).
#
# Environment:
#   DURATION   seconds per measured run (default 10; each run has a 2 s warm-up before it)
#   RUNS       measured runs per scenario and proxy (default 3); figures are "median [min..max]"
#   PROXIES    which proxies (default "haproxy bascule nginx"); round k runs them in this
#              order rotated by k places, so that no proxy always follows the same one
#   RATE       http-rate's fixed rate in req/s (default 10000)
#   LAT_RATE   latency's fixed rate in req/s (default 5000, where the load core is not
#              saturated); a list such as "5000 10000" runs each rate. LAT_RATES is an alias.
#   IDLE       idle's number of connections (default 5000; must stay below proxy.cfg's maxconn
#              6000, or haproxy and Bascule stop accepting and the client reports a timeout)
#   BURST      idle-burst's connections opened at once (default 250)
#   IDLE_WAIT  seconds between the client's "ready" (the last response read) and the RSS reading
#              in idle and idle-burst (default 1; the poll for "ready" adds up to 0.15 s)
#   SYSCALLS   1 (default) or 0: syscalls per request for http-ka, http-close,
#              http-close-always, tcp-ka and tcp-close, from one extra short run per proxy with
#              the proxy under `strace -f -c` (strace itself pinned on CPU 0; for nginx the master
#              is traced and its worker followed): syscalls ÷ requests wrk completed, and the top
#              4 syscalls per request. Startup and shutdown syscalls are included (a few hundred,
#              negligible over a run). The strace run never feeds the CPU figures.
#   SYSCALL_SECS  length of that strace run (default 3)
#   STEAL_MAX  percent of CPU time the hypervisor may give to other guests during a measured run
#              (default 5); a run stolen more is repeated, see STEAL_RETRIES
#   PORT       the proxy's port (default 18080); the backends listen on PORT+1 and PORT+2
#   BASCULE    the Bascule binary to measure (default: target/release/bascule, built first), e.g. an
#              older build to compare with in the same conditions
#   STEAL_RETRIES  how many times a stolen run is repeated (default 2; 0 keeps every run as it
#              came). The last attempt is kept whatever its steal, with the note "retried=N".
#
# Runs are interleaved (run 1 of every proxy, then run 2...), so that a drift of this shared
# machine's speed does not favour one proxy. For each scenario and proxy a line gives: the rate
# (req/s, or Gbit/s from wrk's Transfer/sec for the 1 MiB scenarios); the cost: the proxy's CPU
# time per request (or per MiB read by wrk), i.e. utime+stime of all its threads (and of nginx's
# worker children) from /proc/PID/stat over the measured window, divided by the requests the load
# generator completed; how busy each core was (medians; a load core at ~100% means the run
# measured the client, not the proxy); the ratio of the median cost to haproxy's; and, for the
# CPU scenarios, "paired M [min..max]": the median over runs of the cost divided by haproxy's in
# the same round, which a host changing speed between rounds disturbs less. The last column
# notes anything abnormal: time the hypervisor gave to other guests (steal=N%, from /proc/stat,
# when STEAL_MAX% or more of the run, even after the retries: its figures are then suspect; a
# run measured again because of steal says retried=N), wrk's socket errors and non-2xx
# responses, oha's errors, the idle client's retried connects, a proxy that did not exit cleanly
# when stopped (proxy_killed_by_signal_N); a proxy that died during a run voids it ("did not run"). Lines
# starting with "#" (a header with CPU, kernel and versions) and the table can be pasted into
# docs/BENCHMARKS.md together with the command line.
#
# Ports PORT (default 18080: the proxy), PORT+1 and PORT+2 (backends) must be free: the script
# stops if another process (another benchmark run) listens there, since a proxy of another run
# going away in the middle of a measurement shows up as "connection refused". On a machine shared
# with other runs, give each its own PORT (the configurations' 18080-18082 are rewritten).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10}
RUNS=${RUNS:-3}
PROXIES=${PROXIES:-"haproxy bascule nginx"}
ALL="http-ka http-rate http-close http-close-always http-big tcp-big latency idle idle-burst tcp-ka tcp-close http-rules-off http-rules http-rules-off-rate http-rules-rate http-stick-off http-stick"
SCENARIOS=${*:-$ALL}
RATE=${RATE:-10000}
LAT_RATE=${LAT_RATE:-${LAT_RATES:-5000}}
IDLE=${IDLE:-5000}
BURST=${BURST:-250}
IDLE_WAIT=${IDLE_WAIT:-1}
SYSCALLS=${SYSCALLS:-1}
SYSCALL_SECS=${SYSCALL_SECS:-3}
STEAL_MAX=${STEAL_MAX:-5}
STEAL_RETRIES=${STEAL_RETRIES:-2}
PORT=${PORT:-18080}
BASCULE=${BASCULE:-}
BE1=$((PORT + 1))
BE2=$((PORT + 2))
# shellcheck source=bench/lib.sh
. bench/lib.sh
PROXY_CPUS=0
PROXY_SED=()
export PATH="$HOME/.cargo/bin:$PATH"

canon() { # scenario name or alias -> name
  case "${1,,}" in
    http-ka|s1) echo http-ka ;;
    http-rate|s1r) echo http-rate ;;
    http-close|s2) echo http-close ;;
    http-close-always|s2a) echo http-close-always ;;
    http-big|s3) echo http-big ;;
    tcp-big|s4) echo tcp-big ;;
    latency|s5) echo latency ;;
    idle|s6) echo idle ;;
    idle-burst|s6b) echo idle-burst ;;
    tcp-ka) echo tcp-ka ;;
    tcp-close) echo tcp-close ;;
    http-rules|s7) echo http-rules ;;
    http-rules-off|s7o) echo http-rules-off ;;
    http-rules-rate|s7r) echo http-rules-rate ;;
    http-rules-off-rate|s7or) echo http-rules-off-rate ;;
    http-stick|s8) echo http-stick ;;
    http-stick-off|s8o) echo http-stick-off ;;
    *) return 1 ;;
  esac
}
todo=()
for sc in $SCENARIOS; do
  c=$(canon "$sc") || { echo "unknown scenario '$sc'; known: $ALL (or s1 s1r s2 s2a s3 s4 s5 s6 s6b s7 s7o)" >&2; exit 2; }
  todo+=("$c")
done

# Descriptors: 5,000 idle clients, haproxy's maxconn 6000 with two sockets per connection and
# splice pipes. The proxies and the idle client inherit this limit.
ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
TICK_US=$((1000000 / $(getconf CLK_TCK)))

ports_free "$PORT" "$BE1" "$BE2"

# --- tools -----------------------------------------------------------------------------------
need() { command -v "$1" >/dev/null || missing+=("$2"); }
missing=()
need haproxy haproxy; need nginx nginx; need wrk wrk; need taskset util-linux; need strace strace
need python3 python3; need pgrep procps; need ss iproute2
[ -e /usr/lib/nginx/modules/ngx_stream_module.so ] || missing+=(libnginx-mod-stream)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  # Debian starts the packaged services: they must not compete for the cores.
  systemctl stop nginx haproxy 2>/dev/null || service nginx stop 2>/dev/null || true
  service haproxy stop 2>/dev/null || true
fi
if ! command -v oha >/dev/null; then
  echo "oha not found: installing it with 'cargo install oha --locked' (once, a few minutes)"
  cargo install oha --locked --quiet
fi
# oha >= 1.5 writes JSON with --output-format json, older versions with --json.
if oha --help 2>&1 | grep -q -- '--output-format'; then OHA_JSON=(--output-format json); else OHA_JSON=(--json); fi
if [ -z "$BASCULE" ]; then
  cargo build --release --quiet --bin bascule
  BASCULE=target/release/bascule
fi

# --- header: the machine and the versions, to paste with the results --------------------------
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[ -n "$(git status --porcelain -- src Cargo.toml Cargo.lock 2>/dev/null)" ] && rev="$rev+uncommitted changes"
[ "$BASCULE" = target/release/bascule ] || rev="$BASCULE (given in BASCULE; the tree is at $rev)"
echo "# CPU: $(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo) × $(nproc), kernel $(uname -r)"
echo "# $(haproxy -v | head -1 | cut -d' ' -f1-3), $(nginx -v 2>&1 | cut -d' ' -f3), wrk $(wrk -v 2>&1 | head -1 | cut -d' ' -f2), $(oha --version), $(rustc --version | cut -d' ' -f1-2), bascule $rev"
echo "# $0 ${todo[*]}: DURATION=$DURATION RUNS=$RUNS PROXIES=\"$PROXIES\" RATE=$RATE LAT_RATE=\"$LAT_RATE\" IDLE=$IDLE BURST=$BURST IDLE_WAIT=$IDLE_WAIT PORT=$PORT SYSCALLS=$SYSCALLS STEAL_MAX=$STEAL_MAX STEAL_RETRIES=$STEAL_RETRIES"

# --- processes and cleanup (bench/lib.sh) ---------------------------------------------------------
setup_work

# --- backends: nginx on the load core, two ports, a 64 B and a 1 MiB file --------------------
mkdir -p "$WORK/www"
head -c 64 /dev/zero | tr '\0' 'x' > "$WORK/www/64"
head -c 1048576 /dev/urandom > "$WORK/www/1m"
# shellcheck source=bench/rules-traffic.sh
. bench/rules-traffic.sh
rules_www "$WORK/www"
chmod -R a+rX "$WORK/www"
if [[ " ${todo[*]} " == *" http-rules "* || " ${todo[*]} " == *" http-rules-rate "* ]]; then
  python3 bench/gen_rules.py "$WORK"
  chmod a+r "$WORK/hosts.map" "$WORK/networks.lst"
fi
# The configuration Bascule and haproxy read (bench/rules.cfg for http-rules) and the request's
# extra headers (the http-rules scenarios'); set per scenario.
PROXY_CFG=bench/proxy.cfg
REQ_HDRS=()
start_backends

# One wrk run. $1 proxy $2 mode $3 options $4 reuse $5 path $6 conns $7 close(0|1) $8 unit
# (req or MiB). Prints "rate cost busy0 busy1 [errors]": req/s and CPU-µs/req, or Gbit/s and
# CPU-µs/MiB; or "failed".
wrk_run() {
  local hdr=("${REQ_HDRS[@]}") b0 b1 t0 t1 s0 s1 out reqs rps read tps errs
  start_proxy "$1" "$2" "$3" "$4" || { echo failed; return; }
  [ "$7" = 1 ] && hdr+=(-H "Connection: close")
  taskset -c 1 wrk -t1 -c"$6" -d2s "${hdr[@]}" "http://127.0.0.1:$PORT/$5" >/dev/null 2>&1 || true
  b0=$(core_busy); t0=$(cpu_ticks "$PROXY_PID"); s0=$(steal_ticks)
  out=$(taskset -c 1 wrk -t1 -c"$6" -d"${DURATION}s" "${hdr[@]}" "http://127.0.0.1:$PORT/$5" 2>&1) || true
  t1=$(cpu_ticks "$PROXY_PID"); b1=$(core_busy); s1=$(steal_ticks)
  stop_proxy
  if [ -n "$PROXY_EARLY" ]; then echo "failed: $PROXY_EXIT"; return; fi
  read -r reqs rps read tps errs < <(echo "$out" | wrk_parse)
  if [ "$reqs" = 0 ]; then echo failed; return; fi
  errs="$errs $PROXY_EXIT"
  errs=${errs# }
  if [ "$8" = MiB ]; then
    awk -v read="$read" -v tps="$tps" -v tk=$((t1 - t0)) -v us="$TICK_US" \
      'BEGIN { printf "%.2f %.1f ", tps * 8 / 1e9, tk * us / (read / 1048576) }'
  else
    awk -v r="$reqs" -v rps="$rps" -v tk=$((t1 - t0)) -v us="$TICK_US" \
      'BEGIN { printf "%.0f %.2f ", rps, tk * us / r }'
  fi
  echo "$(busy_pct "$b0" "$b1")${errs:+ERRORS: $errs }$(steal_note "$s0" "$s1")"
}

# One oha run at a fixed rate. $1 proxy $2 rate. Prints
# "achieved_rate cpu_us_per_request busy0 busy1 p50_ms p99_ms p99.9_ms [errors]", or "failed".
oha_run() {
  local b0 b1 t0 t1 s0 s1
  start_proxy "$1" http "" "http-reuse safe" || { echo failed; return; }
  local url="http://127.0.0.1:$PORT/${OHA_PATH:-64}"
  taskset -c 1 oha -z 2s -q "$2" -c 50 --no-tui "${OHA_JSON[@]}" "${REQ_HDRS[@]}" "$url" >/dev/null 2>&1 || true
  b0=$(core_busy); t0=$(cpu_ticks "$PROXY_PID"); s0=$(steal_ticks)
  taskset -c 1 oha -z "${DURATION}s" -q "$2" -c 50 --latency-correction --no-tui "${OHA_JSON[@]}" \
    "${REQ_HDRS[@]}" "$url" > "$WORK/oha.json" 2>"$WORK/oha.err" || true
  t1=$(cpu_ticks "$PROXY_PID"); b1=$(core_busy); s1=$(steal_ticks)
  stop_proxy
  if [ -n "$PROXY_EARLY" ]; then echo "failed: $PROXY_EXIT"; return; fi
  # oha's JSON: summary.total (seconds), statusCodeDistribution {"200": n},
  # errorDistribution {"aborted due to deadline": n (in flight at the end: not errors)},
  # latencyPercentiles {"p50": s, "p99": s, "p99.9": s}.
  python3 - "$WORK/oha.json" $((t1 - t0)) "$TICK_US" "$(busy_pct "$b0" "$b1")" "$PROXY_EXIT" "$(steal_note "$s0" "$s1")" <<'EOF'
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
note = ("ERRORS:%d_non-200,%s" % (bad, errs)).replace(" ", "_") if bad or errs else ""
if sys.argv[5]:
    note = (note + "," if note else "ERRORS:") + sys.argv[5]
if sys.argv[6]:
    note = (note + "," if note else "") + sys.argv[6]
print("%.0f %.2f %s %.3f %.3f %.3f %s" % (ok / d["summary"]["total"], int(sys.argv[2]) * int(sys.argv[3]) / ok,
      sys.argv[4], p["p50"] * 1e3, p["p99"] * 1e3, p["p99.9"] * 1e3, note))
EOF
}

# Syscalls per request: a SYSCALL_SECS wrk run with the proxy (strace pinned on CPU 0) under
# `strace -f -c`. $1 proxy $2 mode $3 reuse $4 close. Prints
# "total_per_request name=per_request ..." (the top 4), or "failed".
syscall_run() {
  local hdr=("${REQ_HDRS[@]}") out reqs total top
  rm -f "$WORK/strace.txt"
  start_proxy "$1" "$2" "" "$3" "strace -f -c -o $WORK/strace.txt" || { echo failed; return; }
  [ "$4" = 1 ] && hdr+=(-H "Connection: close")
  out=$(taskset -c 1 wrk -t1 -c50 -d"${SYSCALL_SECS}s" "${hdr[@]}" "http://127.0.0.1:$PORT/$5" 2>&1) || true
  stop_proxy traced
  if [ -n "$PROXY_EARLY" ]; then echo "failed: $PROXY_EXIT"; return; fi
  reqs=$(echo "$out" | wrk_parse | cut -d' ' -f1)
  if [ "$reqs" = 0 ] || [ ! -s "$WORK/strace.txt" ]; then echo failed; return; fi
  # strace -c: "% time  seconds  usecs/call  calls  [errors]  syscall", then a "total" line.
  total=$(awk '$NF == "total" { print $4 }' "$WORK/strace.txt")
  top=$(awk '$NF != "total" && NF >= 5 && $4 ~ /^[0-9]+$/ { print $4, $NF }' "$WORK/strace.txt" |
    sort -nr | awk -v r="$reqs" 'NR <= 4 { printf "%s%s=%.2f", (NR > 1 ? " " : ""), $2, $1 / r }')
  awk -v t="$total" -v r="$reqs" -v top="$top" 'BEGIN { printf "%.2f %s\n", t / r, top }'
}

# idle: $1 proxy, $2 connections opened at once (1: one by one). Prints "KiB-per-conn
# rss-before rss-after [retries=K]", or "failed: reason". The RSS is read IDLE_WAIT s after the
# client said "ready" (all its responses read), plus up to 0.15 s of polling for that line.
idle_run() {
  local before after line
  start_proxy "$1" http "" "http-reuse safe" || { echo "failed: the proxy did not start"; return; }
  sleep 0.3
  before=$(rss_tree_kib "$PROXY_PID")
  # The client runs in the background, writes one line ("ready" or "failed: ...") to a file
  # and holds its connections until killed.
  : > "$WORK/idle.out"
  taskset -c 1 python3 bench/idle_conns.py "$PORT" "$IDLE" --burst "$2" < /dev/null > "$WORK/idle.out" 2>&1 &
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
    ready*) awk -v a="$after" -v b="$before" -v n="$IDLE" -v note="${line#ready}" \
              'BEGIN { printf "%.2f %d %d%s\n", (a - b) / n, b, a, note }' ;;
    *) echo "$line" ;;
  esac
}


# The http-rules check: proxy $1 answers the load's request (200), denies a bot (403) and
# redirects a POST to /api/ without credentials (302). Prints the three statuses, e.g.
# "200 403 302", or "failed".
rules_check() {
  local a b c url="http://127.0.0.1:$PORT/$RULES_PATH"
  start_proxy "$1" http "" "http-reuse safe" || { echo failed; return; }
  a=$(curl -s -o /dev/null -w '%{http_code}' "${RULES_HDRS[@]}" "$url")
  b=$(curl -s -o /dev/null -w '%{http_code}' "${RULES_HDRS[@]}" -H 'User-Agent: Mozilla/5.0 (compatible; Googlebot/2.1)' "$url")
  c=$(curl -s -o /dev/null -w '%{http_code}' "${RULES_HDRS[@]}" -X POST -d x "http://127.0.0.1:$PORT/api/orders")
  stop_proxy
  echo "$a $b $c"
}

# A wrk scenario: $1 name $2 mode $3 options $4 reuse $5 path $6 conns $7 close(0|1) $8 unit
wrk_scenario() {
  local sc=$1 unit=$8 px opts runs rate cost errs sys
  declare -A check=()
  for px in $PROXIES; do : > "$WORK/runs.$px"; done
  if [ "$PROXY_CFG" = bench/rules.cfg ]; then
    for px in $PROXIES; do [ "$px" = nginx ] || check[$px]=$(rules_check "$px"); done
  fi
  for r in $(seq 0 $((RUNS - 1))); do
    for px in $(round_order "$r"); do
      opts=$3
      [ "$px" = nginx ] && opts=""
      unstolen wrk_run "$px" "$2" "$opts" "$4" "$5" "$6" "$7" "$unit" >> "$WORK/runs.$px"
    done
  done
  set_base "$sc" 2
  for px in $PROXIES; do
    runs="$WORK/runs.$px"
    if grep -q failed "$runs"; then failed_row "$sc" "$px" "$runs"; continue; fi
    if [ "$unit" = MiB ]; then
      rate="$(awk '{print $1}' "$runs" | median_range) Gbit/s"
    else
      rate="$(awk '{print $1}' "$runs" | median_range) req/s"
    fi
    cost=$(awk '{print $2}' "$runs" | median_range)
    errs=$(awk '{$1=$2=$3=$4=""; print}' "$runs" | tr -s ' ' | sort -u | tr '\n' ' ')
    row "$sc" "$px" "$rate" "$cost µs/$unit" "$(busy_med "$runs" 3 4)" "$(ratio "$sc" "${cost%% *}")" "paired $(paired "$runs" 2) $errs"
    if [ -n "${check[$px]:-}" ]; then
      local note="as expected"
      [ "${check[$px]}" = "200 403 302" ] || note="EXPECTED 200 403 302: the rules do not apply as written"
      row "" "" "check: ${check[$px]}" "(load request, bot, POST /api/)" "" "" "$note"
    fi
    if [ "$SYSCALLS" = 1 ] && [ "$unit" = req ]; then
      syscall_run "$px" "$2" "$4" "$7" "$5" > "$WORK/sys.$px"
      read -r sys < "$WORK/sys.$px" || sys=failed
      if [[ $sys == failed* ]]; then
        row "" "" "syscalls/req: strace run $sys" "$(head -c 300 "$WORK/proxy-$px.log" | tr '\n' ' ')"
      else
        row "" "" "syscalls/req: ${sys%% *}" "top: ${sys#* }"
      fi
    fi
  done
}

# An oha scenario at fixed rates: $1 name (latency, or a CPU-at-equal-rate one: http-rate,
# http-rules-rate, http-rules-off-rate) $2 rates
oha_scenario() {
  local sc=$1 q px runs rate cost errs p50 p99 p999
  for q in $2; do
    for px in $PROXIES; do : > "$WORK/runs.$px"; done
    for r in $(seq 0 $((RUNS - 1))); do
      for px in $(round_order "$r"); do unstolen oha_run "$px" "$q" >> "$WORK/runs.$px"; done
    done
    if [ "$sc" != latency ]; then set_base "$sc$q" 2; else set_base "$sc$q" 6; fi
    for px in $PROXIES; do
      runs="$WORK/runs.$px"
      if grep -q failed "$runs"; then failed_row "$sc@$q" "$px" "$runs"; continue; fi
      rate="$(awk '{print $1}' "$runs" | median_range) req/s"
      cost=$(awk '{print $2}' "$runs" | median_range)
      errs=$(awk '{print $8}' "$runs" | sort -u | tr '\n' ' ')
      if [ "$sc" != latency ]; then
        row "$sc@$q" "$px" "$rate" "$cost µs/req" "$(busy_med "$runs" 3 4)" "$(ratio "$sc$q" "${cost%% *}")" "paired $(paired "$runs" 2) $errs"
      else
        # The cost column holds the latencies (medians over the runs); the ratio is p99's.
        p50=$(awk '{print $5}' "$runs" | median); p99=$(awk '{print $6}' "$runs" | median)
        p999=$(awk '{print $7}' "$runs" | median)
        row "$sc@$q" "$px" "$rate" "p50 $p50 p99 $p99 p99.9 $p999 ms" "$(busy_med "$runs" 3 4)" \
          "$(ratio "$sc$q" "$p99")" "(÷haproxy: p99) p99 $(awk '{print $6}' "$runs" | median_range) ms, p99.9 $(awk '{print $7}' "$runs" | median_range) ms, CPU $cost µs/req $errs"
      fi
    done
  done
}

# idle and idle-burst: $1 name $2 connections opened at once
idle_scenario() {
  local sc=$1 px runs kib what="$IDLE idle conns"
  [ "$2" = 1 ] || what="$IDLE idle, $2 at once"
  for px in $PROXIES; do : > "$WORK/runs.$px"; done
  for r in $(seq 0 $((RUNS - 1))); do
    for px in $(round_order "$r"); do idle_run "$px" "$2" >> "$WORK/runs.$px"; done
  done
  set_base "$sc" 1
  for px in $PROXIES; do
    runs="$WORK/runs.$px"
    if grep -q failed "$runs"; then failed_row "$sc" "$px" "$runs"; continue; fi
    kib=$(awk '{print $1}' "$runs" | median_range)
    row "$sc" "$px" "$what" "$kib KiB/conn" "-" "$(ratio "$sc" "${kib%% *}")" \
      "RSS before -> after (last run): $(tail -1 "$runs" | awk '{ s = $2 " -> " $3 " KiB"; for (i = 4; i <= NF; i++) s = s " " $i; print s }')"
  done
}

row scenario proxy rate cost "busy0/1%" "÷haproxy"
for sc in "${todo[@]}"; do
  case "$sc" in
    http-ka) wrk_scenario "$sc" http "" "http-reuse safe" 64 50 0 req ;;
    http-close) wrk_scenario "$sc" http "" "http-reuse safe" 64 50 1 req ;;
    http-close-always) wrk_scenario "$sc" http "" "http-reuse always" 64 50 1 req ;;
    http-big) wrk_scenario "$sc" http "option splice-auto" "http-reuse safe" 1m 10 0 MiB ;;
    tcp-big) wrk_scenario "$sc" tcp "option splice-auto" "" 1m 10 0 MiB ;;
    tcp-ka) wrk_scenario "$sc" tcp "" "" 64 50 0 req ;;
    tcp-close) wrk_scenario "$sc" tcp "" "" 64 50 1 req ;;
    http-rules|http-rules-off)
      # nginx has no haproxy rules: it forwards S7's request as is (like S7o).
      [ "$sc" = http-rules ] && PROXY_CFG=bench/rules.cfg
      REQ_HDRS=("${RULES_HDRS[@]}")
      wrk_scenario "$sc" http "" "http-reuse safe" "$RULES_PATH" 50 0 req
      PROXY_CFG=bench/proxy.cfg
      REQ_HDRS=()
      ;;
    http-stick|http-stick-off)
      [ "$sc" = http-stick ] && PROXY_CFG=bench/stick.cfg
      [ "$sc" = http-stick-off ] && PROXY_CFG=bench/stick-off.cfg
      wrk_scenario "$sc" http "" "http-reuse safe" 64 50 0 req
      PROXY_CFG=bench/proxy.cfg
      ;;
    http-rate) oha_scenario "$sc" "$RATE" ;;
    http-rules-rate|http-rules-off-rate)
      [ "$sc" = http-rules-rate ] && PROXY_CFG=bench/rules.cfg
      REQ_HDRS=("${RULES_HDRS[@]}")
      OHA_PATH=$RULES_PATH
      oha_scenario "$sc" "$RATE"
      PROXY_CFG=bench/proxy.cfg
      REQ_HDRS=()
      OHA_PATH=
      ;;
    latency) oha_scenario "$sc" "$LAT_RATE" ;;
    idle) idle_scenario idle 1 ;;
    idle-burst) idle_scenario idle-burst "$BURST" ;;
  esac
done
