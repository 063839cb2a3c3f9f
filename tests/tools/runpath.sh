#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The tools make installs find librecap through the run path src/tools/runpath.sh computes, and
# through nothing else (libtool adds no absolute libdir): readelf on the linked binaries. Then
# runpath.sh itself on the layouts configure allows: $ORIGIN and the way from bindir to libdir
# when both are inside the prefix or the exec prefix, libdir as it is otherwise.
set -u
command -v readelf >/dev/null 2>&1 || { echo "runpath: no readelf"; exit 77; }
fails=0
want=$(cat src/tools/runpath.stamp)
for tool in recap-probe recap-selfcheck; do
    got=$(readelf -d "src/tools/.libs/$tool" | sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]$/\1/p')
    if [ "$got" = "$want" ]; then
        echo "runpath: $tool: $got"
    else
        echo "runpath: src/tools/.libs/$tool has run path '$got', not '$want'"
        fails=1
    fi
done

# layout BINDIR LIBDIR PREFIX EXEC_PREFIX WANT
layout() {
    got=$(sh "$srcdir/src/tools/runpath.sh" "$1" "$2" "$3" "$4")
    [ "$got" = "$5" ] || { echo "runpath: runpath.sh $1 $2 $3 $4: '$got', not '$5'"; fails=1; }
}
layout /opt/p/bin /opt/p/lib /opt/p /opt/p '$ORIGIN/../lib'
layout /opt/p/bin /opt/p/lib/x86_64-linux-gnu /opt/p /opt/p '$ORIGIN/../lib/x86_64-linux-gnu'
layout /opt/p/libexec/x/bin /opt/p/lib64 /opt/p /opt/p '$ORIGIN/../../../lib64'
layout /opt/p /opt/p/lib /opt/p /opt/p '$ORIGIN/lib'
layout /opt/p/bin /opt/p /opt/p /opt/p '$ORIGIN/..'
layout /opt/p/bin /opt/p/bin /opt/p /opt/p '$ORIGIN'
layout /opt/e/bin /opt/e/lib /opt/p /opt/e '$ORIGIN/../lib'
layout /usr/bin /usr/lib / / '$ORIGIN/../lib'
layout /opt//p/./bin/ /opt/p/lib/ /opt/p/ /opt/p '$ORIGIN/../lib'
layout /opt/p/bin /usr/lib/recap /opt/p /opt/p /usr/lib/recap
layout /usr/local/bin /opt/p/lib /opt/p /opt/p /opt/p/lib
layout /opt/pp/bin /opt/p/lib /opt/p /opt/p /opt/p/lib
exit $fails
