#!/usr/bin/env bash
# Benchmark of hearth-agent applying files, next to the physical floor.
#
#   bench/agent-apply.sh [FILES] [RUNS]      (defaults: 1000 files, 5 runs)
#   HEARTH_AGENT=/path/to/hearth-agent bench/agent-apply.sh ...   (measure that binary)
#
# - cold apply: `hearth-agent apply --once-from CONFIG --root DIR` into an empty image root
#   (files of 1 KiB; offline mode, so only the file work is measured: plan, atomic writes,
#   journal, verification);
# - no-op re-apply: the same command again on the same root;
# - floor: a script doing the same atomic writes (temp file, fchmod, write, fsync, rename,
#   fsync of the directory) and nothing else;
# - idle RSS: `hearth-agent run --watch` on the applied root, after it settled (VmRSS, and its
#   anonymous and file-backed parts).
# Prints the medians. Run on a quiet machine; record the output in docs/performance.md.
set -euo pipefail
FILES=${1:-1000}
RUNS=${2:-5}
cd "$(dirname "$0")/.."
if [ -n "${HEARTH_AGENT:-}" ]; then
  AGENT=$HEARTH_AGENT   # another build to compare with, e.g. an older commit's
else
  cargo build -q --release --bin hearth-agent
  AGENT=${CARGO_TARGET_DIR:-$PWD/target}/release/hearth-agent
fi
WORK=$(mktemp -d /var/tmp/hearth-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

python3 - "$FILES" "$WORK/config.yaml" <<'PY'
import sys, urllib.parse
n, out = int(sys.argv[1]), sys.argv[2]
with open(out, "w") as f:
    f.write("apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\n")
    f.write("metadata:\n  name: bench\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    storage:\n      files:\n")
    for i in range(n):
        body = (f"line {i:05d} " + "x" * 52 + "\n") * 16   # 1 KiB
        f.write(f"      - path: /etc/bench/d{i % 10}/f{i:05d}.conf\n        mode: 0644\n")
        f.write(f"        contents:\n          source: \"data:,{urllib.parse.quote(body)}\"\n")
PY

cat > "$WORK/floor.py" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "etc/bench", f"d{i % 10}")
    os.makedirs(d, exist_ok=True)
    body = ((f"line {i:05d} " + "x" * 52 + "\n") * 16).encode()
    tmp = os.path.join(d, f".tmp-{i}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.fchmod(fd, 0o644)
    os.write(fd, body)
    os.fsync(fd)
    os.close(fd)
    os.rename(tmp, os.path.join(d, f"f{i:05d}.conf"))
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(dfd)
    os.close(dfd)
PY

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

cold=(); noop=(); floor=()
for r in $(seq "$RUNS"); do
  root="$WORK/root-$r"; mkdir -p "$root"
  t0=$(now); "$AGENT" apply --once-from "$WORK/config.yaml" --root "$root" >/dev/null; t1=$(now)
  "$AGENT" apply --once-from "$WORK/config.yaml" --root "$root" >/dev/null; t2=$(now)
  cold+=("$(echo "$t1 - $t0" | bc)"); noop+=("$(echo "$t2 - $t1" | bc)")
  froot="$WORK/floor-$r"; mkdir -p "$froot"
  t0=$(now); python3 "$WORK/floor.py" "$froot" "$FILES"; t1=$(now)
  floor+=("$(echo "$t1 - $t0" | bc)")
done
c=$(printf '%s\n' "${cold[@]}" | median); n=$(printf '%s\n' "${noop[@]}" | median); f=$(printf '%s\n' "${floor[@]}" | median)

# Idle RSS of the daemon on the applied root.
mkdir -p "$WORK/watch" && cp "$WORK/config.yaml" "$WORK/watch/"
"$AGENT" run --watch "$WORK/watch" --root "$WORK/root-1" --interval 1 2>/dev/null &
pid=$!; sleep 5
rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
anon=$(awk '/RssAnon/ {print $2}' /proc/$pid/status)
file=$(awk '/RssFile/ {print $2}' /proc/$pid/status)
kill $pid; wait $pid 2>/dev/null || true

printf 'files: %s x 1 KiB, runs: %s (medians)\n' "$FILES" "$RUNS"
printf 'cold apply:       %.3f s\n' "$c"
printf 'floor (fsync):    %.3f s\n' "$f"
printf 'cold / floor:     %.2f\n' "$(echo "$c / $f" | bc -l)"
printf 'no-op re-apply:   %.1f ms\n' "$(echo "$n * 1000" | bc -l)"
printf 'idle RSS (run):   %.1f MiB (anonymous %.1f, file-backed %.1f: the binary and its libraries)\n' \
  "$(echo "$rss / 1024" | bc -l)" "$(echo "$anon / 1024" | bc -l)" "$(echo "$file / 1024" | bc -l)"
