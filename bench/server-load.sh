#!/usr/bin/env bash
# hearth-server under load, on this machine (see docs/performance.md, "hearth-server at 10,000
# agents"):
#
#   1. a release hearth-server on a temporary state directory, with examples/fleet applied and
#      the worker pool's maxUnavailable set to 100% (so an apply goes to every node at once);
#   2. hearth-loadgen simulates AGENTS agents (enroll, long-poll, report Working/Done), then
#      runs `hearth apply` of a new worker MachineConfig and measures until every agent has
#      seen it and reported Done in it; server memory from /proc;
#   3. the config endpoint's throughput next to nginx serving the same rendered config as a
#      static file over TLS with the server's own certificate, same concurrency, same client.
#
# Usage: bench/server-load.sh [AGENTS] (default 10000). Environment: CONCURRENCY (64),
# DURATION (10 s per throughput run), REPEAT (rounds of the three throughput runs, 1), WAIT
# (long-poll wait, 120 s), NO_BUILD=1 to use the binaries already in
# $CARGO_TARGET_DIR/release, SERVER_BIN=PATH to measure another hearth-server build,
# SKIP_NGINX=1, OUT=DIR to keep the results, SOURCES=LIST of local addresses the agents
# connect from (default: one per 20,000 agents from 127.0.0.2, e.g. 127.0.0.2-127.0.0.6 for
# 100,000: one source address has some 28,000 ports towards the server), SKIP_THROUGHPUT=1,
# PER_CONN=K to let K agents share one HTTP/2 connection (a fleet larger than the open-files
# limit allows connections; not how real agents connect), STEADY=SECONDS to go on that long
# after the apply with every agent reporting each turn (with a short WAIT, e.g. 20: the reports
# of a fleet between changes), MAX_UNAVAILABLE (the worker pool's, default 100%: the apply
# reaches every agent at once), SERVER_ARGS (more arguments for hearth-server, e.g.
# "--desired-answers-at-once 0"), APPLY_MS (how long each simulated agent takes to apply the
# apply's config, between its Working and Done reports; default 0), HISTORY (history items in
# each status report, up to 50 as a real agent sends; default 0), DEFER=false (agents that do not
# hold their reports when the server asks, as before deferred reports: paced by turns), LISTS=1 (then time listing
# the nodes: a page of 500 at the start and in the middle, and all at once, in the full view
# and in the summary view, with the server's peak RSS during each), RESTART=1 (then stop the
# server and start it again on the same state: the time until it answers, and its RSS then).
# As root it raises the open-files limit (hard too) to what AGENTS needs.
# Installs nginx with apt-get when it is missing (this script only; CI never runs it).
set -euo pipefail
. "$(dirname "$0")/fleet-setup.sh"

AGENTS=${1:-10000}
CONCURRENCY=${CONCURRENCY:-64}
DURATION=${DURATION:-10}
WAIT=${WAIT:-120}
REPEAT=${REPEAT:-1}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET/release

if [ -z "${NO_BUILD:-}" ]; then
    (cd "$ROOT" && cargo build --release --locked -p hearth-server -p hearth-cli -p hearth-loadgen)
fi
for b in hearth-server hearth hearth-loadgen; do
    [ -x "$BIN/$b" ] || { echo "error: $BIN/$b is missing (build with cargo build --release)" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/hearth-load.XXXXXX)
