#!/usr/bin/env bash
# One hearth-server next to three replicas on etcd, under the same simulated fleet, in one run
# (docs/performance.md, "Three replicas on etcd next to one server"):
#
#   1. one server on its embedded store: hearth-loadgen enrolls AGENTS agents, they long-poll
#      and report; `hearth apply` of a new worker MachineConfig; until every agent has seen it
#      and reported Done in it; the server's memory;
#   2. a three-member etcd on loopback and three replicas on it; the same agents spread over the
#      three (agent i on replica i mod 3), the same apply through the first replica; the
#      replicas' memory added up, and etcd's.
#
# Usage: bench/replica-load.sh [AGENTS] (default 6000). Environment: PER_CONN=K (K agents per
# HTTP/2 connection, for more agents than the open-files limit allows connections; see
# server-load.sh), HISTORY=N (history items in each report, as server-load.sh), WAIT (long-poll
# wait, 120 s), NO_BUILD=1 (use the release binaries in
# $CARGO_TARGET_DIR/release), OUT=DIR for the results (default: in the work directory, whose
# path is printed; the servers' logs stay there too), KEEP=1 to keep the stores as well. etcd: $HEARTH_ETCD_BIN, else `etcd`
# on PATH, else the binary the etcd-bin-vendored crate ships (in cargo's registry once hearth's
# tests were built). CI never runs this.
set -euo pipefail
. "$(dirname "$0")/fleet-setup.sh"

AGENTS=${1:-6000}
WAIT=${WAIT:-120}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=$TARGET/release

if [ -z "${NO_BUILD:-}" ]; then
    (cd "$ROOT" && cargo build --release --locked -p hearth-server -p hearth-cli -p hearth-loadgen)
