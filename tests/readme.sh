#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# README.md says what the tree does: its list of interposed entry points is hooks/interpose.h's
# (scripts/interposed-list), and its install section names every installed header.
fail=0
"$srcdir/scripts/interposed-list" --check "$srcdir" || fail=1
exit $fail
