#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The layer rule (README's Layout, HACKING.md): no folder includes or calls one above it
# (scripts/layers reads the sources).
command -v python3 >/dev/null 2>&1 || { echo "layers: no python3 to read the sources"; exit 77; }
exec python3 "$srcdir/scripts/layers" "$srcdir"
