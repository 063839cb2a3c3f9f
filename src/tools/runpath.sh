#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The run path the installed tools find librecap by. When bindir and libdir both lie inside the
# prefix (or the exec prefix), the way from one to the other moves with them: $ORIGIN and the
# relative path, so a moved or copied prefix runs its own library, not the original's (or none).
# Otherwise libdir stays where configure put it whatever moves: its absolute path.
#   runpath.sh BINDIR LIBDIR PREFIX EXEC_PREFIX
# The paths are taken as written (make's values, without DESTDIR): "//" and "/./" are folded,
# ".." and symbolic links are not resolved.
set -eu
[ $# -eq 4 ] || { echo "usage: runpath.sh BINDIR LIBDIR PREFIX EXEC_PREFIX" >&2; exit 2; }

# A path as written, "//" and "/./" folded and no slash at the end ("" is the root).
tidy() { printf '%s\n' "$1" | sed -e 's|/\./|/|g' -e 's|//*|/|g' -e 's|/\.$||' -e 's|/$||'; }
# Whether path $1 is directory $2 or inside it.
inside() { case $1 in "$2" | "$2"/*) return 0 ;; esac; return 1; }

bindir=$(tidy "$1") libdir=$(tidy "$2")
for top in "$3" "$4"; do
    top=$(tidy "$top")
    if inside "$bindir" "$top" && inside "$libdir" "$top"; then
        # Up from bindir to the nearest folder libdir is inside, then down to libdir.
        common=$bindir up=
        while ! inside "$libdir" "$common"; do
            common=${common%/*}
            up=../$up
        done
        down=${libdir#"$common"}
        rel=$up${down#/}
        echo "\$ORIGIN${rel:+/${rel%/}}"
        exit 0
    fi
done
echo "$2"
