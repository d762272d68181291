#!/usr/bin/env bash
# hearth at work on its embedded default, on this machine, in about a minute:
#
#   1. hearth-server starts on 127.0.0.1 with its embedded store (a fresh state directory, its
#      own CA, admin token and serving certificate);
#   2. `hearth apply -f examples/fleet` stores the example fleet (pools, nodes, MachineConfigs);
#      the server renders each pool;
#   3. a hearth-agent enrolls as node worker-0 with the worker pool's bootstrap token, takes its
#      desired config by long-poll over TLS and applies it into a scratch root directory
#      (an offline image root: files, units and their enablement, SSH keys; no systemd is
#      touched), then reports Done;
#   4. `hearth get` shows the pools and the node as the server sees them, and the files the agent
#      wrote are listed.
#
# Everything lives in one temporary directory, removed at the end (HEARTH_DEMO_KEEP=1 keeps it).
# HEARTH_BIN_DIR=DIR uses the three binaries in DIR instead of building them.
# Needs only Rust (cargo); run as root, since the agent gives the files their owners (root).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -t 1 ]; then
  step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
else
  step() { printf '\n==> %s\n' "$*"; }
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: run as root: the agent sets the owners of the files it writes (root:root)" >&2
  exit 2
fi

if [ -n "${HEARTH_BIN_DIR:-}" ]; then
  BIN=$HEARTH_BIN_DIR   # binaries built already (the test of this script, xtask/tests/demo.rs)
else
  step "building hearth, hearth-server and hearth-agent"
  cargo build -q --bin hearth --bin hearth-server --bin hearth-agent
  BIN=${CARGO_TARGET_DIR:-$PWD/target}/debug
fi

DEMO=$(mktemp -d /tmp/hearth-demo.XXXXXX)
SERVER_PID= AGENT_PID=
cleanup() {
  local rc=$?
  for pid in $AGENT_PID $SERVER_PID; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ "${HEARTH_DEMO_KEEP:-}" = 1 ]; then
    echo "kept: $DEMO (server.log, agent.log, the node's root worker-0/)"
  else
    rm -rf "$DEMO"
  fi
  exit "$rc"
}
trap cleanup EXIT

step "starting hearth-server (embedded store in $DEMO/server)"
"$BIN/hearth-server" --state-dir "$DEMO/server" --listen 127.0.0.1:0 >"$DEMO/server.log" 2>&1 &
SERVER_PID=$!
ADDR=
for _ in $(seq 1 300); do
  ADDR=$(sed -n 's/^hearth-server: listening on \([0-9.]*:[0-9]*\) .*/\1/p' "$DEMO/server.log")
  [ -n "$ADDR" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$DEMO/server.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$ADDR" ] || { echo "demo: the server did not start" >&2; cat "$DEMO/server.log" >&2; exit 1; }
head -n 3 "$DEMO/server.log"

# The CLI reads the server, CA and admin token from the environment (no login file is written).
export HEARTH_SERVER="https://$ADDR" HEARTH_CA="$DEMO/server/pki/ca.crt"
HEARTH_TOKEN=$(cat "$DEMO/server/admin.token")
export HEARTH_TOKEN HEARTH_CONFIG="$DEMO/cli.json"

step "hearth apply -f examples/fleet"
"$BIN/hearth" apply -f examples/fleet

step "hearth get mcp"
"$BIN/hearth" get mcp

TOKEN=$("$BIN/hearth" bootstrap-token worker)   # a failure stops the demo here, with its reason

step "hearth-agent enrolls as worker-0 and applies its config into $DEMO/worker-0"
# A scratch root with what an image root has: the users the config names (root, and core, whose
# SSH keys the worker pool sets).
mkdir -p "$DEMO/worker-0/etc" "$DEMO/worker-0/var/home/core"
printf 'root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:core:/var/home/core:/bin/bash\n' \
  >"$DEMO/worker-0/etc/passwd"
printf 'root:x:0:\ncore:x:1000:\n' >"$DEMO/worker-0/etc/group"
chown 1000:1000 "$DEMO/worker-0/var/home/core"
"$BIN/hearth-agent" run --server "$HEARTH_SERVER" --ca "$HEARTH_CA" \
  --bootstrap-token "$TOKEN" \
  --node-name worker-0 --root "$DEMO/worker-0" --interval 1 >"$DEMO/agent.log" 2>&1 &
AGENT_PID=$!
state=
for _ in $(seq 1 120); do
  state=$("$BIN/hearth" get nodes worker-0 -o json 2>/dev/null |
    sed -n 's/.*"state": *"\([A-Za-z]*\)".*/\1/p' | head -n 1)
  case "$state" in Done | Degraded | Unreconcilable) break ;; esac
  kill -0 "$AGENT_PID" 2>/dev/null || break
  sleep 0.5
done
"$BIN/hearth" get nodes
if [ "$state" != Done ]; then
  echo "demo: worker-0 did not reach Done (state: ${state:-none}); the agent's log:" >&2
  tail -n 30 "$DEMO/agent.log" >&2
  exit 1
fi

step "hearth describe node worker-0"
"$BIN/hearth" describe node worker-0 | head -n 12

step "what the agent wrote under $DEMO/worker-0 (besides the users above and its own state in var/lib/hearth)"
(cd "$DEMO/worker-0" && find . \( -type f -o -type l \) -not -path './var/lib/hearth/*' -not -path './run/hearth/*' -not -path './etc/passwd' -not -path './etc/group' | sort)

step "done: worker-0 is in its pool's rendered config, verified by the agent and reported to the server"
