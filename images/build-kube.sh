#!/bin/bash
# Build a real Kubernetes control plane for hearth's tests: kube-apiserver and
# kube-controller-manager from Debian's `kubernetes` source package (1.20.2), plus Debian's
# kubectl (`kubernetes-client`, the same source and version). See docs/testing.md,
# "Kubernetes tests", and /work/shared/notes/kubernetes-etcd.md for where the recipe comes from.
#
#   build-kube.sh OUT        build into OUT (must not exist yet or be empty)
#   build-kube.sh --cached   build into the test cache unless it is there already, and print
#                            the cached directory on the last line of stdout
#
# Result (OUT, or $HEARTH_TEST_CACHE/kube-<sha256 of this script> with --cached):
#
#   OUT/bin/kube-apiserver
#   OUT/bin/kube-controller-manager
#   OUT/bin/kubectl           extracted from Debian's kubernetes-client .deb (not installed)
#   OUT/version.env           KUBE_SOURCE_VERSION=<Debian version of the source package>
#
# --cached is the same cache the test harness uses (hearth-vm-tests, src/kube/build.rs): the
# key is the sha256 of this file, an exclusive flock on kube-<key>.lock makes one caller build
# while the others wait, the build runs in kube-<key>.tmp-<pid> and is renamed into place only
# when complete, and its log goes to kube-<key>.log. A second call returns at once.
#
# Needs root (apt-get with private lists), golang-go (1.19), jq, rsync, make, dpkg-dev and the
# Debian archive (vm-tests/scripts/install-deps.sh installs them). Nothing under /etc/apt or
# the machine's apt lists is changed: the package lists go into a private directory.
#
# The vendored github.com/modern-go/reflect2 1.0.1 crashes (`fatal error: fault` in
# mapiterinit) on the first custom-resource write when built with Go >= 1.18; it is replaced by
# the files of Debian's golang-github-modern-go-reflect2-dev (1.0.2) before the build.
#
# Takes about 10-15 minutes cold on 2 cores; most packages are shared by the two commands.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
export LC_ALL=C.UTF-8
STARTED=$SECONDS
step() { echo "build-kube: [$((SECONDS - STARTED))s] $*"; }

usage() {
    echo "usage: $0 OUT | $0 --cached" >&2
    exit 2
}
[ $# -eq 1 ] && [ -n "$1" ] || usage

if [ "$1" = "--cached" ]; then
    SELF=$(readlink -f "$0")
    KEY=$(sha256sum "$SELF" | cut -d' ' -f1)
    CACHE=${HEARTH_TEST_CACHE:-/var/tmp/hearth-test-cache}
    NAME=kube-$KEY
    DEST=$CACHE/$NAME
    if [ -x "$DEST/bin/kube-apiserver" ]; then
        echo "$DEST"
        exit 0
    fi
    mkdir -p "$CACHE"
    exec 9>"$CACHE/$NAME.lock"
    step "waiting for $CACHE/$NAME.lock"
    flock 9
    if [ ! -x "$DEST/bin/kube-apiserver" ]; then
        rm -rf "$CACHE/$NAME.tmp"-* "$DEST"
        TMP=$CACHE/$NAME.tmp-$$
        mkdir "$TMP"
        step "building into $TMP (log: $CACHE/$NAME.log)"
        if ! bash "$SELF" "$TMP" >"$CACHE/$NAME.log" 2>&1; then
            rm -rf "$TMP"
            echo "$0: the build failed; last lines of $CACHE/$NAME.log:" >&2
            tail -n 30 "$CACHE/$NAME.log" >&2
            exit 1
        fi
        mv -T "$TMP" "$DEST"
        sync -f "$CACHE" 2>/dev/null || true
        step "built $DEST"
    fi
    echo "$DEST"
    exit 0
fi

OUT=$1
if [ "$(id -u)" -ne 0 ]; then
    echo "$0: must run as root (apt-get with private package lists)" >&2
    exit 1
fi
for tool in go jq rsync make dpkg-source dpkg-deb apt-get; do
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
WORK=$OUT/work
APT=$WORK/apt
mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial" "$APT/sources.list.d" "$WORK/dl"
# The build tree is large (~2 GB with the Go cache); it never outlives the build.
trap 'rm -rf "$WORK"' EXIT

# ---------------------------------------------------------------------------------------------
# 1. A private apt configuration: the machine's own sources (same URIs, suites and components)
#    with deb-src added, lists and cache in $APT. No mirror is named here.
# ---------------------------------------------------------------------------------------------
step "private apt sources from the machine's own"
: >"$APT/sources.list"
if [ -f /etc/apt/sources.list ]; then
    grep -E '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list >>"$APT/sources.list" || true
    grep -E '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list |
        sed -E 's/^([[:space:]]*)deb([[:space:]])/\1deb-src\2/' >>"$APT/sources.list" || true
fi
for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    case $f in
    *.list)
        grep -E '^[[:space:]]*deb[[:space:]]' "$f" >>"$APT/sources.list" || true
        grep -E '^[[:space:]]*deb[[:space:]]' "$f" |
            sed -E 's/^([[:space:]]*)deb([[:space:]])/\1deb-src\2/' >>"$APT/sources.list" || true
        ;;
    *.sources)
        sed -E 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb deb-src/' "$f" \
            >"$APT/sources.list.d/$(basename "$f")"
        ;;
    esac
