#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ for a bounded time with a memory limit, for CI.
#
#   fuzz/run-ci.sh                      # 60 s per target, RSS limit 2048 MB
#   HEARTH_FUZZ_SECONDS=300 fuzz/run-ci.sh
#
# Exit status: 0 when every target ran its time without a crash, or when fuzzing cannot run
# here (then it prints "fuzzing skipped: <reason>"); non-zero when a target crashed, panicked,
# ran out of memory (-rss_limit_mb), timed out on one input, or did not build.
#
# Environment:
#   HEARTH_FUZZ_SECONDS    time per target, seconds (default 60)
#   HEARTH_FUZZ_RSS_MB     libFuzzer -rss_limit_mb (default 2048)
#   HEARTH_FUZZ_SANITIZER  address (default; on stable Rust through RUSTC_BOOTSTRAP=1) or none
#   HEARTH_FUZZ_INSTALL=1  install cargo-fuzz with `cargo install cargo-fuzz --locked` when it
#                          is missing (never done otherwise)
# See docs/fuzzing.md.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1

seconds=${HEARTH_FUZZ_SECONDS:-60}
rss_mb=${HEARTH_FUZZ_RSS_MB:-2048}
sanitizer=${HEARTH_FUZZ_SANITIZER:-address}

skip() {
    echo "fuzzing skipped: $*"
    exit 0
}

command -v cargo >/dev/null 2>&1 || skip "cargo is not installed"
if ! cargo fuzz --version >/dev/null 2>&1; then
    if [ "${HEARTH_FUZZ_INSTALL:-0}" = 1 ]; then
        echo "installing cargo-fuzz (HEARTH_FUZZ_INSTALL=1)"
        cargo install cargo-fuzz --locked || skip "cargo-fuzz could not be installed"
    else
        skip "cargo-fuzz is not installed (cargo install cargo-fuzz --locked, or run with HEARTH_FUZZ_INSTALL=1)"
    fi
fi
command -v c++ >/dev/null 2>&1 || skip "no C++ compiler (c++) to build libFuzzer"

fuzz_env=()
fuzz_flags=()
case "$sanitizer" in
    address) fuzz_env=(RUSTC_BOOTSTRAP=1) ;;
    none) fuzz_flags=(--sanitizer none) ;;
    *) echo "HEARTH_FUZZ_SANITIZER must be address or none, not $sanitizer" >&2; exit 2 ;;
esac

mapfile -t targets < <(cargo fuzz list 2>/dev/null)
[ "${#targets[@]}" -gt 0 ] || { echo "cargo fuzz list found no targets" >&2; exit 1; }

# Build first: a toolchain that cannot build fuzz targets (no sanitizer runtime, no -Z flags)
# is a reason to skip; any other build failure is a failure.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! env "${fuzz_env[@]}" cargo fuzz build "${fuzz_flags[@]}" >"$log" 2>&1; then
    if grep -qE "only accepted on the nightly compiler|can't find crate for .core.|sanitizer .* not supported|error: linking with .* failed.*(asan|sanitizer)" "$log"; then
        tail -n 5 "$log"
        skip "this toolchain cannot build the fuzz targets with sanitizer $sanitizer (try HEARTH_FUZZ_SANITIZER=none)"
    fi
    cat "$log" >&2
    echo "fuzz targets do not build" >&2
    exit 1
fi

status=0
for target in "${targets[@]}"; do
    corpus="fuzz/corpus/$target"
    mkdir -p "$corpus"
    # The first directory collects new inputs; the others are read-only seeds: hearth's own
    # fixtures, and the MCO corpus and users' documents where they are beside the clone
    # ($HEARTH_SHARED, as hearth-testdata reads it; default ../shared): optional seeds, said so
    # when absent.
    seeds=()
    if [ "$target" = read_manifest ]; then
        seeds+=(testdata/manifests testdata/posts)
        shared=${HEARTH_SHARED:-../shared}
        for d in "$shared/corpus/mco-e2e" "$shared/seeds"; do
            if [ -d "$d" ]; then
                seeds+=("$d")
            else
                echo "== $target: NOTE: $d is not beside this clone: seeding from hearth's own fixtures (testdata/) only, without the MCO corpus and the users' documents" >&2
            fi
        done
    fi
    args=(-max_total_time="$seconds" -rss_limit_mb="$rss_mb" -timeout=10 -max_len=16384)
    [ -f "fuzz/$target.dict" ] && args+=(-dict="fuzz/$target.dict")
    echo "== fuzzing $target for ${seconds}s (rss limit ${rss_mb} MB)"
    if env "${fuzz_env[@]}" cargo fuzz run "${fuzz_flags[@]}" "$target" "$corpus" "${seeds[@]}" -- "${args[@]}"; then
        echo "== $target: no crash in ${seconds}s"
    else
        echo "== $target: CRASH (input saved under fuzz/artifacts/$target/)" >&2
        status=1
    fi
done
exit "$status"
