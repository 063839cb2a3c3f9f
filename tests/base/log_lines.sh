#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# What recap writes for people to read holds one line per message whatever names and values it
# echoes, and its lists hold whole names and count those left out (tests/base/text_check.py, with
# random hostile bytes; RECAP_TEST_SEED=N reruns the seed a failure printed). Run from the build
# directory (make check).
client=$(pwd)/tests/log_line_client
[ -x "$client" ] || { echo "log_lines: build the tree first"; exit 99; }
command -v python3 >/dev/null 2>&1 || { echo "log_lines: no python3"; exit 77; }
seed=${RECAP_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "log_lines: RECAP_TEST_SEED=$seed"
fail=0
python3 "${srcdir:-.}/tests/base/text_check.py" log "$client" "$seed" || fail=1
python3 "${srcdir:-.}/tests/base/text_check.py" flagged "$client" "$seed" || fail=1
exit $fail
