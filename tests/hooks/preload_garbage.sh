#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# librecap preloaded into ordinary programs (a shell, a fork+exec chain, a threaded C program,
# Python when there is one) with garbage in recap's settings: each program's stdout and exit
# status are those of the plain run, and so is its stderr once recap's one line per value it did
# not understand is set aside (recap says so even with logging off: tests/base/test_log.c). Run from
# the build directory (make check). Under scripts/ci-sanitize the sanitizer's runtime comes first
# in LD_PRELOAD (RECAP_TEST_PRELOAD_FIRST) and leak checking of the hosts is off (their leaks are
# not recap's).
lib=$(pwd)/src/.libs/librecap-preload.so
client=$(pwd)/tests/dlsym_client
[ -f "$lib" ] || { echo "preload_garbage: no $lib"; exit 99; }
[ -n "$RECAP_TEST_NO_PRELOAD" ] && exit 77
preload="${RECAP_TEST_PRELOAD_FIRST:+$RECAP_TEST_PRELOAD_FIRST }$lib"
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
unset RECAP_LOG RECAP_HOOKS RECAP_REPORT RECAP_EXACT_CAPTURE RECAP_LOG_FILE RECAP_LOG_TIME \
    RECAP_CUPTI_PATH RECAP_NCCL_LIB RECAP_PROBE_PYTHON_TIMEOUT
# ThreadSanitizer: not the dynamic loader's own allocations, made under a lock it cannot see.
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}ignore_noninstrumented_modules=1"
export DLSYM_TEST_LIBDIR="$(pwd)/tests/.libs"
export LD_LIBRARY_PATH="$(pwd)/tests/.libs:$(pwd)/tests/double/.libs"

# Programs, one per line: each run through sh -c.
programs="echo out; echo err >&2; exit 3
sh -c 'echo child; echo child-err >&2; exit 4'; echo parent \$?; ls / >/dev/null
(exec sh -c 'read x < /dev/null; printf \"%s\\n\" exec-ed') & wait; echo waited \$?
$client race 1
$client nocuda"
if command -v python3 >/dev/null 2>&1; then
    programs="$programs
python3 -c 'import threading, os, sys, ctypes; t = threading.Thread(target=print, args=(\"thread\",)); t.start(); t.join(); pid = os.fork(); os._exit(5) if pid == 0 else print(\"child\", os.waitpid(pid, 0)[1] >> 8); sys.stderr.write(\"py-err\\n\"); print(hasattr(ctypes.CDLL(None), \"cudaGraphLaunch\")); sys.exit(2)'"
fi

settings="RECAP_LOG=garbage
RECAP_LOG=
RECAP_HOOKS=%%%
RECAP_HOOKS=
RECAP_REPORT=/nonexistent/dir/x
RECAP_REPORT=
RECAP_EXACT_CAPTURE=zz
RECAP_LOG_FILE=/nonexistent/dir/log
RECAP_LOG_TIME=maybe
RECAP_CUDA_DRIVER=/nonexistent/libcuda.so
RECAP_CUPTI_PATH=%%%
RECAP_NCCL_LIB=garbage
RECAP_PROBE_PYTHON_TIMEOUT=-1
RECAP_LOG=garbage RECAP_HOOKS=%%% RECAP_REPORT=/nonexistent/dir/x RECAP_EXACT_CAPTURE=zz RECAP_LOG_FILE=/nonexistent/dir/log"

fails=0
runs=0
# A newline-separated list, one item per line, without splitting on spaces.
oldifs=$IFS
nl='
'
IFS=$nl
for prog in $programs; do
    for set in $settings; do
        IFS=$oldifs
        # shellcheck disable=SC2086 # $set is several assignments
        env $set sh -c "$prog" \
            >"$tmp/out.plain" 2>"$tmp/err.plain"
        st_plain=$?
        # shellcheck disable=SC2086
        env $set LD_PRELOAD="$preload" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
            sh -c "$prog" >"$tmp/out.recap" 2>"$tmp/err.recap"
        st_recap=$?
        grep -v ' recap WARN RECAP_[A-Z_]*=' "$tmp/err.recap" \
            >"$tmp/err.recap.own"
        runs=$((runs + 1))
        if [ $st_plain != $st_recap ] || ! cmp -s "$tmp/out.plain" "$tmp/out.recap" ||
            ! cmp -s "$tmp/err.plain" "$tmp/err.recap.own"; then
            fails=$((fails + 1))
            echo "FAIL: [$set] $prog: exit $st_plain vs $st_recap"
            diff "$tmp/out.plain" "$tmp/out.recap" | head -10
            diff "$tmp/err.plain" "$tmp/err.recap.own" | head -10
        fi
        IFS=$nl
    done
done
IFS=$oldifs
echo "preload_garbage: $runs runs, $fails differ from the plain run"
[ $fails = 0 ]
