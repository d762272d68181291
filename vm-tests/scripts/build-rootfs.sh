#!/bin/bash
# Build the root filesystem of a Tier-1 test host: Debian 12 with systemd, D-Bus,
# journald and logind, booted by systemd-nspawn (see vm-tests/README.md).
#
#   build-rootfs.sh DEST
#
# DEST must not exist yet or be empty. Needs root and debootstrap.
# The harness (hearth-vm-tests) caches the result under a key that is the sha256 of this
# file's content: any change here makes the next test run build a fresh tree.
#
# No mirror argument is passed to debootstrap on purpose: its default is the archive
# these machines reach, and no registry host name belongs in the repository.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 DEST" >&2
    exit 2
fi
DEST=$1
if [ "$(id -u)" -ne 0 ]; then
    echo "$0: must run as root" >&2
    exit 1
fi
if [ -e "$DEST" ] && [ -n "$(ls -A "$DEST")" ]; then
    echo "$0: $DEST exists and is not empty" >&2
    exit 1
fi
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd -P)

# debootstrap mounts /proc and /sys inside DEST while it runs; if it is interrupted they
# would stay mounted, and removing DEST would then walk into them.
cleanup() {
    for m in proc sys dev/pts; do
        if mountpoint -q "$DEST/$m" 2>/dev/null; then
            umount -l "$DEST/$m" || true
        fi
    done
}
trap cleanup EXIT

# systemd, systemd-sysv: PID 1 and /sbin/init; dbus: the system bus; libpam-systemd: logind
# sessions (logind itself is part of the systemd package); sudo: the core user's sudo as on
# Fedora CoreOS; procps, iproute2, less: small tools that tests and humans use inside.
# No libostree (nor GLib): the agent links libc only (libostree runs in hearth-ostree-helper,
# which only ostree hosts have), and agent/tests/plain_host.rs checks that it runs here.
PACKAGES=systemd,systemd-sysv,dbus,libpam-systemd,sudo,procps,iproute2,less

echo "build-rootfs: debootstrap bookworm into $DEST"
DEBIAN_FRONTEND=noninteractive debootstrap --variant=minbase --include="$PACKAGES" \
    bookworm "$DEST"

in_root() {
    chroot "$DEST" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"
}

# Mask a unit offline: what `systemctl mask` does, without needing systemctl on the host.
mask() {
    for unit in "$@"; do
        ln -sfn /dev/null "$DEST/etc/systemd/system/$unit"
    done
}

echo "build-rootfs: configuring"

# Users: root without a password (console login needs none), and a `core` user as on
# Fedora CoreOS: uid 1000, home /home/core, passwordless sudo.
in_root passwd -d root >/dev/null
in_root useradd --uid 1000 --user-group --create-home --home-dir /home/core \
    --shell /bin/bash --groups adm,sudo,systemd-journal core
echo 'core ALL=(ALL) NOPASSWD: ALL' >"$DEST/etc/sudoers.d/core"
chmod 0440 "$DEST/etc/sudoers.d/core"

# machine-id: set, so this is not a "first boot" (systemd-firstboot would prompt on the
# console). The harness writes a fresh one into every host's writable layer.
tr -d '-' </proc/sys/kernel/random/uuid >"$DEST/etc/machine-id"
rm -f "$DEST/var/lib/dbus/machine-id"
ln -s /etc/machine-id "$DEST/var/lib/dbus/machine-id"

# The hostname comes from systemd-nspawn (--machine=NAME); debootstrap copies the build
# machine's /etc/hostname, which must not leak into the test hosts.
rm -f "$DEST/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$DEST/etc/hosts"
: >"$DEST/etc/fstab"

# journald: persistent journal (journalctl -b -1 works across reboots of a host), no
# rate limit (tests read what the agent logs), nothing forwarded to the console.
mkdir -p "$DEST/var/log/journal" "$DEST/etc/systemd/journald.conf.d"
cat >"$DEST/etc/systemd/journald.conf.d/50-hearth-test.conf" <<'EOF'
[Journal]
Storage=persistent
RateLimitBurst=0
ForwardToConsole=no
ForwardToWall=no
EOF

# Boot straight to multi-user.target.
ln -sfn /lib/systemd/system/multi-user.target "$DEST/etc/systemd/system/default.target"

# Fast, quiet boot without a terminal: consoles and gettys wait for a tty that nspawn's
# --console=pipe does not give; timers and first-boot units only add noise and time.
mask console-getty.service container-getty@.service getty@.service serial-getty@.service \
    getty-static.service getty.target \
    systemd-firstboot.service \
    apt-daily.timer apt-daily-upgrade.timer apt-daily.service apt-daily-upgrade.service \
    dpkg-db-backup.timer dpkg-db-backup.service \
    e2scrub_all.timer e2scrub_all.service e2scrub_reap.service fstrim.timer \
    systemd-networkd-wait-online.service systemd-network-generator.service

# Status lines on the console are what the harness's nspawn log shows; keep them short.
mkdir -p "$DEST/etc/systemd/system.conf.d"
cat >"$DEST/etc/systemd/system.conf.d/50-hearth-test.conf" <<'EOF'
[Manager]
ShowStatus=yes
StatusUnitFormat=name
DefaultTimeoutStopSec=10s
EOF

# Smaller tree: package caches and lists are not needed in a test host.
rm -rf "$DEST"/var/cache/apt/archives/*.deb "$DEST"/var/lib/apt/lists/* \
    "$DEST"/var/cache/apt/*.bin "$DEST"/var/log/*.log "$DEST"/var/log/apt/*
find "$DEST/tmp" "$DEST/var/tmp" -mindepth 1 -delete

echo "build-rootfs: done ($(du -sxm "$DEST" | cut -f1) MB)"
