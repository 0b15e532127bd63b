#!/usr/bin/env bash
# Helpers shared by bench/run.sh and bench/tls.sh: ports, starting and stopping the proxies and
# the nginx backends, CPU and steal accounting from /proc, medians and the table rows. Sourced
# (`. bench/lib.sh`) after the script has set PORT, BE1, BE2, PROXIES, STEAL_MAX, STEAL_RETRIES and
# BASCULE; functions only, apart from a few globals they share. start_proxy reads PROXY_CFG (the
# haproxy-syntax file Bascule and haproxy both read), PROXY_CPUS (the CPU list the proxy is pinned
# on, default 0) and PROXY_SED (extra `sed -e` arguments for the configuration's @PLACEHOLDERS@).

# The configurations name ports 18080-18082: rewritten to PORT, PORT+1, PORT+2.
ports() { sed -e "s/18080/$PORT/g; s/18081/$BE1/g; s/18082/$BE2/g"; }

port_busy() { (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null; }
ports_free() { # $@ ports: exits if one is in use (another benchmark run?)
  local port
  for port in "$@"; do
    if port_busy "$port"; then
      echo "port $port is in use (another benchmark run?):" >&2
      ss -ltnp "sport = :$port" >&2 || true
      exit 1
    fi
  done
}

# --- processes and cleanup ------------------------------------------------------------------------
# Every process the script starts is a direct child of this shell (no command substitution around
# a start), so that `wait` reaps it and the trap below can stop it if the script is interrupted.
BACKEND_PID=
PROXY_PID=
CLIENT_PID=
EXTRA_PIDS= # other helpers a script starts (bench/tls.sh's WebSocket echo server)
kill_tree() { # $1 pid: itself, then the children it had (nginx's workers, strace's tracee)
  local kids
  [ -n "$1" ] || return 0
  kids=$(pgrep -P "$1" || true)
  kill "$1" 2>/dev/null || true
  for k in $kids; do kill "$k" 2>/dev/null || true; done
}
cleanup() {
  set +e
  kill_tree "$CLIENT_PID"; kill_tree "$PROXY_PID"; kill_tree "$BACKEND_PID"
  for p in $EXTRA_PIDS; do kill_tree "$p"; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
setup_work() { # WORK: a fresh directory, removed (and every process started stopped) on exit
  WORK=$(mktemp -d /tmp/bascule-bench.XXXXXX)
  chmod 755 "$WORK" # the backend nginx workers run as www-data
  trap cleanup EXIT
  trap 'exit 130' INT TERM HUP
}

# exited PID: true once the process is gone or a zombie
exited() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) || return 0; [[ $s == Z* ]]; }

wait_port() {
  for _ in $(seq 100); do port_busy "$1" && return 0; sleep 0.05; done
  return 1
}

# The nginx backends on the load core (CPU 1), ports BE1 and BE2, serving $WORK/www.
start_backends() {
  sed -e "s#@ROOT@#$WORK/www#" -e "s#@DIR@#$WORK#" bench/backend-nginx.conf | ports > "$WORK/backend.conf"
  taskset -c 1 nginx -e "$WORK/backend-error.log" -c "$WORK/backend.conf" & BACKEND_PID=$!
  if ! wait_port $BE1 || ! wait_port $BE2; then echo "backend did not start" >&2; exit 1; fi
}

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
# Time the hypervisor gave to other guests (steal), all CPUs: "steal total" in ticks.
steal_ticks() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
steal_note() { # $1 $2: steal_ticks before and after -> "steal=N%" when N >= STEAL_MAX, else nothing
  paste <(echo "$1") <(echo "$2") | awk -v max="$STEAL_MAX" '{ t = $4 - $2
    if (t > 0 && 100 * ($3 - $1) / t >= max) printf "steal=%.0f%%", 100 * ($3 - $1) / t }'
}
# Runs a measurement ("$@": wrk_run or oha_run and their arguments) again while the hypervisor
# stole STEAL_MAX% or more of the CPU during it, at most STEAL_RETRIES times: a stolen run
# measures the host, not the proxy (this machine's host has stolen 5-46% for minutes at a time).
# Prints the last attempt's line, with "retried=N" added when there was more than one.
unstolen() {
  local out i
  for ((i = 0; ; i++)); do
    out=$("$@")
    [[ $out == *steal=* ]] && ((i < STEAL_RETRIES)) || break
  done
  if ((i == 0)); then echo "$out"
  elif [[ $1 == oha_run ]]; then # one comma-separated notes field (column 8)
    case $(awk '{print NF}' <<< "$out") in
      7) echo "$out retried=$i" ;;
      *) echo "$out,retried=$i" ;;
    esac
  else echo "$out retried=$i"
  fi
}
busy_pct() { # $1 $2: core_busy before and after -> "busy0 busy1"
  paste <(echo "$1") <(echo "$2") | awk '{ printf "%.0f ", 100 * ($5 - $2) / ($6 - $3) }'
}

