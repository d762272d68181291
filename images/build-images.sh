#!/bin/bash
# Build hearth's ostree OS images for the test tiers (see images/README.md).
#
#   build-images.sh OUT
#
# OUT must not exist yet or be empty. Needs root, debootstrap and ostree (Debian packages
# `debootstrap ostree`; vm-tests/scripts/install-deps.sh installs them). Result:
#
#   OUT/repo/          ostree repository, mode archive, with a summary: what a remote serves
#                      (file:// or http(s)://); pivots pull from it. Commits carry size
#                      metadata (`ostree.sizes`: libostree 2022.7 writes it in archive mode
#                      only), from which hearth computes the space a pull needs
#   OUT/repo-bare/     the same commits in a bare repository: test sysroots import from it
#                      with hard links (`ostree pull-local`), which costs next to nothing
#   OUT/commits.env    REF=CHECKSUM lines, one per commit below
#   OUT/build.log      (written by the caller, if any)
#
# Commits (refs), all from one debootstrap tree of Debian 12:
#
#   hearth/debian/v1         systemd, dbus, logind, ostree + ostree-boot (finalize-staged units),
#                            a `core` user, placeholder kernel 6.1.0-hearth in
#                            usr/lib/modules/6.1.0-hearth/{vmlinuz,initramfs.img};
#                            /usr/lib/hearth-image-version = v1
#   hearth/debian/v1-rt      v1 with the "realtime" placeholder kernel 6.1.0-hearth-rt instead
#                            (4 MiB, so that a small /boot runs out of space);
#                            /usr/lib/hearth-kernel-type = realtime
#   hearth/debian/v2         v1 plus a visible change: /usr/lib/hearth-image-version = v2
#   hearth/debian/v2-rt      v2 with the realtime kernel
#   hearth/debian/v2-broken  v2 that does not boot healthy: hearth-image-broken.service fails
#                            at every boot (the system ends `degraded`);
#                            /usr/lib/hearth-image-version = v2-broken
#
# The kernels are placeholders: the nspawn tier never runs them (the container shares the
# machine's kernel), but libostree treats them as real (boot checksum, /boot/ostree/...,
# BLS entries). The VM tier (next increment) replaces them with Debian's kernel and a dracut
# initramfs with the ostree module.
#
# The harness (hearth-vm-tests, src/ostree.rs) caches OUT under the sha256 of this script:
# any change here makes the next test run build fresh images.
#
# No mirror argument is passed to debootstrap on purpose: its default is the archive these
# machines reach, and no registry host name belongs in the repository.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
export LC_ALL=C.UTF-8

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: $0 OUT" >&2
    exit 2
fi
OUT=$1
if [ "$(id -u)" -ne 0 ]; then
    echo "$0: must run as root" >&2
    exit 1
fi
for tool in debootstrap ostree; do
    command -v "$tool" >/dev/null || {
        echo "$0: $tool is missing (Debian package $tool; vm-tests/scripts/install-deps.sh)" >&2
        exit 1
    }
done
if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT")" ]; then
    echo "$0: $OUT exists and is not empty" >&2
    exit 1
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd -P)
TREE=$OUT/tree
STARTED=$SECONDS

# debootstrap mounts /proc and /sys inside the tree while it runs; if it is interrupted they
# would stay mounted. The tree is only a build intermediate: it is removed at the end.
cleanup() {
    for m in proc sys dev/pts; do
        if mountpoint -q "$TREE/$m" 2>/dev/null; then
            umount -l "$TREE/$m" || true
        fi
    done
}
trap cleanup EXIT

step() { echo "build-images: [$((SECONDS - STARTED))s] $*"; }

# ---------------------------------------------------------------------------------------------
# 1. The Debian tree.
# ---------------------------------------------------------------------------------------------
# systemd, systemd-sysv, dbus, libpam-systemd: PID 1, the system bus, logind; ostree,
# ostree-boot: the ostree CLI, libostree and the boot integration (ostree-finalize-staged.path
# and .service, which finalize a staged deployment at shutdown); sudo: the core user's sudo;
# procps, iproute2, less: small tools for tests and humans. skopeo with its containers
# configuration (golang-github-containers-common and -image; netavark satisfies the virtual
# container-network-stack the former depends on, which debootstrap does not resolve), libssl3,
# libzstd1, zlib1g: what hearth-ostree-helper needs on a node that deploys container images.
PACKAGES=systemd,systemd-sysv,dbus,libpam-systemd,ostree,ostree-boot,sudo,procps,iproute2,less
PACKAGES=$PACKAGES,skopeo,golang-github-containers-common,golang-github-containers-image
PACKAGES=$PACKAGES,netavark,libssl3,libzstd1,zlib1g
step "debootstrap bookworm ($PACKAGES)"
DEBIAN_FRONTEND=noninteractive debootstrap --variant=minbase --include="$PACKAGES" \
    bookworm "$TREE"
cleanup

