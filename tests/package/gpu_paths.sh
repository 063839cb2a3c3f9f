#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# scripts/gpu-check runs only on the GPU machine, so a file it names that moved would first show
# there: every program, script and test of this tree it names (python/tests/gpu, tests/gpu,
# examples, bench, scripts) must exist. Megatron-Core's own tests (tests/unit_tests/..., carried
# as .megatron-tests) are not this tree's.
srcdir=${srcdir:-.}
fail=0
names=$(grep -oE '(python/tests/(gpu|unit)|tests|examples|bench|scripts)/[A-Za-z0-9_./-]+\.(py|cu|sh|c|h)' \
    "$srcdir/scripts/gpu-check" | grep -v '^tests/unit_tests/' | sort -u)
[ -n "$names" ] || { echo "gpu_paths: no paths read from scripts/gpu-check"; exit 1; }
for f in $names; do
    [ -e "$srcdir/$f" ] || { echo "gpu_paths: scripts/gpu-check names $f, which is not there"; fail=1; }
done
exit $fail
