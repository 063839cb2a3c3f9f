#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The kernels' GPU code: configure's summary is what nvcc makes of NVCC_GENCODE
# (scripts/gencode-summary, itself checked here on flags of known outcome), and the default
# builds Turing's sm_75 beside sm_80, sm_90 and compute_90 PTX. tests/Makefile.inc passes NVCC,
# NVCC_GENCODE, GENCODE_SUMMARY (configure's) and GENCODE_DEFAULT (yes when not overridden).
summary() { "$srcdir/scripts/gencode-summary" "$NVCC" "$@"; }
fail=0
check() {
    if [ "$1" != "$2" ]; then
        echo "gencode: $3: got '$1', want '$2'"
        fail=1
    fi
}
# shellcheck disable=SC2086 # the flags are words
check "$(summary $NVCC_GENCODE)" "$GENCODE_SUMMARY" "configure's summary of '$NVCC_GENCODE'"
check "$(summary -arch=sm_86)" "sm_86, PTX compute_86" "-arch=sm_86"
check "$(summary -gencode arch=compute_90,code=compute_90)" "no cubin, PTX compute_90" "PTX only"
check "$(summary '-gencode=arch=compute_80,code=[sm_80,compute_80]')" "sm_80, PTX compute_80" \
    "code=[...]"
if summary -arch=sm_10 >/dev/null 2>&1; then
    echo "gencode: an architecture nvcc refuses was summarized"
    fail=1
fi
if [ "$GENCODE_DEFAULT" = yes ]; then
    check "$GENCODE_SUMMARY" "sm_75 sm_80 sm_90, PTX compute_90" "the default"
fi
[ $fail -ne 0 ] || echo "gencode: $GENCODE_SUMMARY"
exit $fail
