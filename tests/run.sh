#!/bin/sh
# run.sh — run each test program, echo its output, and add up the
# "N passed, N failed" lines they end with. A program that crashes or prints
# no summary counts as one failure. Ends with the total line.
total_pass=0
total_fail=0
for t in "$@"; do
    name=$(basename "$t")
    echo "== $name"
    out=$("$t" 2>&1)
    rc=$?
    printf '%s\n' "$out"
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        echo "  FAIL $name: exited with status $rc and printed no summary"
        total_fail=$((total_fail + 1))
        continue
    fi
    p=$(echo "$line" | cut -d' ' -f1)
    f=$(echo "$line" | cut -d' ' -f3)
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "  FAIL $name: exited with status $rc"
        f=1
    fi
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
done
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
