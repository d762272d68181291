# Sourced by bench/server-load.sh and bench/replica-load.sh: the fleet both measure.
#
# prepare_fleet URL CA ADMIN_TOKEN_FILE WORK: `hearth login` (HEARTH_CONFIG=$WORK/login.json,
# exported), the example fleet, the worker pool at maxUnavailable $MAX_UNAVAILABLE or 100% (so that one apply goes
# to every node at once: with the example's maxUnavailable 1 a rollout over thousands of nodes is
# one node at a time, by design), and $WORK/change.yaml, the new worker MachineConfig a run
# applies. Needs $BIN (the binaries) and $ROOT (the repository).
prepare_fleet() {
    local url=$1 ca=$2 admin=$3 work=$4
    export HEARTH_CONFIG=$work/login.json
    "$BIN/hearth" login --server "$url" --ca "$ca" --token "$(cat "$admin")" >/dev/null
    "$BIN/hearth" apply -f "$ROOT/examples/fleet" >/dev/null
    cat >"$work/pool.yaml" <<EOF
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigPool
metadata:
  name: worker
spec:
  machineConfigSelector:
    matchLabels:
      machineconfiguration.openshift.io/role: worker
  nodeSelector:
    matchLabels:
      node-role.kubernetes.io/worker: ""
  maxUnavailable: "${MAX_UNAVAILABLE:-100%}"
EOF
    "$BIN/hearth" apply -f "$work/pool.yaml" >/dev/null
    cat >"$work/change.yaml" <<EOF
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-loadgen-change
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
        - path: /etc/loadgen-change
          mode: 420
          contents:
            source: data:,changed%20at%20$(date +%s%N)
EOF
}
