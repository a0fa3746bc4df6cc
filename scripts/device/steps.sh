# steps.sh — sourced after scripts/device/unpack.sh by the short device scripts of a
# session (out/*.sh): the pieces every one of them wrote out again.
#   el                  seconds since the script started (S0, set here)
#   tt NAME LIMIT       run .dev/new/tests/NAME under a time limit, its log $L/NAME.log;
#                       prints its "N passed, N failed" line and its first FAIL lines
#   bb NAME LIMIT CMD.. run CMD (env assignments first, as for env) with --json
#                       $L/NAME.json, its log $L/NAME.log, unless the script is past
#                       STEPS_BUDGET seconds (default 420); prints the bench rows
# Each packs the logs (pack, from unpack.sh) so that a call cut short still brings them.
S0=${S0:-$(date +%s)}
el() { echo $(( $(date +%s) - S0 )); }
tt() {
    local n=$1 lim=$2 s; s=$(date +%s)
    timeout "$lim" stdbuf -oL ".dev/new/tests/$n" > "$L/$n.log" 2>&1
    echo "$n rc $? $(grep -E '^[0-9]+ passed' "$L/$n.log" | tail -1) ($(( $(date +%s) - s )) s)"
    grep -m8 FAIL "$L/$n.log" | cut -c1-200
    pack
}
bb() {
    local n=$1 lim=$2; shift 2
    [ "$(el)" -lt "${STEPS_BUDGET:-420}" ] || { echo "$n: no time left"; return; }
    timeout "$lim" env "$@" --json "$L/$n.json" > "$L/$n.log" 2>&1
    echo "$n (rc $?) at $(el) s:"; grep -E "^(bert|resnet|mlp)" "$L/$n.log" | cut -c1-120
    pack
}
