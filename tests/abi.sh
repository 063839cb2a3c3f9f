#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# librecap's exports against src/librecap.map (tests/Makefile.inc passes CC, READELF, and the
# build's CFLAGS and LDFLAGS as ABI_CFLAGS and ABI_LDFLAGS, so a sanitizer build's client loads
# its runtime first):
#  1. every exported symbol is in the map's node of its version, or is a RECAP_1.0 alias of a
#     symbol of a later node, or is InitializeInjection, unversioned; nothing else: librecap
#     interposes nothing. The interposer object librecap-preload.so exports exactly the entry
#     points the hooks interpose (hooks/interpose.h, plus cuGetProcAddress*, dlsym), unversioned;
#  2. every name the map lists is exported as that node's default version, and every function
#     the public headers declare is in the map;
#  3. a program linked against the old map (every recap_* at RECAP_1.0) runs with this library.
lib=src/.libs/librecap.so
interposer=src/.libs/librecap-preload.so
map=$srcdir/src/librecap.map
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
say() { echo "abi: $*"; fail=1; }

# name node, one a line, from the map (comments stripped).
sed 's|/\*.*\*/||; /\/\*/,/\*\//d' "$map" | awk '
    /^RECAP_[A-Z0-9_.]+ *\{/ { node = $1; next }
    /local:/ { node = "" }
    node != "" && /^ *recap_[a-z0-9_]+;/ { gsub(/[ ;]/, ""); print $0, node }' | sort >"$tmp/map"
[ -s "$tmp/map" ] || { echo "abi: no symbols read from $map"; exit 1; }

# The interposed names.
sed -n 's/^ *X([A-Z_]*, *\([a-zA-Z0-9_]*\),.*/\1/p' "$srcdir/hooks/interpose.h" >"$tmp/interposed"
printf '%s\n' cuGetProcAddress cuGetProcAddress_v2 dlsym >>"$tmp/interposed"
sort -o "$tmp/interposed" "$tmp/interposed"
${READELF:-readelf} --dyn-syms -W "$interposer" |
    awk '$5 == "GLOBAL" && $7 != "UND" && $7 != "ABS" { print $8 }' | sort -u >"$tmp/interposer"
if ! cmp -s "$tmp/interposed" "$tmp/interposer"; then
    say "librecap-preload.so's exports are not the interposed entry points (< listed, > exported):"
    diff "$tmp/interposed" "$tmp/interposer" | grep '^[<>]'
fi

# Defined global dynamic symbols: name@@node, name@node or name (base).
${READELF:-readelf} --dyn-syms -W "$lib" |
    awk '$5 == "GLOBAL" && $7 != "UND" && $7 != "ABS" { print $8 }' | sort -u >"$tmp/exports"
[ -s "$tmp/exports" ] || { echo "abi: no exports read from $lib"; exit 1; }

while read -r sym; do
    case $sym in
    *@@*)
        name=${sym%%@@*} node=${sym#*@@}
        grep -qx "$name $node" "$tmp/map" || say "$name is exported at $node but the map has it $(
            awk -v n="$name" '$1 == n { print "in " $2 }' "$tmp/map" | grep . || echo 'in no node')" ;;
    *@*)
        name=${sym%%@*} node=${sym#*@}
        if [ "$node" != RECAP_1.0 ] || grep -qx "$name RECAP_1.0" "$tmp/map" ||
            ! grep -q "^$name " "$tmp/map"; then
            say "$sym: only functions moved to a later node keep a RECAP_1.0 alias"
        fi ;;
    InitializeInjection) ;;
    *)
        say "$sym is exported in no node (add it to src/librecap.map's newest node)" ;;
    esac
done <"$tmp/exports"

newest=$(awk '$2 != "RECAP_PRIVATE" { print $2 }' "$tmp/map" | sort -t. -k2,2n | tail -1)
while read -r name node; do
    grep -qx "$name@@$node" "$tmp/exports" || say "the map lists $name in $node; the library does not export it there"
    # Functions new in this version (the newest node) were never at RECAP_1.0.
    if [ "$node" != RECAP_1.0 ] && [ "$node" != "$newest" ] && [ "$node" != RECAP_PRIVATE ] &&
        ! grep -qx "$name@RECAP_1.0" "$tmp/exports"; then
        say "$name moved to $node without its RECAP_1.0 alias (RECAP__SINCE)"
    fi
done <"$tmp/map"

cat "$srcdir/include/recap.h" "$srcdir"/include/recap/*.h |
    tr '\n' ' ' | grep -o 'RECAP_API [^;(]*(' | grep -o 'recap_[a-z0-9_]*($' | tr -d '(' |
    sort -u >"$tmp/declared"
while read -r name; do
    grep -q "^$name " "$tmp/map" || say "recap.h declares $name; the map has it in no node"
done <"$tmp/declared"

# 3: an old binary. The stand-in has the old map's one node and soname; the client's references
# are name@RECAP_1.0; it then runs against the library just built.
mkdir "$tmp/old"
echo 'RECAP_1.0 { global: recap_*; };' >"$tmp/old/old.map"
awk '{ print "int " $1 "(void); int " $1 "(void) { return 0; }" }' "$tmp/map" >"$tmp/old/stub.c"
${CC:-cc} -shared -fPIC -o "$tmp/old/librecap.so.1" -Wl,-soname,librecap.so.1 \
    -Wl,--version-script="$tmp/old/old.map" "$tmp/old/stub.c" &&
    ${CC:-cc} $ABI_CFLAGS $ABI_LDFLAGS -o "$tmp/client" "$srcdir/tests/abi_client.c" \
        "$tmp/old/librecap.so.1" ||
    { echo "abi: cannot build the old-style client"; exit 1; }
refs=$(${READELF:-readelf} --dyn-syms -W "$tmp/client" | awk '$7 == "UND" && $8 ~ /^recap_/ { print $8 }')
for r in $refs; do
    case $r in *@RECAP_1.0*) ;; *) say "the old-style client references $r, not @RECAP_1.0" ;; esac
done
LD_LIBRARY_PATH=$(pwd)/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/client" ||
    say "a program linked against the old map does not run with this library"

[ $fail -ne 0 ] || echo "abi: $(wc -l <"$tmp/exports") exports, $(wc -l <"$tmp/map") in the map's nodes, old-map client runs"
exit $fail
