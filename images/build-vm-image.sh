#!/bin/bash
# Build hearth's bootable VM image: Debian 12 with a real kernel and a dracut initramfs with the
# ostree module, deployed with libostree into a sysroot, on a GPT disk with an ESP that
# systemd-boot boots from (see images/README.md, "The VM image").
#
#   build-vm-image.sh OUT
#
# OUT must not exist yet or be empty. Needs root, debootstrap, ostree, mkfs.ext4, mkfs.vfat,
# mtools and sfdisk (Debian packages `debootstrap ostree e2fsprogs dosfstools mtools fdisk`;
# vm-tests/scripts/install-deps.sh installs them). No loop device and no mount of the disk: the
# sysroot is made in a directory and written into a file system image with `mkfs.ext4 -d`, the
# ESP is filled with mtools, both are put into the partitioned disk with dd. Result:
#
#   OUT/disk.raw       raw disk image (sparse), GPT:
#                        1  hearth-esp   FAT32, 256 MiB at 1 MiB: EFI/BOOT/BOOTX64.EFI =
#                                        systemd-boot (OVMF boots it as removable media),
#                                        loader/loader.conf (timeout 0), the v1 entry with its
#                                        kernel and initrd under /hearth
#                        2  hearth-root  ext4 labelled hearth-root, 2 GiB at 257 MiB: the
#                                        sysroot (/ostree/repo with the commits below,
#                                        /ostree/deploy/debian/deploy/<v1>.0, ostree's own
#                                        /boot/loader/entries, which systemd-boot cannot read
#                                        on ext4: hearth syncs them to the ESP)
#                      The guest mounts the ESP at /efi (fstab, by partition name).
#   OUT/disk.env       ESP_OFFSET= and ROOT_OFFSET= (bytes)
#   OUT/commits.env    REF=CHECKSUM lines, one per commit
#   OUT/kernel.env     KVER=<kernel version> and the first deployment's KARGS=...
#   OUT/repo/          an archive repository with the two commits (the OS container images
#                      are made from it: build-oci-images.sh)
#   OUT/never-boots-initramfs.img
#                      a valid initramfs without /init: a kernel booted with it cannot mount
#                      the root and panics (the image v3 of build-oci-images.sh)
#
# Commits (refs) in the disk's repository, from one tree:
#
#   hearth/debian/v1   Debian 12 minbase, systemd, udev, dbus, ostree + ostree-boot, the Debian
#                      kernel (linux-image-amd64, drivers a VM does not need removed) and a
#                      dracut initramfs with the ostree module in usr/lib/modules/<kver>/;
#                      systemd-boot, systemd-networkd (10.0.2.15 on QEMU's user network),
#                      skopeo and containers-common (OS image pulls);
#                      hearth-share.service mounts the 9p share `hearth` at /run/hearth-test and
#                      hearth-guest.service runs /run/hearth-test/guest.sh from it (the harness's
#                      side of the conversation); /usr/lib/hearth-image-version = v1
#   hearth/debian/v2   v1 plus /usr/lib/hearth-image-version = v2 (the same kernel)
#
# The harness (hearth-vm-tests, src/qemu/) caches OUT under the sha256 of this script: any
# change here makes the next VM test run build a fresh image.
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
for tool in debootstrap ostree mkfs.ext4 chattr mkfs.vfat mmd mcopy sfdisk; do
    command -v "$tool" >/dev/null || {
        echo "$0: $tool is missing (vm-tests/scripts/install-deps.sh installs it)" >&2
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
SYSROOT=$OUT/sysroot
STARTED=$SECONDS

# Mounts made here (proc/sys/dev for the chroot, a tmpfs for the sysroot's /boot) must not
# outlive an interrupted build; the build directories are removed at the end.
cleanup() {
    for m in "$TREE/dev/pts" "$TREE/dev" "$TREE/proc" "$TREE/sys" "$SYSROOT/boot"; do
        if mountpoint -q "$m" 2>/dev/null; then
            umount -l "$m" || true
        fi
    done
}
trap cleanup EXIT

step() { echo "build-vm-image: [$((SECONDS - STARTED))s] $*"; }

# ---------------------------------------------------------------------------------------------
# 1. The Debian tree: minbase plus systemd, udev, dbus, ostree, dracut; then the kernel.
# ---------------------------------------------------------------------------------------------
PACKAGES=systemd,systemd-sysv,udev,dbus,kmod,ostree,ostree-boot,dracut,dracut-core,procps
# The boot loader and boot counting: systemd-boot's EFI binary (copied to the ESP below) and
# systemd-bless-boot (marks an entry good at boot-complete.target). skopeo with its containers
# configuration: hearth-ostree-helper pulls OS images with it (netavark satisfies the virtual
# package containers-common depends on). cpio: the never-booting initramfs below.
PACKAGES=$PACKAGES,systemd-boot,systemd-boot-efi,skopeo,golang-github-containers-common
PACKAGES=$PACKAGES,golang-github-containers-image,netavark,libssl3,libzstd1,zlib1g,cpio
step "debootstrap bookworm ($PACKAGES)"
DEBIAN_FRONTEND=noninteractive debootstrap --variant=minbase --include="$PACKAGES" \
    bookworm "$TREE"
cleanup

in_root() {
    chroot "$TREE" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive "$@"
}

# The kernel's postinst hook would run dracut on a kernel we have not trimmed yet: the hook is
# switched off while the package installs, and dracut runs once, below, on the final tree.
step "installing linux-image-amd64"
mount -t proc proc "$TREE/proc"
mount -t sysfs sysfs "$TREE/sys"
mount --bind /dev "$TREE/dev"
# systemd-boot's hook would install the kernel into an ESP: hearth puts kernels there (see 6).
chmod -x "$TREE/etc/kernel/postinst.d/dracut" "$TREE/etc/kernel/postinst.d/zz-systemd-boot"
in_root apt-get install -y -q --no-install-recommends linux-image-amd64 >/dev/null
chmod +x "$TREE/etc/kernel/postinst.d/dracut"
KVER=$(basename "$(find "$TREE/usr/lib/modules" -mindepth 1 -maxdepth 1 -type d | sort | tail -1)")
test -f "$TREE/boot/vmlinuz-$KVER"

# A VM needs virtio, ext4, 9p and little else: removing the rest of the modules takes the tree
# from ~400 MB of modules to well under 100 MB (faster to commit, copy and boot).
step "trimming the modules of $KVER"
K=$TREE/usr/lib/modules/$KVER/kernel
for d in sound drivers/gpu drivers/media drivers/infiniband drivers/staging \
    drivers/usb drivers/iio drivers/isdn drivers/bluetooth drivers/mmc drivers/mtd \
    drivers/hid drivers/input drivers/hwmon drivers/thunderbolt drivers/nfc drivers/video \
    drivers/scsi drivers/ata drivers/md drivers/target drivers/nvme drivers/firewire \
    drivers/platform drivers/leds drivers/power drivers/i2c drivers/spi drivers/w1 \
    drivers/pinctrl drivers/gpio drivers/mfd drivers/misc drivers/edac drivers/crypto \
    drivers/atm drivers/pcmcia drivers/parport drivers/ptp drivers/pps drivers/rtc \
    drivers/regulator drivers/watchdog drivers/xen drivers/hv drivers/vfio drivers/vhost \
    drivers/soundwire drivers/fpga drivers/comedi drivers/uio drivers/dma drivers/ntb \
    net/wireless net/mac80211 net/bluetooth net/netfilter net/ipv4 net/ipv6 net/sched \
    net/sunrpc net/ceph net/rxrpc net/sctp net/tipc net/rds net/bridge net/openvswitch \
    net/mpls net/batman-adv net/nfc net/can net/ieee802154 net/l2tp net/netlink net/xfrm \
    fs/nfs fs/nfsd fs/ceph fs/btrfs fs/xfs fs/ocfs2 fs/gfs2 fs/smb fs/cifs fs/f2fs fs/ntfs3 \
    fs/jfs fs/reiserfs fs/nilfs2 fs/ubifs fs/dlm fs/afs fs/coda fs/orangefs fs/bcachefs \
    fs/ufs fs/hfs fs/hfsplus fs/udf fs/isofs fs/squashfs fs/erofs fs/exfat; do
    rm -rf "${K:?}/$d"
done
# Kept: fs/fat and fs/nls (the ESP is mounted at /efi), and of drivers/net the virtio NIC
# (net_failover is its dependency): the guest pulls OS images from the test's registry.
mkdir -p "$K/drivers/net.keep"
mv "$K"/drivers/net/virtio_net.ko* "$K"/drivers/net/net_failover.ko* "$K/drivers/net.keep/"
rm -rf "$K/drivers/net"
mv "$K/drivers/net.keep" "$K/drivers/net"
in_root depmod -a "$KVER"

# ---------------------------------------------------------------------------------------------
# 2. Configuration: boot on a VM console, the 9p share, nothing slow at boot.
# ---------------------------------------------------------------------------------------------
step "configuring the tree"
in_root passwd -d root >/dev/null
: >"$TREE/etc/machine-id"
rm -f "$TREE/var/lib/dbus/machine-id" "$TREE/etc/hostname"
echo hearth-vm >"$TREE/etc/hostname"
printf '127.0.0.1\tlocalhost hearth-vm\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' \
    >"$TREE/etc/hosts"
: >"$TREE/etc/fstab"
# The ESP (FAT, GPT partition name hearth-esp) at /efi, where hearth's boot entry sync and
# systemd-bless-boot find it. nofail: a boot without it still reaches the guest script.
mkdir -p "$TREE/efi"
echo 'PARTLABEL=hearth-esp /efi vfat umask=0077,nofail,x-systemd.device-timeout=30s 0 0' \
    >"$TREE/etc/fstab"
# The network the tests' registry is reached on: QEMU's user-mode network, the registry
# forwarded to 10.0.2.100 (see vm-tests/src/qemu/boot.rs). Static: no DHCP wait at boot.
mkdir -p "$TREE/etc/systemd/network"
cat >"$TREE/etc/systemd/network/10-hearth-vm.network" <<'EOF'
[Match]
Name=en* eth*
[Network]
Address=10.0.2.15/24
Gateway=10.0.2.2
LinkLocalAddressing=no
IPv6AcceptRA=no
EOF
in_root systemctl enable systemd-networkd.service >/dev/null 2>&1
ln -sfn /lib/systemd/system/multi-user.target "$TREE/etc/systemd/system/default.target"
for unit in getty@.service serial-getty@.service getty-static.service getty.target \
    console-getty.service systemd-firstboot.service \
    apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer \
    e2scrub_reap.service fstrim.timer systemd-timesyncd.service \
    systemd-networkd-wait-online.service systemd-network-generator.service \
    systemd-pstore.service; do
    ln -sfn /dev/null "$TREE/etc/systemd/system/$unit"
done
mkdir -p "$TREE/etc/systemd/system.conf.d"
cat >"$TREE/etc/systemd/system.conf.d/50-hearth-vm.conf" <<'EOF'
[Manager]
ShowStatus=yes
StatusUnitFormat=name
DefaultTimeoutStopSec=20s
EOF

# Staged deployments are finalized at shutdown by ostree-finalize-staged.service.
mkdir -p "$TREE/etc/systemd/system/multi-user.target.wants"
ln -sfn /lib/systemd/system/ostree-finalize-staged.path \
    "$TREE/etc/systemd/system/multi-user.target.wants/ostree-finalize-staged.path"

# The harness's share: QEMU exports a host directory with `-virtfs ...,mount_tag=hearth`.
# A oneshot service mounts it (a .mount unit would be started before the 9p transport's
# module is loaded by udev and fail), and hearth-guest.service runs the harness's script from
# it, with its output on the serial console.
cat >"$TREE/usr/lib/systemd/system/hearth-share.service" <<'EOF'
[Unit]
Description=hearth VM tests: mount the harness's 9p share at /run/hearth-test
DefaultDependencies=no
After=systemd-udev-settle.service systemd-udevd.service local-fs.target
Before=hearth-guest.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStartPre=/sbin/modprobe -a 9p 9pnet_virtio
ExecStartPre=/bin/mkdir -p /run/hearth-test
ExecStart=/bin/mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 hearth /run/hearth-test
ExecStop=/bin/umount -l /run/hearth-test
[Install]
WantedBy=multi-user.target
EOF
cat >"$TREE/usr/lib/systemd/system/hearth-guest.service" <<'EOF'
[Unit]
Description=hearth VM tests: the harness's guest script (/run/hearth-test/guest.sh)
Requires=hearth-share.service
After=hearth-share.service basic.target
ConditionPathExists=/run/hearth-test/guest.sh
[Service]
Type=simple
ExecStart=/bin/bash /run/hearth-test/guest.sh
StandardOutput=journal+console
StandardError=journal+console
KillMode=mixed
[Install]
WantedBy=multi-user.target
EOF
ln -sfn /usr/lib/systemd/system/hearth-share.service \
    "$TREE/etc/systemd/system/multi-user.target.wants/hearth-share.service"
ln -sfn /usr/lib/systemd/system/hearth-guest.service \
    "$TREE/etc/systemd/system/multi-user.target.wants/hearth-guest.service"

# ---------------------------------------------------------------------------------------------
# 3. The initramfs: dracut with the ostree module (ostree-prepare-root mounts the deployment
#    named by `ostree=` as the real root), only the drivers a QEMU guest needs.
# ---------------------------------------------------------------------------------------------
step "dracut --no-hostonly --add ostree ($KVER)"
test -d "$TREE/usr/lib/dracut/modules.d/98ostree"
in_root dracut --force --no-hostonly --add ostree \
    --omit "i18n network network-legacy nfs iscsi nbd fcoe lvm mdraid dmraid crypt multipath" \
    --drivers "virtio_pci virtio_blk ext4 crc32c_generic crc32c_intel" \
    "/boot/initramfs-$KVER.img" "$KVER"
mkdir -p "$TREE/usr/lib/modules/$KVER"
cp "$TREE/boot/vmlinuz-$KVER" "$TREE/usr/lib/modules/$KVER/vmlinuz"
cp "$TREE/boot/initramfs-$KVER.img" "$TREE/usr/lib/modules/$KVER/initramfs.img"
# An initramfs that cannot mount the root (no /init, no drivers): the kernel panics, and with
# panic=1 resets the machine. The OS image v3 carries it (build-oci-images.sh).
mkdir -p "$TREE/tmp/never-boots"
echo "hearth VM tests: an initramfs without /init (this boot never reaches the root)" \
    >"$TREE/tmp/never-boots/README"
in_root sh -c 'cd /tmp/never-boots && find . | cpio --quiet -o -H newc' \
    >"$OUT/never-boots-initramfs.img"
LISTING=$(in_root lsinitrd "/boot/initramfs-$KVER.img")
for f in ostree-prepare-root virtio_blk.ko ext4.ko; do
    grep -q "$f" <<<"$LISTING" || {
        echo "$0: the initramfs has no $f" >&2
        exit 1
    }
done
cleanup

# ---------------------------------------------------------------------------------------------
# 4. The ostree layout of the tree (see images/README.md for the reasons).
# ---------------------------------------------------------------------------------------------
step "ostree layout"
rm -rf "$TREE"/var/cache/apt/archives/*.deb "$TREE"/var/lib/apt/lists/* \
    "$TREE"/var/cache/apt/*.bin "$TREE"/var/log/*.log "$TREE"/var/log/apt/* \
    "$TREE"/usr/share/doc/* "$TREE"/usr/share/man/* "$TREE"/usr/share/locale/*
find "$TREE/tmp" "$TREE/var/tmp" "$TREE/run" "$TREE/boot" -mindepth 1 -delete
find "$TREE" -xdev \( -type b -o -type c -o -type p -o -type s \) -delete
find "$TREE/dev" -mindepth 1 -delete
mkdir -p "$TREE/sysroot"
ln -s sysroot/ostree "$TREE/ostree"
mv "$TREE/etc" "$TREE/usr/etc"
echo v1 >"$TREE/usr/lib/hearth-image-version"

# ---------------------------------------------------------------------------------------------
# 5. The sysroot: commits v1 and v2 straight into its repository, v1 deployed.
# ---------------------------------------------------------------------------------------------
step "sysroot"
mkdir -p "$SYSROOT"
ostree admin init-fs "$SYSROOT"
ostree admin os-init debian --sysroot="$SYSROOT"
REPO=$SYSROOT/ostree/repo
: >"$OUT/commits.env"
commit() {
    local ref=$1 version=$2
    step "commit $ref"
    local csum
    csum=$(ostree commit --repo="$REPO" --branch="$ref" --tree=dir="$TREE" \
        --subject="hearth VM image $version (Debian 12, kernel $KVER)" \
        --add-metadata-string=version="$version" --timestamp="2026-01-01 00:00:00 +0000")
    echo "$ref=$csum" >>"$OUT/commits.env"
}
commit hearth/debian/v1 v1
echo v2 >"$TREE/usr/lib/hearth-image-version"
commit hearth/debian/v2 v2
rm -rf "$TREE"

# libostree freezes and thaws the file system of /boot after writing boot entries: not the
# build machine's root file system. /boot is a tmpfs while deploying, copied back afterwards.
# panic=1: a kernel that cannot mount the root resets the machine (a failed try the boot loader
# counts) instead of hanging; rd.shell=0 rd.emergency=reboot: the same for the initramfs.
KARGS="root=LABEL=hearth-root rw console=ttyS0 panic=1 rd.shell=0 rd.emergency=reboot"
step "deploy hearth/debian/v1 ($KARGS)"
mount -t tmpfs -o size=256m,mode=0755 hearth-vm-boot "$SYSROOT/boot"
set --
for a in $KARGS; do set -- "$@" "--karg-append=$a"; done
ostree admin deploy --sysroot="$SYSROOT" --os=debian "$@" hearth/debian/v1
cp -a "$SYSROOT/boot" "$OUT/boot.tmp"
umount "$SYSROOT/boot"
cp -a "$OUT/boot.tmp/." "$SYSROOT/boot/"
rm -rf "$OUT/boot.tmp"
DEPLOY=$(find "$SYSROOT/ostree/deploy/debian/deploy" -mindepth 1 -maxdepth 1 -type d | head -1)
# A machine-id, so that the first boot is not a "first boot" (which would preset all units).
tr -d '-' </proc/sys/kernel/random/uuid >"$DEPLOY/etc/machine-id"
cat "$SYSROOT"/boot/loader/entries/*.conf
{
    echo "KVER=$KVER"
    echo "KARGS=\"$KARGS\""
} >"$OUT/kernel.env"

# ---------------------------------------------------------------------------------------------
# 6. The ESP: systemd-boot as the removable-media boot loader (OVMF starts it without any EFI
#    variable), loader.conf, and the deployment's entry with its kernel and initrd, laid out
#    as hearth's boot entry sync writes them (hostops/src/os/bootcount/): files under /hearth
#    at their path in /boot, one entry per deployment named hearth-<os>-<checksum>.<serial>,
#    sort-key hearth. No counter: this deployment is known to boot. mkfs.vfat on a file and
#    mtools (no loop device, no mount).
# ---------------------------------------------------------------------------------------------
step "the ESP (FAT32, 256 MiB)"
ESP=$OUT/esp.img
truncate -s 256M "$ESP"
mkfs.vfat -F 32 -n HEARTH-ESP "$ESP" >/dev/null
export MTOOLS_SKIP_CHECK=1
mmd -i "$ESP" ::/EFI ::/EFI/BOOT ::/loader ::/loader/entries ::/hearth
mcopy -i "$ESP" "$DEPLOY/usr/lib/systemd/boot/efi/systemd-bootx64.efi" ::/EFI/BOOT/BOOTX64.EFI
printf 'timeout 0\neditor no\nconsole-mode keep\n' >"$OUT/loader.conf"
mcopy -i "$ESP" "$OUT/loader.conf" ::/loader/loader.conf
rm "$OUT/loader.conf"
ENTRY=$(find "$SYSROOT/boot/loader/entries" -name '*.conf' | head -1)
ESP_ENTRY=$OUT/hearth-debian-$(basename "$DEPLOY").conf
: >"$ESP_ENTRY"
while read -r key value; do
    case $key in
    linux | initrd)
        dir=/hearth
        IFS=/ read -ra parts <<<"$(dirname "${value#/}")"
        for part in "${parts[@]}"; do
            dir=$dir/$part
            mmd -i "$ESP" "::$dir" 2>/dev/null || true # exists already (the initrd's dir)
        done
        mcopy -n -i "$ESP" "$SYSROOT/boot$value" "::/hearth$value"
        echo "$key /hearth$value" >>"$ESP_ENTRY"
        ;;
    title | version | options) echo "$key $value" >>"$ESP_ENTRY" ;;
    esac
done <"$ENTRY"
echo "sort-key hearth" >>"$ESP_ENTRY"
mcopy -i "$ESP" "$ESP_ENTRY" ::/loader/entries/
cat "$ESP_ENTRY"
rm "$ESP_ENTRY"
mdir -i "$ESP" -/ ::/ | grep -v '^$' | tail -5

# The archive repository the OS container images are made from (build-oci-images.sh).
step "archive repository (v1, v2)"
ostree init --repo="$OUT/repo" --mode=archive
ostree pull-local --repo="$OUT/repo" "$SYSROOT/ostree/repo" hearth/debian/v1 hearth/debian/v2

# ---------------------------------------------------------------------------------------------
# 7. The disk: GPT, the ESP and the root (mkfs.ext4 -d: no loop device, no mount), put at
#    their partitions' offsets with dd.
# ---------------------------------------------------------------------------------------------
step "mkfs.ext4 -d (2 GiB, sparse)"
mkfs.ext4 -q -F -L hearth-root -d "$SYSROOT" "$OUT/root.img" 2G
chattr -R -i "$SYSROOT/ostree/deploy" 2>/dev/null || true
rm -rf "$SYSROOT"
step "the disk: GPT (ESP at 1 MiB, root at 257 MiB)"
truncate -s $((1 + 256 + 2048 + 1))M "$OUT/disk.raw"
sfdisk -q "$OUT/disk.raw" <<'EOF'
label: gpt
start=1MiB, size=256MiB, type=U, name=hearth-esp
start=257MiB, size=2048MiB, type=L, name=hearth-root
EOF
dd if="$ESP" of="$OUT/disk.raw" bs=1M seek=1 conv=notrunc,sparse status=none
dd if="$OUT/root.img" of="$OUT/disk.raw" bs=1M seek=257 conv=notrunc,sparse status=none
rm "$ESP" "$OUT/root.img"
{
    echo "ESP_OFFSET=$((1 << 20))"
    echo "ROOT_OFFSET=$((257 << 20))"
} >"$OUT/disk.env"
sfdisk -d "$OUT/disk.raw"
cat "$OUT/commits.env" "$OUT/kernel.env" "$OUT/disk.env"
step "done: disk.raw $(du -m "$OUT/disk.raw" | cut -f1) MB used of $(($(stat -c %s "$OUT/disk.raw") >> 20)) MB"
