#!/usr/bin/env bash
# Runs Bascule on examples/demo.cfg (or the configuration given as argument, such as
# examples/http-logs.cfg, whose access-log lines scroll by on stdout) in front of two demo
# backends, sends a few requests so you can see them balanced 2:1, then keeps Bascule in the
# foreground (debug traces on) until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
cfg=${1:-examples/demo.cfg}

command -v cargo >/dev/null || { echo "demo: cargo not found; install Rust first (https://rustup.rs)" >&2; exit 1; }
cargo build --release --quiet --bin bascule --example demo_backend

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

target/release/examples/demo_backend 127.0.0.1:9001 alpha & pids+=($!)
target/release/examples/demo_backend 127.0.0.1:9002 beta & pids+=($!)
target/release/bascule -c -f "$cfg"
target/release/bascule -d -f "$cfg" & pids+=($!)

get() {
  if command -v curl >/dev/null; then curl -s http://127.0.0.1:8080/; else
    exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET / HTTP/1.0\r\n\r\n' >&3 && tail -n 1 <&3; exec 3<&-; fi
}
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null && break; sleep 0.1; done
echo "== six requests through Bascule on 127.0.0.1:8080 =="
for _ in 1 2 3 4 5 6; do get; done
echo "== Bascule keeps running; try: curl http://127.0.0.1:8080/  (Ctrl-C to stop) =="
wait "${pids[2]}"
