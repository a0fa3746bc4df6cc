#!/bin/sh
# stage.sh — pack built binaries for a run on the GPU machine.
#
# The GPU machine gets a copy of the working tree but not build/, so the
# binaries are built here (`make -j ARCH=90`, sm_90 only: H100/H200) and
# carried as one small archive: ctrain, the probes (build/*_probe) and every
# test program the device scripts run (build/tests/gpu_*, and the host-side
# data-parallel tests test_dist, test_dist_env, test_sync_bn), stripped, plus the fortunes
# corpus when this machine has it (the tokenizer parity reads it; the GPU
# machine may not have the Debian package).
#
#   scripts/device/stage.sh [BUILD [NAME]]
#     BUILD  the build folder to pack (default build)
#     NAME   out/NAME.tar.xz (default new); the device scripts read
#            out/new.tar.xz and, when present, out/old.tar.xz
#
# Old against new (the same bench in one device call, scripts/device/verify.sh):
#   git worktree add /tmp/ctrain-old main && make -C /tmp/ctrain-old -j ARCH=90
#   scripts/device/stage.sh /tmp/ctrain-old/build old
#   make -j ARCH=90 && scripts/device/stage.sh build new
# then run the device script with the ignored folder out/ carried. A short script of
# one's own: `me=NAME; . scripts/device/unpack.sh; . scripts/device/steps.sh`, then
# `tt gpu_TEST 120` and `bb ROW 100 $NEW bench ...` (scripts/device/steps.sh).
set -e
BUILD=${1:-build}
NAME=${2:-new}
[ -x "$BUILD/ctrain" ] || { echo "stage.sh: no $BUILD/ctrain (build first: make -j ARCH=90)" >&2; exit 1; }
S=$(mktemp -d)
trap 'rm -rf "$S"' EXIT
mkdir -p "$S/tests"
cp "$BUILD/ctrain" "$S/"
for f in "$BUILD"/*_probe; do [ -f "$f" ] && cp "$f" "$S/"; done
for f in "$BUILD"/tests/gpu_* "$BUILD"/tests/test_dist "$BUILD"/tests/test_dist_env "$BUILD"/tests/test_sync_bn; do
    case $f in *.d|*'*'*) ;; *) [ -f "$f" ] && cp "$f" "$S/tests/" ;; esac
done
strip "$S/ctrain" "$S"/*_probe "$S"/tests/* 2>/dev/null || true
[ -d /usr/share/games/fortunes ] && cp -r /usr/share/games/fortunes "$S/fortunes"
mkdir -p out
tar cJf "out/$NAME.tar.xz" -C "$S" .
ls -la "out/$NAME.tar.xz"
