#!/usr/bin/env bash
# Runs HAProxy's own regression tests (VTest, from ../shared/regtests or $REGTESTS_DIR) of the
# areas Bascule claims against Bascule and against Debian's haproxy 2.6, and writes
# docs/COMPATIBILITY.md: each test's result on both, and for each failure its reason (the first
# configuration alert, the test's own feature gate, or the first failed expectation), then
# tests/regtests/passing.txt, the tests Bascule passes, which `.ci/run` replays.
#
#   tests/regtests/compat.sh [AREA...]      default: the areas in AREAS below
#
# COMPAT_WORK=DIR keeps both runs' VTest logs in DIR (default: a temporary directory, removed);
# REPORT_ONLY=1 with COMPAT_WORK writes the two files again from the logs kept there, without
# running anything (to revise tests/regtests/notes.txt and see the result).
#
# Needs target/release/bascule (built here) and /usr/sbin/haproxy. The .vtc files are GPL-2.0
# and stay outside this repository: only their names and outcomes are recorded.
set -euo pipefail
cd "$(dirname "$0")/../.."
suite=${REGTESTS_DIR:-../shared/regtests}
[ -x "$suite/run.sh" ] || { echo "compat.sh: no VTest suite at $suite (set REGTESTS_DIR)" >&2; exit 2; }
[ -x /usr/sbin/haproxy ] || { echo "compat.sh: /usr/sbin/haproxy is missing (apt-get install haproxy)" >&2; exit 2; }
AREAS=(balance checks http-messaging http-errorfiles stream log http-rules converter sample_fetches http-capture stick-table stickiness http-cookies ssl webstats stats connection tcp-rules peers startup proxy server)
[ $# -gt 0 ] && AREAS=("$@")

if [ -n "${COMPAT_WORK:-}" ]; then
  work=$COMPAT_WORK
  mkdir -p "$work"
else
  work=$(mktemp -d /tmp/bascule-compat.XXXXXX)
  trap 'rm -rf "$work"' EXIT
fi
if [ "${REPORT_ONLY:-0}" = 1 ]; then
  [ -s "$work/bascule.txt" ] && [ -s "$work/haproxy.txt" ] \
    || { echo "compat.sh: REPORT_ONLY needs COMPAT_WORK with both runs' logs" >&2; exit 2; }
else
  cargo build --release --quiet --bin bascule
  args=()
  for a in "${AREAS[@]}"; do args+=("$a/"); done
  REGTESTS_LOGS=$work/bascule "$suite/run.sh" --keep --jobs 2 "${args[@]}" > "$work/bascule.txt" || true
  REGTESTS_LOGS=$work/haproxy "$suite/run.sh" --keep --jobs 2 --bin /usr/sbin/haproxy "${args[@]}" \
    > "$work/haproxy.txt" || true
fi

python3 - "$work" "${AREAS[*]}" "$suite" <<'EOF'
import os, re, sys
work, areas, suite = sys.argv[1], sys.argv[2].split(), sys.argv[3]

def results(who):
    out = {}
    for line in open(os.path.join(work, who + ".txt")):
        m = re.match(r"(PASS|FAIL)  (\S+)", line)
        if m:
            out[m.group(2)] = m.group(1)
    return out

def reason(who, test):
    path = os.path.join(work, who, test.replace("/", "_") + ".log")
    if not os.path.exists(path):
        return ""
    text = open(path, errors="replace").read()
    if "SKIPPING test" in text:
        return "skipped by the test itself: needs " + gate(test, text)
    # The binary's stderr comes in fragments on `debug|` lines: join them.
    debug = "".join(re.findall(r"debug\|(.*)", text))
    m = re.search(r"\[ALERT\][^\[]*?cfg:(\d+): (.*?)(?=\[ALERT\]|\[WARNING\]|\[NOTICE\]|bascule:|$)", debug)
    if m:
        return "config line %s: %s" % (m.group(1), m.group(2).strip()[:160])
    m = re.search(r"^---- (.*)$", text, re.M)
    if m:
        return re.sub(r"\s+", " ", m.group(1)).strip()[:160]
    return "see the VTest log"

def gate(test, log):
    """The feature the test lacked: the last `feature cmd` VTest ran (its log cuts long
    lines: the whole line is read from the test), and why Bascule lacks it."""
    ran = re.findall(r"=== feature cmd \"(.*)", log)
    if not ran:
        return "a feature"
    prefix = ran[-1].rstrip('"').removesuffix("...")
    cmd = prefix
    try:
        for line in open(os.path.join(suite, "reg-tests", test), errors="replace"):
            m = re.match(r'\s*feature cmd "(.*)"\s*$', line)
            if m and m.group(1).startswith(prefix):
                cmd = m.group(1)
                break
    except OSError:
        pass
    m = re.search(r"-cc '([^']*)'", cmd)
    if not m:
        return "`%s`" % cmd
    expr = m.group(1)
    why = ""
    if re.search(r"OPENSSL|ssllib|openssl_version|awslc", expr):
        why = " (Bascule reports rustls, not an OpenSSL library name or version)"
    elif "fips_mode" in expr:
        why = " (Bascule's `-cc` does not evaluate `fips_mode()`)"
    elif "version_atleast" in expr:
        why = " (Bascule reports 2.6)"
    return "`%s`%s" % (expr, why)

b, h = results("bascule"), results("haproxy")
flaky = {}
for line in open("tests/regtests/flaky.txt"):
    if line.strip() and not line.startswith("#"):
        name, _, why = line.strip().partition("  ")
        flaky[name] = why.strip()
notes = {}
for line in open("tests/regtests/notes.txt"):
    if line.strip() and not line.startswith("#"):
        name, _, note = line.strip().partition("  ")
        notes[name] = note.strip()
tests = sorted(set(b) | set(h))
passing = [t for t in tests if b.get(t) == "PASS" and t not in flaky]
both = [t for t in tests if h.get(t) == "PASS"]
rows = []
for t in tests:
    rb, rh = b.get(t, "-"), h.get(t, "-")
    if t in flaky:
        rb = rb + " (flaky)"
    why = flaky.get(t, "") if rb.startswith("PASS") else reason("bascule", t).replace("|", "\\|")
    if t in flaky and not rb.startswith("PASS"):
        why = "flaky: " + flaky[t]
    if t in notes:
        why = (why + "; " if why else "") + notes[t]
    why_h = "" if rh == "PASS" else reason("haproxy", t).replace("|", "\\|")
    rows.append("| %s | %s | %s | %s | %s |" % (t, rb, rh, why, why_h))

with open("docs/COMPATIBILITY.md", "w") as f:
    f.write("""# Compatibility with HAProxy's own regression tests

HAProxy's VTest suite (`reg-tests/`, at the commit described in `../shared/regtests/README.md`)
run against Bascule and against Debian's haproxy 2.6 (the reference), test by test, for the areas
Bascule claims: %s. Generated by `tests/regtests/compat.sh` (it runs
`../shared/regtests/run.sh --keep AREA/...` once with Bascule and once with
`--bin /usr/sbin/haproxy`); do not edit by hand. A skipped test counts as failed: it gates itself
on a feature (`-cc`) the binary does not declare.

- Bascule passes **%d** of %d; haproxy 2.6 passes **%d**.
- `tests/regtests/passing.txt` lists the tests Bascule passes; `.ci/run` replays them so that none
  can regress. Tests that pass only some of the time are listed with their reason in
  `tests/regtests/flaky.txt` and kept out of it. Run any other with `../shared/regtests/run.sh --keep TEST` (logs in
  `/tmp/regtests-logs`).
- Most failures are tests of later HAProxy versions (keywords, fetches and wordings after 2.6,
  which haproxy 2.6 fails too), tests that gate themselves on an OpenSSL library, and
  configurations with a keyword Bascule does not have yet: Bascule refuses such a
  configuration with the line and keyword, never runs it half-understood.
  `tests/regtests/notes.txt` adds the reasons a log line cannot give.

| test | Bascule | haproxy 2.6 | why Bascule fails | why haproxy fails |
|---|---|---|---|---|
""" % (", ".join(a + "/" for a in areas), len(passing), len(tests), len(both)))
    f.write("\n".join(rows) + "\n")

with open("tests/regtests/passing.txt", "w") as f:
    f.write("# HAProxy reg-tests Bascule passes (generated by tests/regtests/compat.sh); .ci/run replays them.\n")
    f.write("\n".join(passing) + "\n")
print("Bascule passes %d of %d; haproxy %d. Wrote docs/COMPATIBILITY.md and tests/regtests/passing.txt" % (len(passing), len(tests), len(both)))
EOF
