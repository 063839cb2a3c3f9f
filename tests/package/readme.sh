#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# README.md says what the tree does: its list of interposed entry points is src/hooks/interpose.h's
# (scripts/interposed-list), its list of settings is src/base/settings.c's (scripts/settings-list)
# and that table has a row for every RECAP_* variable the tree reads, and its install section
# names every installed header.
fail=0
"$srcdir/scripts/interposed-list" --check "$srcdir" || fail=1
"$srcdir/scripts/settings-list" --check "$srcdir" || fail=1

# The RECAP_* variables read anywhere (C getenv/recap__env, Python os.environ/getenv, ${NAME} in
# the scripts and shell tests), each a row of the table or of a family (a row ending in '_').
names=$(sed -n 's/^ *{"\(RECAP_[A-Z0-9_]*\)".*/\1/p' "$srcdir/src/base/settings.c")
[ -n "$names" ] || { echo "readme: no settings read from src/base/settings.c"; exit 1; }
reads=$(cd "$srcdir" && {
    grep -rhoE '(getenv|recap__env|recap__env_choice)\("RECAP_[A-Z0-9_]+"' \
        --include='*.c' --include='*.h' --include='*.cpp' --include='*.cu' .
    py="(environ\.get|environ\.setdefault|getenv)\(['\"]RECAP_[A-Z0-9_]+"
    grep -rhoE "$py|environ\[['\"]RECAP_[A-Z0-9_]+" --include='*.py' .
    for f in scripts/* .ci/run tests/*/*.sh tests/install/check-installed; do
        [ -f "$f" ] && grep -hoE '\$\{?RECAP_[A-Z0-9_]+' "$f"
    done
} | grep -oE 'RECAP_[A-Z0-9_]+' | sort -u)
for r in $reads; do
    known=0
    for n in $names; do
        case $n in
        *_) case $r in "$n"?*) known=1 ;; esac ;;
        *) [ "$r" = "$n" ] && known=1 ;;
        esac
    done
    [ $known = 1 ] ||
        { echo "readme: $r is read but src/base/settings.c has no row for it"; fail=1; }
done

# The installed headers (Makefile.am's *include*_HEADERS), each named in the Installing section.
headers=$(sed -n '/^[a-z_]*include[a-z_]*_HEADERS *=/,/[^\\]$/p' "$srcdir/Makefile.am" |
    grep -o 'include/[a-z/]*\.h' | sed 's|^include/||')
[ -n "$headers" ] || { echo "readme: no installed headers read from Makefile.am"; exit 1; }
section=$(sed -n '/^## Installing/,/^## /p' "$srcdir/README.md")
for h in $headers; do
    echo "$section" | grep -q "\`$h\`" || { echo "readme: the Installing section does not name $h"; fail=1; }
done
exit $fail
