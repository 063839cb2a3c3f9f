#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# librecap.la was linked for the libdir configure chose last (src/libdir.stamp relinks it when a
# new configure changes libdir): linked for an older one, libtool installs the tools against the
# wrong place. CONFIGURED_LIBDIR is the configured libdir (tests/Makefile.inc).
la=src/librecap.la
if ! grep -qx "libdir='$CONFIGURED_LIBDIR'" "$la"; then
    echo "libdir: $la has $(grep '^libdir=' "$la"); configure chose '$CONFIGURED_LIBDIR'"
    exit 1
fi
echo "libdir: $la linked for $CONFIGURED_LIBDIR"
