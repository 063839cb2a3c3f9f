#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Linking is not interposing (tests/hooks/bindings_client.c, linked with librecap before the
# driver):
#  1. run plainly, the dynamic linker binds none of the program's dlsym, cu* or cuda* references
#     to librecap (LD_DEBUG=bindings, every symbol bound at start: LD_BIND_NOW);
#  2. run with recap's interposer object preloaded, it binds dlsym and the driver's graph entry
#     points the program calls (cuGraphLaunch, cuStreamBeginCapture_v2) to that object, and the
#     program's recap_* calls to librecap.
# Run from the build directory (make check).
client=$(pwd)/tests/bindings_client
interposer=$(pwd)/src/.libs/librecap-preload.so
[ -x "$client" ] && [ -f "$interposer" ] || { echo "bindings: build the tree first"; exit 99; }
[ -n "$RECAP_TEST_NO_PRELOAD" ] && exit 77
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
fail=0
say() { echo "bindings: $*"; fail=1; }
unset RECAP_LOG RECAP_HOOKS RECAP_REPORT LD_PRELOAD

# bindings OUT [ENV...]: the program's own bindings ("symbol object" lines), run through libtool's
# wrapper (which execs the program: only the program's lines are kept).
bindings() {
    out=$1
    shift
    env "$@" LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT="$tmp/ld" "$client" ||
        say "the client failed ($*)"
    cat "$tmp"/ld.* 2>/dev/null | sed -n \
        "s|.*binding file [^ ]*bindings_client \[0\] to \([^ ]*\) \[0\]: normal symbol \`\([^']*\)'.*|\2 \1|p" |
        sort -u >"$out"
    rm -f "$tmp"/ld.*
    [ -s "$out" ] || say "no bindings of the client read ($*)"
}

bindings "$tmp/linked"
grep -E '^(dlsym|cu[A-Za-z0-9_]*) ' "$tmp/linked" >"$tmp/cuda"
grep 'librecap' "$tmp/cuda" | sed 's/^/linked: bound to recap: /'
grep -q 'librecap' "$tmp/cuda" && fail=1
grep -q '^cuGraphLaunch .*libcudadouble' "$tmp/linked" ||
    say "linked: cuGraphLaunch is not the driver's: $(grep '^cuGraphLaunch ' "$tmp/linked")"
grep -q '^recap_abi_version .*/librecap\.so' "$tmp/linked" || say "linked: recap_abi_version not bound to librecap"

preload="${RECAP_TEST_PRELOAD_FIRST:+$RECAP_TEST_PRELOAD_FIRST }$interposer"
bindings "$tmp/preloaded" LD_PRELOAD="$preload"
for sym in dlsym cuGraphLaunch cuStreamBeginCapture_v2; do
    grep -q "^$sym .*/librecap-preload\.so\$" "$tmp/preloaded" ||
        say "preloaded: $sym is not recap's: $(grep "^$sym " "$tmp/preloaded" || echo unbound)"
done
grep -q '^recap_abi_version .*/librecap\.so' "$tmp/preloaded" ||
    say "preloaded: recap_abi_version not bound to librecap"

[ $fail -ne 0 ] || echo "bindings: linked: $(wc -l <"$tmp/cuda") dlsym/cu* bindings, none to recap; preloaded: dlsym and the graph entry points are recap's"
exit $fail