in_root() {
    chroot "$TREE" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"
}
mask() {
    for unit in "$@"; do
        ln -sfn /dev/null "$TREE/etc/systemd/system/$unit"
    done
}

step "configuring the tree"
# Users: root without a password; `core` as on Fedora CoreOS (uid 1000, passwordless sudo).
# Its home is created below /var/home (see the symlinks further down).
in_root passwd -d root >/dev/null
in_root useradd --uid 1000 --user-group --create-home --home-dir /home/core \
    --shell /bin/bash --groups adm,sudo,systemd-journal core
echo 'core ALL=(ALL) NOPASSWD: ALL' >"$TREE/etc/sudoers.d/core"
chmod 0440 "$TREE/etc/sudoers.d/core"

# No machine-id in an image: every deployment of every host gets its own (the test harness
# writes one into the first deployment's /etc; ostree carries it to later deployments).
: >"$TREE/etc/machine-id"
rm -f "$TREE/var/lib/dbus/machine-id"
ln -s /etc/machine-id "$TREE/var/lib/dbus/machine-id"
rm -f "$TREE/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$TREE/etc/hosts"
: >"$TREE/etc/fstab"

mkdir -p "$TREE/var/log/journal" "$TREE/etc/systemd/journald.conf.d"
cat >"$TREE/etc/systemd/journald.conf.d/50-hearth-test.conf" <<'EOF'
[Journal]
Storage=persistent
RateLimitBurst=0
ForwardToConsole=no
ForwardToWall=no
EOF
ln -sfn /lib/systemd/system/multi-user.target "$TREE/etc/systemd/system/default.target"
mask console-getty.service container-getty@.service getty@.service serial-getty@.service \
    getty-static.service getty.target \
    systemd-firstboot.service \
    apt-daily.timer apt-daily-upgrade.timer apt-daily.service apt-daily-upgrade.service \
    dpkg-db-backup.timer dpkg-db-backup.service \
    e2scrub_all.timer e2scrub_all.service e2scrub_reap.service fstrim.timer \
    systemd-networkd-wait-online.service systemd-network-generator.service
mkdir -p "$TREE/etc/systemd/system.conf.d"
cat >"$TREE/etc/systemd/system.conf.d/50-hearth-test.conf" <<'EOF'
[Manager]
ShowStatus=yes
StatusUnitFormat=name
DefaultTimeoutStopSec=10s
EOF

# Staged deployments are finalized at shutdown by ostree-finalize-staged.service, which
# ostree-finalize-staged.path starts once /run/ostree/staged-deployment appears.
mkdir -p "$TREE/etc/systemd/system/multi-user.target.wants"
ln -sfn /lib/systemd/system/ostree-finalize-staged.path \
    "$TREE/etc/systemd/system/multi-user.target.wants/ostree-finalize-staged.path"
test -f "$TREE/lib/systemd/system/ostree-finalize-staged.service"

# /run/ostree-booted: on a real boot, ostree-prepare-root (initramfs) creates it. A deployment
# booted by systemd-nspawn has no initramfs, so a tmpfiles line does it (harmless on a real
# boot: `f` does not touch an existing file).
cat >"$TREE/usr/lib/tmpfiles.d/hearth-ostree-booted.conf" <<'EOF'
# hearth test images: mark the system as booted from an ostree deployment (on a real boot
# ostree-prepare-root has done this already in the initramfs).
f /run/ostree-booted 0644 root root -
EOF

# The ostree layout of the persistent state: home directories, root's home, /usr/local, /opt,
# /srv and /mnt live in /var (shared by all deployments), as on Fedora CoreOS.
mkdir -p "$TREE/var/usrlocal"
cp -a "$TREE/usr/local/." "$TREE/var/usrlocal/"
rm -rf "${TREE:?}/usr/local"
ln -s ../var/usrlocal "$TREE/usr/local"
mv "$TREE/home" "$TREE/var/home"
ln -s var/home "$TREE/home"
mv "$TREE/root" "$TREE/var/roothome"
ln -s var/roothome "$TREE/root"
for d in opt srv mnt; do
    rm -rf "${TREE:?}/$d"
    mkdir -p "$TREE/var/$d"
    ln -s "var/$d" "$TREE/$d"
done
cat >"$TREE/usr/lib/tmpfiles.d/hearth-ostree-var.conf" <<'EOF'
# hearth test images: the directories that the ostree layout keeps in /var.
d /var/home 0755 root root -
d /var/roothome 0700 root root -
d /var/usrlocal 0755 root root -
d /var/usrlocal/bin 0755 root root -
d /var/usrlocal/sbin 0755 root root -
d /var/opt 0755 root root -
d /var/srv 0755 root root -
d /var/mnt 0755 root root -
EOF

# The sysroot mount point and the /ostree link libostree uses inside a booted deployment.
mkdir -p "$TREE/sysroot"
ln -s sysroot/ostree "$TREE/ostree"