fi
ETCD=${HEARTH_ETCD_BIN:-$(command -v etcd || ls "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/etcd-bin-vendored-linux-*/bin/etcd 2>/dev/null | tail -1 || true)}
[ -x "$ETCD" ] || { echo "error: no etcd binary: set HEARTH_ETCD_BIN" >&2; exit 1; }

WORK=$(mktemp -d /tmp/hearth-replicas.XXXXXX)
OUT=${OUT:-$WORK/results}
mkdir -p "$OUT"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    # The logs stay (state-*.log); the stores go (KEEP=1 keeps everything).
    [ -n "${KEEP:-}" ] && return
    rm -rf "$WORK"/state-a "$WORK"/state-b "$WORK"/state-c "$WORK"/state-single "$WORK"/etcd-[0-9]
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts a server (extra arguments after the state directory); prints "PID PORT".
start_server() {
    local state=$1; shift
    local p; p=$(port)
    "$BIN/hearth-server" --state-dir "$state" --listen "127.0.0.1:$p" --san 127.0.0.1 \
        --max-wait 300 "$@" >"$state.out" 2>"$state.log" &
    local pid=$!
    for _ in $(seq 300); do
        [ -f "$state/pki/ca.crt" ] && curl -sf --cacert "$state/pki/ca.crt" "https://127.0.0.1:$p/healthz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    echo "$pid $p"
}

# One source address per 20,000 connections (ports), as server-load.sh does.
conns=$(( (AGENTS + ${PER_CONN:-1} - 1) / ${PER_CONN:-1} ))
SOURCES=""
if [ "$conns" -gt 20000 ]; then
    n=$(( (conns + 19999) / 20000 ))
    SOURCES="127.0.0.2-127.0.0.$((1 + n))"
fi

run_agents() {
    local servers=$1 pids=$2 state=$3 out=$4
    "$BIN/hearth-loadgen" agents --server "$servers" --ca "$state/pki/ca.crt" \
        --bootstrap-token "@$state/tokens/worker.token" -n "$AGENTS" --wait "$WAIT" \
        --server-pid "$pids" --apply "HEARTH_CONFIG=$WORK/login.json $BIN/hearth apply -f $WORK/change.yaml" \
        ${SOURCES:+--source-addresses "$SOURCES"} ${PER_CONN:+--agents-per-connection "$PER_CONN"} \
        ${HISTORY:+--history "$HISTORY"} \
        --json >"$out"
}

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

echo "== 1. one server on its embedded store, $AGENTS agents"
read -r SPID SPORT < <(start_server "$WORK/state-single")
PIDS+=("$SPID")
prepare_fleet "https://127.0.0.1:$SPORT" "$WORK/state-single/pki/ca.crt" "$WORK/state-single/admin.token" "$WORK"
run_agents "https://127.0.0.1:$SPORT" "$SPID" "$WORK/state-single" "$OUT/single.json"
kill "$SPID"; wait "$SPID" 2>/dev/null || true

echo "== 2. three replicas on a three-member etcd, $AGENTS agents spread over them"
CLUSTER="" EPS=""
declare -a CP PP
for i in 0 1 2; do
    CP[$i]=$(port); PP[$i]=$(port)
    CLUSTER+="${CLUSTER:+,}m$i=http://127.0.0.1:${PP[$i]}"
    EPS+="${EPS:+,}http://127.0.0.1:${CP[$i]}"
done
EPIDS=""
for i in 0 1 2; do
    "$ETCD" --name "m$i" --data-dir "$WORK/etcd-$i" \
        --listen-client-urls "http://127.0.0.1:${CP[$i]}" --advertise-client-urls "http://127.0.0.1:${CP[$i]}" \
        --listen-peer-urls "http://127.0.0.1:${PP[$i]}" --initial-advertise-peer-urls "http://127.0.0.1:${PP[$i]}" \
        --initial-cluster "$CLUSTER" --initial-cluster-state new --initial-cluster-token hearth-bench \
        --max-txn-ops 100000 --max-request-bytes 67108864 --quota-backend-bytes 8589934592 \
        --log-level error >"$WORK/etcd-$i.log" 2>&1 &
    PIDS+=("$!"); EPIDS+="${EPIDS:+ }$!"
done
for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:${CP[0]}/health" | grep -q '"true"' && break
    sleep 0.2
done
read -r A APORT < <(start_server "$WORK/state-a" --etcd-endpoints "$EPS")
PIDS+=("$A")
for r in b c; do
    mkdir -p "$WORK/state-$r/pki"
    cp "$WORK/state-a/pki/ca.crt" "$WORK/state-a/pki/ca.key" "$WORK/state-$r/pki/"
    cp "$WORK/state-a/admin.token" "$WORK/state-$r/"
done
read -r B BPORT < <(start_server "$WORK/state-b" --etcd-endpoints "$EPS")
PIDS+=("$B")
read -r C CPORT < <(start_server "$WORK/state-c" --etcd-endpoints "$EPS")
PIDS+=("$C")
prepare_fleet "https://127.0.0.1:$APORT" "$WORK/state-a/pki/ca.crt" "$WORK/state-a/admin.token" "$WORK"
run_agents "https://127.0.0.1:$APORT,https://127.0.0.1:$BPORT,https://127.0.0.1:$CPORT" "$A,$B,$C" \
    "$WORK/state-a" "$OUT/replicas.json"
ETCD_RSS=0
for p in $EPIDS; do ETCD_RSS=$((ETCD_RSS + $(rss_kib "$p"))); done
echo "$ETCD_RSS" >"$OUT/etcd-rss-kib"

python3 - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
s = json.load(open(os.path.join(out, "single.json")))
r = json.load(open(os.path.join(out, "replicas.json")))
etcd = int(open(os.path.join(out, "etcd-rss-kib")).read()) / 1024
def row(name, f):
    print(f"  {name:<44} {f(s)!s:>18} {f(r)!s:>22}")
print(f"  {'':<44} {'one server':>18} {'three replicas (etcd)':>22}")
row("agents", lambda x: x["agents"])
row("enroll all (s)", lambda x: x["enrollSeconds"])
row("hearth apply itself (s)", lambda x: x["apply"]["applyCommandSeconds"])
row("apply -> all seen (s)", lambda x: x["apply"]["allSeenSeconds"])
row("apply -> all Done (s)", lambda x: x["apply"]["allDoneSeconds"])
for k in ("enroll", "status", "desired"):
    def lat(x, k=k):
        l = x["stats"]["latencyMs"].get(k) or next((v for kk, v in x["stats"]["latencyMs"].items() if kk.startswith(k)), None)
        return f"{l.get('p50')} / {l.get('p99')}" if l else "-"
    row(f"{k} latency p50 / p99 (ms)", lat)
row("server RSS, all waiting (MiB, sum)", lambda x: (x["serverMemory"]["idleWithAllWaiting"] or {}).get("rssMiB"))
row("server RSS, end (MiB, sum)", lambda x: (x["serverMemory"]["end"] or {}).get("rssMiB"))
print(f"  {'etcd RSS, end (MiB, three members)':<44} {'-':>18} {round(etcd,1):>22}")
row("errors", lambda x: x["stats"]["errors"] or "none")
EOF
echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
echo "results in $OUT"
