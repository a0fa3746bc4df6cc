# unpack.sh — sourced by the device scripts (verify.sh, dist2.sh, torch_pair.sh):
# the staged binaries (scripts/device/stage.sh) unpacked under .dev/, fresh
# each call (a folder left by an earlier call on the same machine is not
# reused), the log folder $L under $OUT, and pack, which tars $L into
# $OUT/logs.tgz (only 8 files come back from a device call).
#   me=NAME; . scripts/device/unpack.sh     NAME: the script, for its error message
# Sets L, NEW (.dev/new/ctrain) and OLD (.dev/old/ctrain, present when
# out/old.tar.xz was staged); exits 2 when out/new.tar.xz is missing.
# The plan store (cuDNN's and cuBLASLt's searched choices, ops/plan_store.c)
# travels between calls: out/plans.tgz, when the call carries one, is
# unpacked into CTRAIN_PLAN_CACHE first, and pack saves the cache as
# logs/plans.tgz inside $OUT/logs.tgz (the one file every call brings back);
# `tar xzf logs.tgz logs/plans.tgz` and copy it to out/plans.tgz, and the
# next call, a fresh machine included, skips the searches (ResNet-50's take
# ~80 s a precision). Entries carry the card's identity, so another card's
# are not taken.
: "${OUT:?set OUT to a folder for the logs}"
L=$OUT/logs; mkdir -p "$L"
# packdir PARENT NAME: tar PARENT/NAME into $OUT/logs.tgz, leaving out files
# above 3 MB (a CUPTI timeline's JSON, a checkpoint) so that the archive stays
# under the 16 MiB a returned file may have; what was left out is listed in
# NAME/left_out.txt
packdir() {
    find "$1/$2" -type f -size +3M -printf '%P %s\n' > "$1/$2/left_out.txt"
    find "$1/$2" -type f -size +3M -printf '%P\n' | sed "s|^|$2/|" > /tmp/pack_exclude
    tar czf "$OUT/logs.tgz" -C "$1" -X /tmp/pack_exclude "$2"
}
export CTRAIN_PLAN_CACHE="${CTRAIN_PLAN_CACHE:-$PWD/.dev/plans}"
mkdir -p "$CTRAIN_PLAN_CACHE"
if [ -f out/plans.tgz ]; then
    tar xzf out/plans.tgz -C "$CTRAIN_PLAN_CACHE" && echo "plan store: taken from out/plans.tgz"
fi
pack() {
    tar czf "$L/plans.tgz" -C "$CTRAIN_PLAN_CACHE" . 2>/dev/null || true
    packdir "$OUT" logs
}
for n in new old; do
    rm -rf .dev/$n
    if [ -f out/$n.tar.xz ]; then mkdir -p .dev/$n; tar xJf out/$n.tar.xz -C .dev/$n; fi
done
[ -x .dev/new/ctrain ] || { echo "${me:-device script}: no out/new.tar.xz (scripts/device/stage.sh first, carry out/)"; exit 2; }
NEW=$PWD/.dev/new/ctrain
OLD=$PWD/.dev/old/ctrain