# Smaller tree: package caches and lists are not needed.
rm -rf "$TREE"/var/cache/apt/archives/*.deb "$TREE"/var/lib/apt/lists/* \
    "$TREE"/var/cache/apt/*.bin "$TREE"/var/log/*.log "$TREE"/var/log/apt/*
find "$TREE/tmp" "$TREE/var/tmp" "$TREE/run" "$TREE/boot" -mindepth 1 -delete

# ostree stores regular files, directories and symlinks only: no device nodes, FIFOs or
# sockets (debootstrap leaves some in /dev).
find "$TREE" -xdev \( -type b -o -type c -o -type p -o -type s \) -delete
find "$TREE/dev" -mindepth 1 -delete

# /etc is the image's default configuration: ostree keeps it in /usr/etc and merges it with
# the host's /etc at every deployment.
mv "$TREE/etc" "$TREE/usr/etc"

# ---------------------------------------------------------------------------------------------
# 2. Kernels (placeholders) and variants.
# ---------------------------------------------------------------------------------------------
# placeholder_kernel VERSION BYTES: usr/lib/modules/VERSION/{vmlinuz,initramfs.img}, filled
# with a repeated, deterministic text (BYTES for vmlinuz; the initramfs is a quarter of it).
placeholder_kernel() {
    local version=$1 bytes=$2 dir="$TREE/usr/lib/modules/$1"
    rm -rf "$TREE"/usr/lib/modules/6.1.0-hearth*
    mkdir -p "$dir"
    # (`yes` dies of SIGPIPE when head has enough: not an error under pipefail.)
    { yes "hearth placeholder kernel $version: the nspawn tier does not run it" || true; } |
        head -c "$bytes" >"$dir/vmlinuz"
    { yes "hearth placeholder initramfs $version" || true; } |
        head -c "$((bytes / 4))" >"$dir/initramfs.img"
}

REPO_BARE=$OUT/repo-bare
REPO=$OUT/repo
ostree init --repo="$REPO" --mode=archive
: >"$OUT/commits.env"

# commit REF VERSION SUBJECT: commits the tree as it is now.
commit() {
    local ref=$1 version=$2 subject=$3
    step "commit $ref"
    local csum
    csum=$(ostree commit --repo="$REPO" --branch="$ref" --tree=dir="$TREE" \
        --subject="$subject" --add-metadata-string=version="$version" \
        --generate-sizes --timestamp="2026-01-01 00:00:00 +0000")
    echo "$ref=$csum" >>"$OUT/commits.env"
}

placeholder_kernel 6.1.0-hearth 65536
echo v1 >"$TREE/usr/lib/hearth-image-version"
echo default >"$TREE/usr/lib/hearth-kernel-type"
commit hearth/debian/v1 v1 "hearth test image v1 (Debian 12)"

placeholder_kernel 6.1.0-hearth-rt 4194304
echo realtime >"$TREE/usr/lib/hearth-kernel-type"
commit hearth/debian/v1-rt v1-rt "hearth test image v1, realtime kernel"

echo v2 >"$TREE/usr/lib/hearth-image-version"
commit hearth/debian/v2-rt v2-rt "hearth test image v2, realtime kernel"

placeholder_kernel 6.1.0-hearth 65536
echo default >"$TREE/usr/lib/hearth-kernel-type"
commit hearth/debian/v2 v2 "hearth test image v2 (Debian 12)"

# The broken variant: a unit that fails at every boot, so the system ends `degraded`; the
# agent's health check (next increment) must not accept it.
echo v2-broken >"$TREE/usr/lib/hearth-image-version"
cat >"$TREE/usr/lib/systemd/system/hearth-image-broken.service" <<'EOF'
[Unit]
Description=hearth test image v2-broken: fails at every boot on purpose
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'echo "hearth-image-broken: this image is broken on purpose" >&2; exit 1'
[Install]
WantedBy=multi-user.target
EOF
ln -sfn /usr/lib/systemd/system/hearth-image-broken.service \
    "$TREE/usr/etc/systemd/system/multi-user.target.wants/hearth-image-broken.service"
commit hearth/debian/v2-broken v2-broken "hearth test image v2, broken on purpose"

# ---------------------------------------------------------------------------------------------
# 3. The summary of the served repository, and the bare copy for test sysroots.
# ---------------------------------------------------------------------------------------------
step "summary and bare repository"
ostree summary --repo="$REPO" --update
ostree show --repo="$REPO" --print-sizes hearth/debian/v1
ostree init --repo="$REPO_BARE" --mode=bare
# shellcheck disable=SC2046 # one ref per word
ostree pull-local --repo="$REPO_BARE" "$REPO" $(cut -d= -f1 "$OUT/commits.env")

step "removing the build tree"
rm -rf "$TREE"
ostree refs --repo="$REPO"
cat "$OUT/commits.env"
step "done: bare $(du -sm "$REPO_BARE" | cut -f1) MB, archive $(du -sm "$REPO" | cut -f1) MB"
