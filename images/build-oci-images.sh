#!/bin/bash
# Build the ostree-native container images of the OS-image tests (see images/README.md,
# "Container images") from the commits of build-images.sh, into one OCI image layout.
#
#   HEARTH_IMAGES=DIR HEARTH_IMAGE_TOOL=BIN build-oci-images.sh OUT
#
# HEARTH_IMAGES: the output of build-images.sh or build-vm-image.sh (its archive repository
# `repo` is read; with the VM image's never-booting initramfs, v3 is built too);
# HEARTH_IMAGE_TOOL: the hearth-image-tool binary (images/tool/). Result:
#
#   OUT/layout/        OCI image layout with the tags below
#   OUT/digests.env    TAG=DIGEST lines (manifest digests)
#
#   v1      hearth/debian/v1 encapsulated as an ostree-native, bootable container image
#           (labels ostree.bootable, containers.bootc, version=v1)
#   v2      v1 plus one small layer: /usr/lib/hearth-image-version = v2 (a derived, "layered"
#           image: an update from v1 fetches only that layer)
#   multi   a manifest list: linux/amd64 -> v1, linux/arm64 -> v2 (a node picks its platform)
#   v3      (VM image only) v2 plus one small layer: the kernel's initramfs replaced by one
#           without /init (never-boots-initramfs.img): a deployment of it never reaches its
#           root, the kernel panics (the boot counting test, vm-tests/tests/vm_agent.rs)
#
# Reproducible: fixed timestamps, so the same commits give the same digests. The harness
# (hearth-vm-tests, src/ostree/oci.rs) caches OUT under the sha256 of this script, the images'
# key and the tool's source.
set -euo pipefail
if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "usage: HEARTH_IMAGES=DIR HEARTH_IMAGE_TOOL=BIN $0 OUT" >&2
    exit 2
fi
OUT=$1
: "${HEARTH_IMAGES:?the output directory of build-images.sh}"
: "${HEARTH_IMAGE_TOOL:?the hearth-image-tool binary}"
mkdir -p "$OUT"
STARTED=$SECONDS
step() { echo "build-oci-images: [$((SECONDS - STARTED))s] $*"; }
tool() { "$HEARTH_IMAGE_TOOL" "$@" | tee -a "$OUT/digests.tmp"; }

step "v1: encapsulating hearth/debian/v1"
tool encapsulate "$HEARTH_IMAGES/repo" hearth/debian/v1 "$OUT/layout" v1 --label version=v1
step "v2: v1 plus a layer"
tool derive "$OUT/layout" v1 v2 --file $'/usr/lib/hearth-image-version=v2\n' --label version=v2
if [ -f "$HEARTH_IMAGES/never-boots-initramfs.img" ]; then
    KVER=$(sed -n 's/^KVER=//p' "$HEARTH_IMAGES/kernel.env")
    step "v3: v2 plus a layer with an initramfs that never boots ($KVER)"
    tool derive "$OUT/layout" v2 v3 --label version=v3 \
        --file "/usr/lib/modules/$KVER/initramfs.img=@$HEARTH_IMAGES/never-boots-initramfs.img" \
        --file $'/usr/lib/hearth-image-version=v3\n'
fi
step "multi: a manifest list"
tool index "$OUT/layout" multi --platform linux/amd64=v1 --platform linux/arm64=v2
sed 's/ /=/' "$OUT/digests.tmp" >"$OUT/digests.env"
rm "$OUT/digests.tmp"
step "done: $(du -sh "$OUT/layout" | cut -f1)"
