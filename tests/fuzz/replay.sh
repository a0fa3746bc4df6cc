#!/bin/sh
# replay.sh BUILD NAME... — run BUILD/NAME (a harness linked with replay.c)
# over tests/fuzz/corpus/NAME/ and tests/fuzz/crashes/NAME/ for each NAME;
# a harness passes when every input went through. Ends with
# "N passed, N failed" (one per harness), like tests/run.sh.
# ASAN_OPTIONS / UBSAN_OPTIONS from the environment are kept; by default an
# allocation over 256 MB is an error (no seed or crash file needs one: a
# parser that allocates what a header promises before reading it fails) and
# leaks are reported (LeakSanitizer: where it can run, not under ptrace).
build=$1
shift
pass=0
fail=0
: "${ASAN_OPTIONS:=max_allocation_size_mb=256}"
: "${UBSAN_OPTIONS:=print_stacktrace=1:halt_on_error=1}"
export ASAN_OPTIONS UBSAN_OPTIONS
for name in "$@"; do
    if "$build/$name" "tests/fuzz/corpus/$name" "tests/fuzz/crashes/$name"; then
        pass=$((pass + 1))
    else
        echo "  FAIL $name"
        fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