# Starts proxy $1 in mode $2 with the defaults line $3 (or nothing) and the backend line $4
# (`http-reuse ...` or nothing), optionally under the command prefix $5 (strace). Sets PROXY_PID:
# the proxy itself (taskset execs it), or strace with the proxy as its child.
start_proxy() {
  local px=$1 mode=$2 options=$3 reuse=$4 prefix=${5:-}
  for _ in $(seq 50); do port_busy $PORT || break; sleep 0.1; done
  if port_busy $PORT; then echo "port $PORT is still in use before starting $px" >&2; return 1; fi
  case "$px" in
    bascule|haproxy)
      awk -v mode="$mode" -v opts="$options" -v reuse="$reuse" '
        { gsub(/@MODE@/, mode); gsub(/@REUSE@/, reuse) }
        /^@OPTIONS@$/ { if (opts != "") print "    " opts; next }
        { print }' "$PROXY_CFG" | sed -e "s#@DIR@#$WORK#g" ${PROXY_SED[@]+"${PROXY_SED[@]}"} | ports > "$WORK/proxy-$px.cfg"
      local bin=haproxy
      [ "$px" = bascule ] && bin=$BASCULE
      # shellcheck disable=SC2086 # $prefix is a command prefix (strace ...) or nothing
      taskset -c "${PROXY_CPUS:-0}" $prefix "$bin" -db -f "$WORK/proxy-$px.cfg" >"$WORK/proxy-$px.log" 2>&1 &
      ;;
    nginx)
      local conf=bench/nginx-proxy.conf
      [ "$mode" = tcp ] && conf=bench/nginx-stream.conf
      { [ "$mode" = tcp ] && echo "load_module /usr/lib/nginx/modules/ngx_stream_module.so;"; cat "$conf"; } |
        sed "s#@DIR@#$WORK#" | ports > "$WORK/proxy-nginx.conf"
      # shellcheck disable=SC2086
      taskset -c "${PROXY_CPUS:-0}" $prefix nginx -e "$WORK/proxy-error.log" -c "$WORK/proxy-nginx.conf" >"$WORK/proxy-$px.log" 2>&1 &
      ;;
  esac
  PROXY_PID=$!
  wait_port $PORT || { stop_proxy; return 1; }
}

# Stops the proxy and waits for it to exit and its port to close. With "traced", PROXY_PID is
# strace: the traced proxy (strace's child) is stopped, not strace, which then writes its
# summary and exits as its tracee does (nginx's master stops its worker first).
# Sets PROXY_EARLY (non-empty: the proxy had exited before it was stopped, the run is void) and
# PROXY_EXIT (non-empty: it did not exit normally, e.g. "proxy_killed_by_signal_11").
PROXY_EARLY=
PROXY_EXIT=
stop_proxy() {
  local p=$PROXY_PID st=0
  PROXY_EARLY=; PROXY_EXIT=
  [ -n "$p" ] || return 0
  exited "$p" && PROXY_EARLY=1
  if [ "${1:-}" = traced ]; then
    for k in $(pgrep -P "$p" || true); do kill "$k" 2>/dev/null || true; done
  else
    kill_tree "$p"
  fi
  for _ in $(seq 100); do exited "$p" && break; sleep 0.1; done
  if ! exited "$p"; then
    echo "proxy $p did not stop: killing it" >&2
    for k in $(pgrep -P "$p" || true) "$p"; do kill -9 "$k" 2>/dev/null || true; done
  fi
  wait "$p" 2>/dev/null || st=$?
  PROXY_PID=
  case "$st" in
    0|130|143) [ -z "$PROXY_EARLY" ] || PROXY_EXIT="proxy_exited_early_with_status_$st" ;;
    *) if [ "$st" -gt 128 ]; then PROXY_EXIT="proxy_killed_by_signal_$((st - 128))"
       else PROXY_EXIT="proxy_exit_status_$st"; fi ;;
  esac
  [ -z "$PROXY_EXIT" ] || echo "$PROXY_EXIT (see its log above or rerun)" >&2
  for _ in $(seq 50); do port_busy $PORT || return 0; sleep 0.1; done
}

