#!/usr/bin/env bash
# Every test of hearth, on a fresh Debian 12 machine too: as root, installs what the tests need
# first (vm-tests/scripts/install-deps.sh: systemd-nspawn, debootstrap, D-Bus tools, ostree,
# QEMU, the build's -dev packages; nothing is installed when it is all there), then runs
#
#   cargo test --workspace --locked [ARGS...]
#
# The real-host tests boot systemd in containers and need root; as another user this installs
# nothing and says so. The first run also builds the cached test root file system, OS images
# and VM image under /var/tmp/hearth-test-cache (docs/testing.md). CI (.ci/run) calls this.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" -eq 0 ]; then
  vm-tests/scripts/install-deps.sh
else
  echo "test-all: not root: installing nothing; the real-host tests need root (systemd-nspawn)" >&2
fi
# The Kubernetes tier's kube-apiserver and kube-controller-manager (images/build-kube.sh, 5-10
# minutes on two cores the first time, then cached): built in the background while cargo
# compiles; the kube tests wait for it under the cache's lock (and build it themselves, saying
# why, if this did not).
if [ "$(id -u)" -eq 0 ]; then
  kube_log=${HEARTH_TEST_CACHE:-/var/tmp/hearth-test-cache}/build-kube-background.log
  mkdir -p "$(dirname "$kube_log")"
  echo "test-all: the Kubernetes test binaries: images/build-kube.sh --cached in the background (returns at once when cached; log $kube_log)" >&2
  images/build-kube.sh --cached >"$kube_log" 2>&1 &
fi
# The build (about 5 GB in target/) and the cached images share the disk: say how full it is,
# so that a failure for want of space is read as such.
df -h . /tmp /var/tmp 2>/dev/null | awk 'NR == 1 || !seen[$1]++' >&2 || true
exec cargo test --workspace --locked "$@"
