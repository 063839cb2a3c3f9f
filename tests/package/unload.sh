#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# dlclose of librecap while threads that used it live, then a fork and a second load (issue 47):
# recap leaves thread-exit destructors and fork handlers with glibc, which outlive a dlclose, so
# librecap is linked -z nodelete and stays mapped. tests/unload (a C program that does not link
# recap) does it with a random thread count and call orders; readelf says the flag is there. Set
# UNLOAD_SEED to replay a seed. Run from the build directory (make check).
lib=$(pwd)/src/.libs/librecap.so.1
preload=$(pwd)/src/.libs/librecap-preload.so
client=$(pwd)/tests/unload
[ -f "$lib" ] && [ -x "$client" ] || { echo "unload: build the tree first"; exit 99; }
fail=0

for so in "$lib" "$preload"; do
    if ! ${READELF:-readelf} -d "$so" | grep -q 'FLAGS_1.*NODELETE'; then
        echo "unload: $so is not linked -z nodelete (no NODELETE in its FLAGS_1)"
        fail=1
    fi
done

seed=${UNLOAD_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
"$client" "$lib" "$seed"
rc=$?
if [ $rc -ne 0 ]; then
    [ $rc -gt 128 ] && echo "unload: killed by signal $((rc - 128))"
    echo "unload: failed with seed $seed" \
        "(replay: UNLOAD_SEED=$seed make check TESTS=tests/package/unload.sh)"
    fail=1
fi
exit $fail