done
APT_OPTS=(-o "Dir::Etc::SourceList=$APT/sources.list" -o "Dir::Etc::SourceParts=$APT/sources.list.d"
    -o "Dir::State::Lists=$APT/lists" -o "Dir::Cache=$APT/cache" -o "Debug::NoLocking=1")
step "apt-get update (private lists)"
apt-get "${APT_OPTS[@]}" update -qq
cd "$WORK/dl"
step "apt-get source kubernetes"
apt-get "${APT_OPTS[@]}" source --download-only -qq kubernetes
step "apt-get download golang-github-modern-go-reflect2-dev kubernetes-client"
apt-get "${APT_OPTS[@]}" download -qq golang-github-modern-go-reflect2-dev kubernetes-client
DSC=$(ls kubernetes_*.dsc)
dpkg-source --no-check -x "$DSC" "$WORK/src" >/dev/null
SOURCE_VERSION=$(sed -n 's/^Version: //p' "$DSC")
step "kubernetes source $SOURCE_VERSION unpacked"

# ---------------------------------------------------------------------------------------------
# 2. Swap the vendored reflect2 for Debian's 1.0.2 (see the header).
# ---------------------------------------------------------------------------------------------
dpkg-deb -x golang-github-modern-go-reflect2-dev_*.deb "$WORK/reflect2"
R2=$(find "$WORK/reflect2" -type d -path '*/github.com/modern-go/reflect2' | head -1)
[ -n "$R2" ] && [ -f "$R2/reflect2.go" ] || {
    echo "$0: reflect2 sources not found in golang-github-modern-go-reflect2-dev" >&2
    exit 1
}
rm -rf "$WORK/src/vendor/github.com/modern-go/reflect2"
mkdir -p "$WORK/src/vendor/github.com/modern-go/reflect2"
find "$R2" -maxdepth 1 -type f -name '*.go' ! -name '*_test.go' \
    -exec cp -t "$WORK/src/vendor/github.com/modern-go/reflect2/" {} +
[ -f "$R2/go.mod" ] && cp "$R2/go.mod" "$WORK/src/vendor/github.com/modern-go/reflect2/"
step "vendored reflect2 replaced by $(dpkg-deb -f golang-github-modern-go-reflect2-dev_*.deb Version)"

# The OpenAPI validator of custom resources takes every zero value ("", 0, false) for null
# when built with Go >= 1.16 (reflect.Zero shares one pointer since then, and the check
# compares reflect.Value structs): `osImageURL: ""` or `readyMachineCount: 0` would be
# refused. Kubernetes fixed it in 1.21 (kubernetes/kubernetes#99804, kube-openapi#230) by
# testing for nil only; the same one-line change here.
ZERO_CHECK='data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data))'
mapfile -t zero_files < <(grep -rlF "$ZERO_CHECK" "$WORK/src/vendor" || true)
[ ${#zero_files[@]} -gt 0 ] || {
    echo "$0: the OpenAPI validator's zero-value check was not found in vendor/" >&2
    exit 1
}
for f in "${zero_files[@]}"; do
    sed -i "s/data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data))/data == nil/" "$f"
    if grep -qF "$ZERO_CHECK" "$f"; then
        echo "$0: patching $f failed" >&2
        exit 1
    fi
    step "zero values are not null: patched ${f#"$WORK/src/"}"
done

# ---------------------------------------------------------------------------------------------
# 3. Build both commands in one make (they share most packages). No network: GOPROXY=off.
# ---------------------------------------------------------------------------------------------
cd "$WORK/src"
step "make WHAT=\"cmd/kube-apiserver cmd/kube-controller-manager\" ($(go version))"
GOPATH=$WORK/src/.go GOCACHE=$WORK/gocache GOPROXY=off GOFLAGS=-mod=vendor \
    make WHAT="cmd/kube-apiserver cmd/kube-controller-manager"
mkdir -p "$OUT/bin"
for cmd in kube-apiserver kube-controller-manager; do
    bin=$(find _output -type f -name "$cmd" -perm -u+x | head -1)
    [ -n "$bin" ] || {
        echo "$0: make did not produce $cmd" >&2
        exit 1
    }
    install -m 0755 "$bin" "$OUT/bin/$cmd"
done

# ---------------------------------------------------------------------------------------------
# 4. Debian's kubectl, extracted from its package (not installed: another kubectl may own
#    /usr/bin/kubectl on this machine).
# ---------------------------------------------------------------------------------------------
dpkg-deb -x "$WORK/dl"/kubernetes-client_*.deb "$WORK/client"
install -m 0755 "$WORK/client/usr/bin/kubectl" "$OUT/bin/kubectl"
echo "KUBE_SOURCE_VERSION=$SOURCE_VERSION" >"$OUT/version.env.tmp"
mv "$OUT/version.env.tmp" "$OUT/version.env"
"$OUT/bin/kube-apiserver" --version
"$OUT/bin/kubectl" version --client --short 2>/dev/null || "$OUT/bin/kubectl" version --client
step "done: $(ls "$OUT/bin" | tr '\n' ' ')in $((SECONDS - STARTED))s"
