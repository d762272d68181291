#!/bin/bash
# Build the ostree-native container images of the OS-image tests (see images/README.md,
# "Container images") from the commits of build-images.sh, into one OCI image layout.
#
#   HEARTH_IMAGES=DIR HEARTH_IMAGE_TOOL=BIN build-oci-images.sh OUT
#
# HEARTH_IMAGES: the output of build-images.sh (its archive repository is read);
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
step "multi: a manifest list"
tool index "$OUT/layout" multi --platform linux/amd64=v1 --platform linux/arm64=v2
sed 's/ /=/' "$OUT/digests.tmp" >"$OUT/digests.env"
rm "$OUT/digests.tmp"
step "done: $(du -sh "$OUT/layout" | cut -f1)"
