#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# librecap's exports and file name against src/librecap.map and configure's ABI version
# (tests/Makefile.inc passes CC, READELF, RECAP_ABI=major.minor.revision, and the build's CFLAGS
# and LDFLAGS as ABI_CFLAGS and ABI_LDFLAGS, so a sanitizer build's client loads its runtime
# first):
#  1. every exported symbol is at the map's node of its name, as that node's default version and
#     at no other version, or is InitializeInjection, unversioned; nothing else: librecap
#     interposes nothing. The interposer object librecap-preload.so exports exactly the entry
#     points the hooks interpose (src/hooks/interpose.h, plus cuGetProcAddress*, dlsym), unversioned;
#  2. every name the map lists is exported at its node, and every function the public headers
#     declare is in the map;
#  3. the nodes are RECAP_<major>.0 to RECAP_<major>.<minor> of configure's ABI version, none
#     empty; the file is librecap.so.<major>.<minor>.<revision> with soname librecap.so.<major>;
#  4. a program built against this tree (tests/package/abi_client.c) references each function it
#     calls at the node that added it, runs, and prints configure's ABI version.
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
sed -n 's/^ *X([A-Z_]*, *\([a-zA-Z0-9_]*\),.*/\1/p' "$srcdir/src/hooks/interpose.h" >"$tmp/interposed"
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
        say "$sym: a second version of a function (each is exported once, at the node that added it)" ;;
    InitializeInjection) ;;
    *)
        say "$sym is exported in no node (add it to src/librecap.map's newest node)" ;;
    esac
done <"$tmp/exports"

while read -r name node; do
    grep -qx "$name@@$node" "$tmp/exports" || say "the map lists $name in $node; the library does not export it there"
done <"$tmp/map"

cat "$srcdir/include/recap.h" "$srcdir"/include/recap/*.h |
    tr '\n' ' ' | grep -o 'RECAP_API [^;(]*(' | grep -o 'recap_[a-z0-9_]*($' | tr -d '(' |
    sort -u >"$tmp/declared"
while read -r name; do
    grep -q "^$name " "$tmp/map" || say "recap.h declares $name; the map has it in no node"
done <"$tmp/declared"

# 3: the nodes and the file against configure's ABI version.
abi_major=${RECAP_ABI%%.*} rest=${RECAP_ABI#*.}
abi_minor=${rest%%.*} abi_revision=${rest#*.}
[ -n "$RECAP_ABI" ] && [ "$abi_revision" != "$rest" ] || { echo "abi: RECAP_ABI=$RECAP_ABI (major.minor.revision) not set"; exit 1; }
awk '$2 != "RECAP_PRIVATE" { print $2 }' "$tmp/map" | sort -u -t. -k2,2n >"$tmp/nodes"
i=0
while [ $i -le "$abi_minor" ]; do echo "RECAP_$abi_major.$i"; i=$((i + 1)); done >"$tmp/want-nodes"
cmp -s "$tmp/nodes" "$tmp/want-nodes" ||
    say "the map's nodes ($(echo $(cat "$tmp/nodes"))) are not RECAP_$abi_major.0 to RECAP_$abi_major.$abi_minor, configure's ABI $abi_major.$abi_minor, each with the functions it added"
file=$(readlink -f "$lib")
[ "${file##*/}" = "librecap.so.$RECAP_ABI" ] ||
    say "the library's file is ${file##*/}, not librecap.so.$RECAP_ABI (configure's ABI version and revision)"
soname=$(${READELF:-readelf} -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "librecap.so.$abi_major" ] || say "the soname is $soname, not librecap.so.$abi_major"

# 4: a program built against this tree.
${CC:-cc} $ABI_CFLAGS $ABI_LDFLAGS -I"$srcdir/include" -Iinclude -o "$tmp/client" \
    "$srcdir/tests/package/abi_client.c" -L"$(pwd)/src/.libs" -lrecap ||
    { echo "abi: cannot build tests/package/abi_client.c"; exit 1; }
refs=$(${READELF:-readelf} --dyn-syms -W "$tmp/client" | awk '$7 == "UND" && $8 ~ /^recap_/ { print $8 }')
[ -n "$refs" ] || say "the client references no recap_ function"
for r in $refs; do
    name=${r%%@*} node=${r#*@}
    node=${node%% *}
    grep -qx "$name $node" "$tmp/map" ||
        say "the client references $name at $node; the map has it $(awk -v n="$name" '$1 == n { print "in " $2 }' "$tmp/map")"
done
got=$(LD_LIBRARY_PATH=$(pwd)/src/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/client") ||
    say "the client does not run with this library"
[ "$got" = "$abi_major.$abi_minor" ] || say "recap_abi_version() says $got; configure says $abi_major.$abi_minor"

[ $fail -ne 0 ] || echo "abi: $(wc -l <"$tmp/exports") exports, $(wc -l <"$tmp/map") in the map's nodes, each at its node; ABI $RECAP_ABI, ${file##*/}; the client references $(echo "$refs" | wc -l) functions at their nodes"
exit $fail