# Reads wrk's output on stdin; prints "requests req_per_s bytes_read transfer_bytes_per_s errors"
# (errors: wrk's error lines without spaces, or nothing). wrk's units are binary (1KB = 1024 B).
wrk_parse() {
  awk 'function bytes(s,  u, m) {
         u = s; sub(/^[0-9.]+/, "", u)
         m = 1
         if (u == "KB") m = 1024; else if (u == "MB") m = 1048576
         else if (u == "GB") m = 1073741824; else if (u == "TB") m = 1099511627776
         return (s + 0) * m }
       / requests in / { reqs = $1; read = bytes($5) }
       /^Requests\/sec:/ { rps = $2 }
       /^Transfer\/sec:/ { tps = bytes($2) }
       /Non-2xx|Socket errors/ { gsub(/^ +/, ""); gsub(/,? +/, "_"); errs = errs $0 " " }
       END { printf "%d %.0f %.0f %.0f %s\n", reqs, rps, read, tps, errs }'
}


rss_kib() { awk '/^VmRSS:/{print $2}' "/proc/$1/status"; }
rss_tree_kib() { # the process and its direct children (nginx's workers)
  local p t=0
  for p in "$1" $(pgrep -P "$1" || true); do t=$((t + $(rss_kib "$p" 2>/dev/null || echo 0))); done
  echo "$t"
}


# Medians: the middle value, or the mean of the two middle ones (in the precision of the input).
median_range() { # column of numbers -> "median [min..max]"
  sort -g | awk '{v[NR]=$1} END {if (NR==0) {print "-"; exit}
    if (NR == 1) { print v[1]; exit }
    printf "%s [%s..%s]", mid(), v[1], v[NR]}
    function mid(  d) { if (NR % 2) return v[(NR+1)/2]
      d = v[NR/2]; sub(/^[^.]*\.?/, "", d)
      return sprintf("%." length(d) "f", (v[NR/2] + v[NR/2+1]) / 2) }'
}
median() { median_range | cut -d' ' -f1; }
busy_med() { # runs file with busy0 busy1 in columns $1 $2 -> "busy0/busy1" medians
  echo "$(awk -v c="$2" '{print $c}' "$1" | median)/$(awk -v c="$3" '{print $c}' "$1" | median)"
}

# haproxy's median per scenario, for the ratio column, whatever the order of PROXIES.
declare -A base=()
set_base() { # $1 key $2 column of runs.haproxy that holds the cost
  base[$1]=
  if [[ " $PROXIES " == *" haproxy "* ]] && [ -s "$WORK/runs.haproxy" ] && ! grep -q failed "$WORK/runs.haproxy"; then
    base[$1]=$(awk -v c="$2" '{print $c}' "$WORK/runs.haproxy" | median)
  fi
}
ratio() { # $1 scenario key $2 median
  if [ -n "${base[$1]:-}" ]; then awk -v a="$2" -v b="${base[$1]}" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f", a / b }'; else echo "-"; fi
}

# The median over rounds of this proxy's cost divided by haproxy's in the same round: rounds
# interleave the proxies, so a host that changes speed between rounds (this machine's shared
# host does, by up to 1.5x) moves both costs of a pair together. $1 runs file $2 cost column.
paired() {
  if [[ " $PROXIES " != *" haproxy "* ]] || [ ! -s "$WORK/runs.haproxy" ] || grep -q failed "$WORK/runs.haproxy"; then
    echo "-"; return
  fi
  paste -d '|' "$1" "$WORK/runs.haproxy" | awk -F'|' -v c="$2" '{ split($1, a, " "); split($2, b, " ")
    if (b[c] + 0 > 0) printf "%.2f\n", a[c] / b[c] }' | median_range
}

row() { printf '%-17s %-8s %-24s %-34s %-8s %-9s %s\n' "$@" | sed 's/ *$//'; }
failed_row() { # $1 scenario $2 proxy $3 runs file
  row "$1" "$2" "did not run: $(grep -m1 failed "$3" | sed 's/^failed:\? *//')" \
    "$(head -c 300 "$WORK/proxy-$2.log" 2>/dev/null | tr '\n' ' ')"
}

# The proxies in round $1's order: PROXIES rotated by $1 places. What a run leaves behind (some
# 14,000 TIME_WAIT sockets after a connection-per-request run, as wrk's ports come round again,
# the page cache, the host's state) helps or burdens the run after it; rotating spreads that over
# every proxy.
round_order() {
  local -a p
  read -ra p <<< "$PROXIES"
  local i n=${#p[@]}
  for ((i = 0; i < n; i++)); do printf '%s ' "${p[(i + $1) % n]}"; done
}
