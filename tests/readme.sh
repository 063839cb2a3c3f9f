#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# README.md says what the tree does: its list of interposed entry points is hooks/interpose.h's
# (scripts/interposed-list), and its install section names every installed header.
fail=0
"$srcdir/scripts/interposed-list" --check "$srcdir" || fail=1

# The installed headers (Makefile.am's *include*_HEADERS), each named in the Installing section.
headers=$(sed -n '/^[a-z_]*include[a-z_]*_HEADERS *=/,/[^\\]$/p' "$srcdir/Makefile.am" |
    grep -o 'include/[a-z/]*\.h' | sed 's|^include/||')
[ -n "$headers" ] || { echo "readme: no installed headers read from Makefile.am"; exit 1; }
section=$(sed -n '/^## Installing/,/^## /p' "$srcdir/README.md")
for h in $headers; do
    echo "$section" | grep -q "\`$h\`" || { echo "readme: the Installing section does not name $h"; fail=1; }
done
exit $fail
