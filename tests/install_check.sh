#!/bin/sh
# install_check.sh — `make install PREFIX=DIR` and `make uninstall`, run by
# `make test` from the repository root after the build: the binary lands in
# DIR/bin and runs from there, the Python tools in DIR/share/ctrain/scripts,
# and `ctrain report` run from DIR/bin finds its script there (not in the
# checkout); uninstall leaves DIR empty. Ends with "N passed, N failed".
pass=0; fail=0
ok() { if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "  FAIL $1${3:+: $3}"; fi; }
D=$(mktemp -d "${TMPDIR:-/tmp}/ctrain_install_XXXXXX")
trap 'rm -rf "$D"' EXIT
out=$(make -s --no-print-directory install PREFIX="$D/usr" 2>&1); ok install.runs $? "$out"
[ -x "$D/usr/bin/ctrain" ]; ok install.binary $?
[ -f "$D/usr/share/ctrain/scripts/report.py" ] && [ -f "$D/usr/share/ctrain/scripts/torch_bench.py" ]
ok install.scripts $?
# the installed binary, from a folder that is not the checkout
out=$(cd "$D" && ./usr/bin/ctrain train --help 2>&1); ok install.binary_runs $? "$(echo "$out" | tail -1)"
if command -v python3 >/dev/null 2>&1; then
    cat > "$D/one.json" <<'J'
{"schema": "ctrain-bench/1", "machine": {"gpu_name": "NVIDIA H200"}, "results": [
 {"engine": "ctrain", "mode": "eager", "model": "mlp", "precision": "fp32", "batch": 64,
  "samples_per_s": 1000.0}]}
J
    out=$(cd "$D" && env -u CTRAIN_SCRIPTS ./usr/bin/ctrain report one.json --out r.md 2>&1)
    rc=$?
    [ $rc -eq 0 ] && [ -s "$D/r.md" ]; ok install.report_finds_script $? "status $rc: $(echo "$out" | tail -2)"
else
    echo "  skip install.report_finds_script: python3 is not installed"
fi
out=$(make -s --no-print-directory uninstall PREFIX="$D/usr" 2>&1); ok uninstall.runs $? "$out"
left=$(find "$D/usr" -type f | wc -l)
[ "$left" -eq 0 ]; ok uninstall.removes_files $? "$left files left"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
