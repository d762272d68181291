#!/usr/bin/env bash
# hearth-agent against the physical floor, on the same workload, in the same run.
#
#   sudo bench/agent-apply.sh [FILES] [RUNS]      (defaults: 1000 files, 7 runs; needs root)
#   HEARTH_AGENT=/path/to/hearth-agent ...        measure that binary (default: the agent as
#                                                 shipped: cargo build --profile release-agent)
#   HEARTH_FLOOR=/path/to/floor ...               the floor's directory (default bench/floor)
#
# The floor is `converge.c` (see its README): the least a correct converger does, in C, with
# the same crash safety (temp file, fsync, rename, one fsync per touched directory).
# Workload: the floor's gen.py + gen_mc.py, FILES files of 1 KiB in 10 directories per 1,000,
# mode 0644, owner root; hearth reads it as one MachineConfig, the floor as catalog.bin.
#
# Three phases, each a whole process (start to exit), hearth and the floor alternating (the one
# that goes first alternates too), `sync` before every measured run, every result checked with
# the floor's verify.py (content, mode, owner, directory modes, nothing extra; and how many files
# were rewritten: none for a no-op, exactly one for a drift):
#   cold   into an empty root;
#   no-op  again on the converged root;
#   drift  one file's content changed by hand, then converge (hearth: --drift-policy revert,
#          which puts it back, as the floor does).
# Then: process start (`hearth-agent --version`: time, max RSS, shared libraries), the system
# calls of one run of each phase (strace -c -f), and the daemon's idle RSS (`run --watch`) at
# FILES managed files. Prints medians and the ratios hearth/floor. Record the output in
# docs/performance.md with the command line.
set -euo pipefail
FILES=${1:-1000}
RUNS=${2:-7}
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "$0: run as root (the workload is owned by root; the check bind-mounts the tree)" >&2
  exit 1
fi
FLOOR=${HEARTH_FLOOR:-bench/floor}
for f in converge.c gen.py gen_mc.py verify.py; do
  [ -f "$FLOOR/$f" ] || { echo "$0: $FLOOR/$f missing (set HEARTH_FLOOR)" >&2; exit 1; }
done
FLOOR=$(cd "$FLOOR" && pwd)
if [ -n "${HEARTH_AGENT:-}" ]; then
  AGENT=$HEARTH_AGENT
else
  cargo build -q --profile release-agent --bin hearth-agent
  AGENT=${CARGO_TARGET_DIR:-$PWD/target}/release-agent/hearth-agent
fi

