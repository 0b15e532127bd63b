#!/usr/bin/env python3
"""Draws bench/tls.sh's tls-latency plot: latency by percentile, one line per proxy and rate
(the median over the runs of each percentile oha reports), on a "nines" axis (p50, p90, p99,
p99.9, p99.99 equally spaced) and a logarithmic latency axis. Needs matplotlib.

Usage: tls_plot.py OUT.png LIST [SUBTITLE]
LIST: lines "PROXY RATE OHA_JSON_PATH", one per run (oha --output-format json, run with
--latency-correction). Prints the number of runs drawn.
"""
import json
import math
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

out, listing = sys.argv[1], sys.argv[2]
subtitle = sys.argv[3] if len(sys.argv) > 3 else ""
runs = {}
for line in open(listing):
    px, rate, path = line.split()
    try:
        p = json.load(open(path))["latencyPercentiles"]
    except Exception:
        continue  # a failed run: its row in the table says why
    runs.setdefault((px, int(rate)), []).append(p)

fig, ax = plt.subplots(figsize=(9, 6))
rates = sorted({r for _, r in runs})
colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
styles = {"bascule": "-", "haproxy": "--"}
drawn = 0
for (px, rate), ps in sorted(runs.items()):
    keys = sorted((k for k in ps[0] if k.startswith("p") and ps[0][k] is not None),
                  key=lambda k: float(k[1:]))
    xs, ys = [], []
    for k in keys:
        q = float(k[1:])
        if q <= 0 or q >= 100:
            continue
        vals = [p[k] for p in ps if p.get(k) is not None]
        xs.append(-math.log10(1 - q / 100))
        ys.append(statistics.median(vals) * 1e3)
    ax.plot(xs, ys, styles.get(px, ":"), marker="o", markersize=3,
            color=colours[rates.index(rate) % len(colours)], label="%s @ %d req/s" % (px, rate))
    drawn += len(ps)
ticks = [50, 90, 99, 99.9, 99.99]
ax.set_xticks([-math.log10(1 - t / 100) for t in ticks])
ax.set_xticklabels(["p%g" % t for t in ticks])
ax.set_yscale("log")
ax.set_xlabel("percentile")
ax.set_ylabel("latency (ms, corrected for coordinated omission)")
ax.set_title("TLS 1.3 keep-alive, 64 B, oha --latency-correction, nbthread 2\n" + subtitle)
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(out, dpi=110)
print("%d runs drawn" % drawn)
