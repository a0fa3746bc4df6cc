#!/bin/sh
# stage_dev.sh — pack the built binaries for a device call: build/ctrain and
# every build/tests/gpu_* (stripped) into out/dev.tar.xz (~6 MB), which a
# device script unpacks into .dev/ (results/*/scripts/callN.sh). Run after
# `make ARCH=90`; the device call then carries ["out"].
set -e
S=$(mktemp -d)
mkdir -p $S/tests
cp build/ctrain $S/
for f in build/tests/gpu_*; do case $f in *.d) ;; *) cp $f $S/tests/ ;; esac; done
strip $S/ctrain $S/tests/*
mkdir -p out && tar cJf out/dev.tar.xz -C $S .
rm -rf $S
ls -la out/dev.tar.xz