WORK=$(mktemp -d /var/tmp/hearth-bench.XXXXXX)
VIEW=$WORK/view
cleanup() {
  mountpoint -q "$VIEW/etc" 2>/dev/null && umount "$VIEW/etc"
  [ -n "${daemon_pid:-}" ] && kill "$daemon_pid" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# The workload, and the floor built from its source.
python3 "$FLOOR/gen.py" --n "$FILES" --out "$WORK/w" --target "$WORK/unused" >/dev/null
python3 "$FLOOR/gen_mc.py" "$FILES" "$WORK/mc.yaml"
CATALOG=$WORK/w/catalog.bin
cc -O2 -Wno-deprecated-declarations -o "$WORK/converge" "$FLOOR/converge.c" -lcrypto

# hearth keeps its own state under the root (var/lib/hearth, run/hearth): verify.py looks at
# the managed tree only, through a bind mount of the root's etc/ (so anything extra under etc/
# still counts).
mkdir -p "$VIEW/etc"
check() { # check TOOL PHASE ROOT EXPECTED_REWRITTEN [SNAP]
  local tool=$1 phase=$2 root=$3 want=$4 snap=${5:-} out
  local target=$root
  if [ "$tool" = hearth ]; then
    mount --bind "$root/etc" "$VIEW/etc"
    target=$VIEW
  fi
  out=$(python3 "$FLOOR/verify.py" "$CATALOG" "$target" ${snap:+--before "$snap"}) || {
    [ "$tool" = hearth ] && umount "$VIEW/etc"
    echo "FAILED: $tool $phase: $out" >&2
    exit 1
  }
  [ "$tool" = hearth ] && umount "$VIEW/etc"
  if [ -n "$snap" ] && [[ $out != *"rewritten=$want "* ]]; then
    echo "FAILED: $tool $phase: expected rewritten=$want: $out" >&2
    exit 1
  fi
}
snap() { # snap TOOL ROOT OUT: the inode/mtime/ctime of every managed file
  local target=$2
  if [ "$1" = hearth ]; then mount --bind "$2/etc" "$VIEW/etc"; target=$VIEW; fi
  python3 "$FLOOR/verify.py" "$CATALOG" "$target" --snap "$3" >/dev/null || true
  if [ "$1" = hearth ]; then umount "$VIEW/etc"; fi
}
# One converge of ROOT by TOOL, as a whole process, output discarded; prints seconds.
converge() { # converge TOOL ROOT
  local t0 t1 rc=0
  sync
  t0=$EPOCHREALTIME
  if [ "$1" = hearth ]; then
    "$AGENT" apply --once-from "$WORK/mc.yaml" --root "$2" --drift-policy revert >/dev/null 2>"$WORK/err" || rc=$?
  else
    "$WORK/converge" "$CATALOG" "$2" >/dev/null 2>"$WORK/err" || rc=$?
  fi
  t1=$EPOCHREALTIME
  if [ $rc -ne 0 ]; then
    echo "FAILED: $1 exited $rc: $(cat "$WORK/err")" >&2
    exit 1
  fi
  echo "$t1 - $t0" | bc -l
}
drift_one() { # change one managed file's content by hand (same inode, like an editor's >>)
  local rel
  rel=$(python3 -c "import sys; sys.path.insert(0, '$FLOOR'); from gen import rel; print(rel($FILES // 2))")
  echo "# edited by hand" >>"$1/$rel"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

declare -A T
for r in $(seq "$RUNS"); do
  if [ $((r % 2)) -eq 1 ]; then order="hearth floor"; else order="floor hearth"; fi
  for tool in $order; do
    root=$WORK/$tool-$r; rm -rf "$root"; mkdir -p "$root"
    T[$tool,cold]+="$(converge $tool "$root") "
    check $tool cold "$root" -
  done
  for tool in $order; do
    root=$WORK/$tool-$r
    snap $tool "$root" "$WORK/snap.json"
    T[$tool,noop]+="$(converge $tool "$root") "
    check $tool no-op "$root" 0 "$WORK/snap.json"
  done
  for tool in $order; do
    root=$WORK/$tool-$r
    drift_one "$root"
    snap $tool "$root" "$WORK/snap.json"
    T[$tool,drift]+="$(converge $tool "$root") "
    check $tool drift "$root" 1 "$WORK/snap.json"
  done
  [ "$r" -gt 1 ] && rm -rf "$WORK/hearth-$r" "$WORK/floor-$r"
done
med() { printf '%s\n' ${T[$1,$2]} | median; }

# System calls of one run of each phase (not timed): where the time goes.
syscalls() { # syscalls TOOL PHASE ROOT -> "total fsync openat"
  local cmd
  if [ "$1" = hearth ]; then
    cmd=("$AGENT" apply --once-from "$WORK/mc.yaml" --root "$3" --drift-policy revert)
  else
    cmd=("$WORK/converge" "$CATALOG" "$3")
  fi
  strace -f -c -o "$WORK/strace" "${cmd[@]}" >/dev/null 2>&1
  awk '/^------/ {n++; next} n==1 {c[$NF]=$4} /total$/ {t=$4} END {printf "%d %d %d", t, c["fsync"]+c["fdatasync"], c["openat"]+c["openat2"]+c["open"]}' "$WORK/strace"
}
declare -A S
for tool in hearth floor; do
  root=$WORK/strace-$tool; mkdir -p "$root"
  S[$tool,cold]=$(syscalls $tool cold "$root")
  S[$tool,noop]=$(syscalls $tool noop "$root")
  drift_one "$root"
  S[$tool,drift]=$(syscalls $tool drift "$root")
  check $tool strace "$root" -
done

# Process start: --version, whole process.
starts=()
for _ in $(seq 21); do
  t0=$EPOCHREALTIME; "$AGENT" --version >/dev/null; t1=$EPOCHREALTIME
  starts+=("$(echo "($t1 - $t0) * 1000" | bc -l)")
done
start_ms=$(printf '%s\n' "${starts[@]}" | median)
start_rss=$( { /usr/bin/time -f '%M' "$AGENT" --version >/dev/null; } 2>&1 | tail -1)
needed=$(readelf -d "$AGENT" | awk '/NEEDED/ {gsub(/[\[\]]/, "", $NF); printf "%s ", $NF}')
libs=$(ldd "$AGENT" | grep -c '=>' || true)

# Idle RSS of the daemon on a converged root of FILES files.
mkdir -p "$WORK/desired"; cp "$WORK/mc.yaml" "$WORK/desired/"
"$AGENT" run --watch "$WORK/desired" --root "$WORK/hearth-1" --interval 1 2>/dev/null &
daemon_pid=$!
for _ in $(seq 300); do
  "$AGENT" status --root "$WORK/hearth-1" -o json 2>/dev/null | grep -q '"state": "Done"' && break
  sleep 0.1
done
sleep 5   # settled: one more re-check interval or so after Done
rss=$(awk '/VmRSS/ {print $2}' /proc/$daemon_pid/status)
anon=$(awk '/RssAnon/ {print $2}' /proc/$daemon_pid/status)
filer=$(awk '/RssFile/ {print $2}' /proc/$daemon_pid/status)
kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true; daemon_pid=

printf 'hearth-agent %s vs the floor (converge.c, cc -O2), %s files x 1 KiB, %s runs, medians\n' \
  "$("$AGENT" --version | awk '{print $2}')" "$FILES" "$RUNS"
printf '%-7s %12s %12s %14s   %-30s %-30s\n' phase "hearth ms" "floor ms" "hearth/floor" \
  "hearth syscalls/fsync/open" "floor syscalls/fsync/open"
for p in cold noop drift; do
  h=$(med hearth $p); f=$(med floor $p)
  printf '%-7s %12.1f %12.1f %13.2fx   %-30s %-30s\n' "$p" "$(echo "$h * 1000" | bc -l)" \
    "$(echo "$f * 1000" | bc -l)" "$(echo "$h / $f" | bc -l)" \
    "$(tr ' ' / <<<"${S[hearth,$p]}")" "$(tr ' ' / <<<"${S[floor,$p]}")"
done
printf 'hearth drift / hearth no-op: %.2fx\n' "$(echo "$(med hearth drift) / $(med hearth noop)" | bc -l)"
printf 'process start (--version): %.1f ms, max RSS %.1f MiB, %s shared libraries (NEEDED: %s)\n' \
  "$start_ms" "$(echo "$start_rss / 1024" | bc -l)" "$libs" "$needed"
printf 'daemon idle RSS (run --watch, %s files): %.1f MiB (anonymous %.1f, file-backed %.1f)\n' \
  "$FILES" "$(echo "$rss / 1024" | bc -l)" "$(echo "$anon / 1024" | bc -l)" "$(echo "$filer / 1024" | bc -l)"