OUT=${OUT:-$WORK/results}
mkdir -p "$OUT"
SPID= NPID=
cleanup() {
    [ -n "$SPID" ] && kill "$SPID" 2>/dev/null || true
    [ -n "$NPID" ] && kill "$NPID" 2>/dev/null || true
    wait 2>/dev/null || true
    # The state directory of 10,000 nodes is some 30 MB: keep only the results.
    case "$OUT" in "$WORK"/*) rm -rf "$WORK/state" "$WORK/www" ;; *) rm -rf "$WORK" ;; esac
}
trap cleanup EXIT

# Both the server and the load generator hold one descriptor per agent.
NEED=$((AGENTS / ${PER_CONN:-1} + 4096))
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt "$NEED" ]; then
    ulimit -n "$NEED" 2>/dev/null || echo "warning: the open-files limit is $(ulimit -Hn), $AGENTS agents need $NEED (run as root)" >&2
fi
ulimit -n "$(ulimit -Hn)"
if [ -z "${SOURCES:-}" ] && [ "$AGENTS" -gt 20000 ] && [ "${PER_CONN:-1}" -le 1 ]; then
    SOURCES=127.0.0.2-127.0.0.$((1 + (AGENTS + 19999) / 20000))
fi
PORT=$((20000 + RANDOM % 10000))
URL=https://127.0.0.1:$PORT
STATE=$WORK/state
# The server on $STATE, its output appended to server.out and server.log; its pid in SPID.
start_server() {
    "${SERVER_BIN:-$BIN/hearth-server}" --state-dir "$STATE" --listen "127.0.0.1:$PORT" --san localhost --san 127.0.0.1 \
        --max-wait 300 ${SERVER_ARGS:-} >>"$WORK/server.out" 2>>"$WORK/server.log" &
    SPID=$!
}
start_server
for _ in $(seq 100); do
    curl -sf --cacert "$STATE/pki/ca.crt" "$URL/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
CA=$STATE/pki/ca.crt
prepare_fleet "$URL" "$CA" "$STATE/admin.token" "$WORK"

echo "== $AGENTS agents against hearth-server (pid $SPID) on $URL"
"$BIN/hearth-loadgen" agents --server "$URL" --ca "$CA" \
    --bootstrap-token "@$STATE/tokens/worker.token" -n "$AGENTS" --wait "$WAIT" \
    --server-pid "$SPID" --apply "$BIN/hearth apply -f $WORK/change.yaml" \
    ${SOURCES:+--source-addresses "$SOURCES"} ${PER_CONN:+--agents-per-connection "$PER_CONN"} \
    ${STEADY:+--steady "$STEADY"} \
    ${APPLY_MS:+--apply-ms "$APPLY_MS"} \
    ${HISTORY:+--history "$HISTORY"} \
    ${DEFER:+--defer "$DEFER"} \
    --json >"$OUT/agents.json"
python3 - "$OUT/agents.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
a = r["apply"]
print(f"  enrolled {r['agents']} in {r['enrollSeconds']} s; all running their first config after {r['allRunningFirstConfigSeconds']} s")
print(f"  apply -> all seen {a['allSeenSeconds']} s, all Done {a['allDoneSeconds']} s (hearth apply itself {a['applyCommandSeconds']} s)")
m = r["serverMemory"]
print(f"  server memory: start {m['start']}, all waiting {m['idleWithAllWaiting']}, end {m['end']}")
print(f"  load generator memory (all waiting): {r['loadgenMemory']}; source addresses {r.get('sourceAddresses') or 'one'}")
for k, v in r["stats"]["latencyMs"].items():
    print(f"  {k:<28} n={v['n']:<7} p50={v.get('p50')} ms p99={v.get('p99')} ms max={v.get('max')} ms")
print(f"  errors: {r['stats']['errors'] or 'none'}; counts: {r['stats']['counts']}")
EOF

# The server's own view of the same requests (its histogram: time from the routed request to
# the response, without the time a request waited in a socket or a busy runtime first), so the
# client-side figures above can be split into the server's work and the machine's queueing.
curl -sf --cacert "$CA" -H "Authorization: Bearer $(cat "$STATE/admin.token")" "$URL/metrics" >"$OUT/metrics.txt" || true
python3 - "$OUT/metrics.txt" <<'EOF'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r'(hearth_server_(?:http_request_duration_seconds|commit_duration_seconds|group_commit_changes))_bucket\{([^}]*)\} (\d+)', line)
    if m:
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        le = labels.pop("le")
        rows.setdefault((m.group(1), tuple(sorted(labels.items()))), []).append((float("inf") if le == "+Inf" else float(le), int(m.group(3))))
for (name, labels), b in sorted(rows.items()):
    b.sort()
    total = b[-1][1]
    if not total:
        continue
    seconds = name.endswith("_seconds")
    def q(p):
        for le, n in b:
            if n >= p * total:
                if le == float("inf"):
                    return "above the last bucket"
                return "<= %g ms" % (le * 1000) if seconds else "<= %g" % le
    l = dict(labels)
    if name == "hearth_server_http_request_duration_seconds":
        what = f"server-side {l['method']} {l['route']:<24}"
    elif name == "hearth_server_commit_duration_seconds":
        what = f"commit stage {l['stage']:<30}"
    else:
        what = f"changes per group commit {'':<18}"
    print(f"  {what} n={total:<7} p50 {q(0.5)}, p99 {q(0.99)}")
EOF
echo "== machine: load average $(cut -d' ' -f1-3 /proc/loadavg) after the agents run"
# LISTS=1: what listing the nodes costs once they all reported: a page of 500, then every node
# at once, in the full view, then the same in the summary view (no report read back from the
# store); the time, the answer's size, and the server's peak RSS during each (its high-water
# mark reset before, through /proc/PID/clear_refs).
if [ -n "${LISTS:-}" ]; then
    MIDDLE="continue=loadgen-$(printf %05d $((AGENTS / 2)))"
    for q in "limit=500" "limit=500&$MIDDLE" "" "view=summary&limit=500" "view=summary&limit=500&$MIDDLE" "view=summary"; do
        echo 5 >"/proc/$SPID/clear_refs" 2>/dev/null || true
        w=$(curl -sf --cacert "$CA" -H "Authorization: Bearer $(cat "$STATE/admin.token")" \
            -o /dev/null -w '%{time_total} s, %{size_download} bytes' "$URL/api/v1/nodes?$q")
        echo "  GET /api/v1/nodes?$q: $w; server RSS peak $(awk '/VmHWM/ {printf "%.0f MiB", $2/1024}' "/proc/$SPID/status"), now $(awk '/VmRSS/ {printf "%.0f MiB", $2/1024}' "/proc/$SPID/status")"
    done
fi
# RESTART=1: what a restart costs with every node's report stored: SIGTERM, then the time from
# the start until /healthz answers (the fleet loaded), and the server's RSS then.
if [ -n "${RESTART:-}" ]; then
    kill "$SPID"; wait "$SPID" 2>/dev/null || true
    STARTED=$(date +%s.%N)
    start_server
    until curl -sf --cacert "$CA" "$URL/healthz" >/dev/null 2>&1; do
        kill -0 "$SPID" 2>/dev/null || { echo "error: the restarted server exited" >&2; exit 1; }
        sleep 0.05
    done
    echo "  restart: answering after $(awk -v a="$STARTED" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}') s; server RSS $(awk '/VmRSS/ {printf "%.0f MiB", $2/1024}' "/proc/$SPID/status"), peak $(awk '/VmHWM/ {printf "%.0f MiB", $2/1024}' "/proc/$SPID/status")"
fi
if [ -n "${SKIP_THROUGHPUT:-}" ]; then
    echo "results in $OUT"
    exit 0
fi
echo "== throughput, $CONCURRENCY clients, $DURATION s each, $REPEAT round(s)"
TOKEN=$(cat "$STATE/tokens/worker.token")
if [ -z "${SKIP_NGINX:-}" ]; then
    if ! command -v nginx >/dev/null; then
        echo "   installing nginx (apt-get)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null \
            || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null
    fi
    mkdir -p "$WORK/www"
    # HTTP/1.1 and no Accept header, as the load generator asks: the same bytes.
    curl -sf --http1.1 --cacert "$CA" -H "Accept:" -H "Authorization: Bearer $TOKEN" "$URL/config/worker" -o "$WORK/www/worker.ign"
    NPORT=$((PORT + 1))
    cat >"$WORK/nginx.conf" <<EOF
user root;
worker_processes auto;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
daemon off;
events { worker_connections 16384; }
http {
    access_log off;
    keepalive_requests 100000000;
    server {
        listen 127.0.0.1:$NPORT ssl;
        ssl_certificate $STATE/pki/server.crt;
        ssl_certificate_key $STATE/pki/server.key;
        root $WORK/www;
        default_type application/vnd.coreos.ignition+json;
    }
}
EOF
    nginx -c "$WORK/nginx.conf" -p "$WORK" &
    NPID=$!
    sleep 1
fi
# Alternating rounds, so that other load on a shared machine hits all three alike.
for i in $(seq "$REPEAT"); do
    "$BIN/hearth-loadgen" throughput --ca "$CA" --url "$URL/config/worker" --token "$TOKEN" \
        -c "$CONCURRENCY" -d "$DURATION" --label "hearth-server /config/worker (first boot)" --json \
        >"$OUT/throughput-$i-1-firstboot.json"
    "$BIN/hearth-loadgen" throughput --ca "$CA" --url "$URL/api/v1/agent/desired" \
        --enroll-with "$TOKEN" -c "$CONCURRENCY" -d "$DURATION" \
        --label "hearth-server /api/v1/agent/desired (no wait)" --json \
        >"$OUT/throughput-$i-2-desired.json"
    if [ -n "$NPID" ]; then
        "$BIN/hearth-loadgen" throughput --ca "$CA" --url "https://127.0.0.1:$NPORT/worker.ign" \
            -c "$CONCURRENCY" -d "$DURATION" --label "nginx $(nginx -v 2>&1 | sed 's|.*/||') static file (same bytes)" --json \
            >"$OUT/throughput-$i-3-nginx.json"
    fi
done

python3 - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
print(f"  {'endpoint':<52} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'bytes':>7} errors")
for f in sorted(f for f in os.listdir(out) if f.startswith("throughput-")):
    r = json.load(open(os.path.join(out, f)))
    l = r["latencyMs"] or {}
    print(f"  {r['label']:<52} {r['requestsPerSecond']:>8} {l.get('p50', '-'):>8} {l.get('p99', '-'):>8} {r['bodyBytes']:>7} {r['errors'] or 'none'}")
EOF
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
echo "results in $OUT"
