#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# A late dlopen of librecap finds its static TLS: librecap's thread-local storage is static
# (initial-exec, its DF_STATIC_TLS flag), and a library loaded after start-up draws it from
# glibc's surplus, which large processes (PyTorch's) use up. With the surplus at its smallest
# (GLIBC_TUNABLES: one namespace, no optional part: 144 bytes on x86-64 glibc), tests/late_dlopen
# (a C program that does not link recap) and, where there is one, python3's ctypes.CDLL load it
# and use per-thread messages. readelf says how big the TLS block is. Run from the build
# directory (make check).
lib=$(pwd)/src/.libs/librecap.so.1
client=$(pwd)/tests/late_dlopen
[ -f "$lib" ] && [ -x "$client" ] || { echo "late_dlopen: build the tree first"; exit 99; }
tunables=glibc.rtld.nns=1:glibc.rtld.optional_static_tls=0
fail=0

tls=$(${READELF:-readelf} -lW "$lib" | awk '$1 == "TLS" { print $6 }')
echo "late_dlopen: librecap's TLS block: ${tls:-none} bytes ($(${READELF:-readelf} -d "$lib" |
    grep -o 'STATIC_TLS' || echo 'no STATIC_TLS flag'))"
# 192 bytes: the hot paths' words (a thread's fork-gate record, 32 bytes, read by a forking
# thread; the error text's two pointers; the launch and callback flags) and a few cold ones. The
# 512-byte error buffer, and anything like it, goes behind a pointer.
if [ -n "$tls" ] && [ $((tls)) -gt 192 ]; then
    echo "late_dlopen: $((tls)) bytes of TLS: keep it to a few words (put the rest behind a pointer)"
    fail=1
fi

GLIBC_TUNABLES=$tunables "$client" "$lib" || { echo "late_dlopen: dlopen under $tunables failed"; fail=1; }
# Python is not built with a sanitizer: a sanitizer-built librecap would need the sanitizer's
# runtime preloaded into it (ThreadSanitizer's does not start with the surplus this small), so
# under scripts/ci-sanitize the C client alone loads it.
if [ -n "$RECAP_TEST_PRELOAD_FIRST" ]; then
    echo "late_dlopen: python3 not run (sanitizer build)"
elif command -v python3 >/dev/null 2>&1; then
    GLIBC_TUNABLES=$tunables python3 -c "
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.recap_last_error.restype = ctypes.c_char_p
assert lib.recap_generator_create(0, None) != 0 and b'gen_p' in lib.recap_last_error()
print('late_dlopen: python3 ctypes.CDLL loaded it')" "$lib" || { echo "late_dlopen: python3 ctypes.CDLL under $tunables failed"; fail=1; }
fi
exit $fail
