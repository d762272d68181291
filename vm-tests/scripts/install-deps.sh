#!/bin/bash
# Installs the Debian 12 packages that hearth-vm-tests (the Tier-1 test-host harness) needs.
# Idempotent and non-interactive; run as root (CI calls it on a fresh machine).
#
#   systemd-container       systemd-nspawn, which boots the test hosts
#   debootstrap             builds the cached root filesystem (scripts/build-rootfs.sh)
#   debian-archive-keyring  and gpgv: debootstrap checks the archive's signatures with them
#   gpgv
#   wget                    debootstrap downloads with it
#   dbus                    D-Bus tools on the build machine (the hosts bring their own bus)
#   util-linux              nsenter (runs commands inside a host), mountpoint
#   iproute2                ip netns: the network namespace hosts share (SharedNetwork)
#   ostree                  the ostree CLI: builds the OS images (images/build-images.sh) and
#                           the test sysroots of the ostree tier (src/ostree/)
#   e2fsprogs               chattr: deployment directories are immutable; cleanup clears it
#   libostree-dev           to build hearth-ostree-helper (the `ostree` crate links libostree 2022.7)
#   libglib2.0-dev          and its GLib headers, found with pkg-config
#   pkg-config
#   ca-certificates         cargo fetches crates over TLS
#   tzdata                  /usr/share/zoneinfo: maintenance windows in named time zones
#                           (Europe/Berlin) and their tests (config/src/window.rs)
#   selinux-utils           libselinux's selabel_lookup: hostops/tests/selinux_labels.rs checks
#                           hearth's file_contexts lookup against it (no policy is installed)
#   qemu-system-x86         the VM tier (src/qemu/): QEMU with software emulation (TCG); the
#                           harness reads and copies the raw disk itself (e2fsprogs' debugfs),
#                           so qemu-utils is not needed. A machine that has qemu-utils from
#                           backports gets the matching Debian 12 qemu-utils with it (the two
#                           versions conflict), instead of apt removing qemu-utils.
#   ovmf                    the VM tier boots through UEFI firmware (OVMF) and systemd-boot,
#                           whose boot counting it proves; the VM image's ESP is made with
#   dosfstools mtools fdisk mkfs.vfat, mtools and sfdisk (images/build-vm-image.sh)
#   libzstd-dev             hearth-ostree-helper links ostree-ext (container images), whose
#                           zstd-sys builds against the system's libzstd (libssl-dev is below)
#   skopeo docker-registry  OS images as container images (hostops/tests/os_container.rs):
#   apache2-utils gnupg     skopeo pushes the test images (images/build-oci-images.sh) to a
#                           registry the tests start (docker-registry; htpasswd from
#                           apache2-utils), signed with GnuPG keys the tests make
#   golang-go jq rsync      the Kubernetes tier (src/kube/): images/build-kube.sh builds
#   make dpkg-dev           kube-apiserver and kube-controller-manager from Debian's kubernetes
#                           source (apt-get source, dpkg-source, Go 1.19) on first use. Debian's
#                           kubectl (kubernetes-client) is taken from its .deb by that script
#                           rather than installed: another package may own /usr/bin/kubectl.
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    echo "$0: must run as root" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# strace: the agent's tests count its system calls (agent/tests/syscall_counts.rs);
# libssl-dev, gcc, libc6-dev: bench/agent-apply.sh builds the floor's converge.c; gcc and make
# also build jemalloc, hearth-server's allocator (tikv-jemalloc-sys).
PACKAGES=(systemd-container debootstrap debian-archive-keyring gpgv wget dbus util-linux iproute2
    ca-certificates ostree e2fsprogs libostree-dev libglib2.0-dev pkg-config selinux-utils binutils
    strace libssl-dev gcc libc6-dev tzdata ignition policycoreutils chromium chromium-driver
    golang-go jq rsync make dpkg-dev libzstd-dev skopeo docker-registry apache2-utils gnupg
    ovmf dosfstools mtools fdisk)
updated=
apt_update_once() {
    [ -n "$updated" ] || { apt-get update -qq; updated=1; }
}
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    apt_update_once
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v qemu-system-x86_64 >/dev/null; then
    apt_update_once
    qemu_version=$(apt-cache policy qemu-system-x86 | awk '/Candidate:/ {print $2}')
    qemu_extra=()
    utils=$(dpkg-query -W -f='${Status} ${Version}' qemu-utils 2>/dev/null || true)
    if [[ $utils == "install ok installed "* ]] && [ "${utils##* }" != "$qemu_version" ]; then
        echo "install-deps: qemu-utils ${utils##* } does not match qemu-system-x86 $qemu_version: installing qemu-utils $qemu_version with it"
        qemu_extra=("qemu-utils=$qemu_version" --allow-downgrades)
    fi
    apt-get install -y -qq --no-install-recommends qemu-system-x86 "${qemu_extra[@]}" >/dev/null
fi

for tool in systemd-nspawn debootstrap nsenter ip ostree chattr pkg-config selabel_lookup \
    qemu-system-x86_64 debugfs mkfs.ext4 mkfs.vfat mcopy sfdisk strip go jq rsync make dpkg-source; do
    command -v "$tool" >/dev/null || PATH=$PATH:/usr/sbin:/sbin command -v "$tool" >/dev/null || {
        echo "$0: $tool is still missing after the install" >&2
        exit 1
    }
done
echo "install-deps: systemd-nspawn $(systemd-nspawn --version | head -1 | cut -d' ' -f2), debootstrap $(dpkg-query -W -f='${Version}' debootstrap), $(qemu-system-x86_64 --version | head -1)"
