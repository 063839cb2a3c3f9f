#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The two-GPU NCCL test (tests/gpu/nccl_two_ranks.cu): builds it against the librecap of a built
# tree and runs it, one process per GPU. Run on a machine with two GPUs (nvidia-h200-x2), from
# the root of a built tree (./configure && make, e.g. of the dist tarball scripts/gpu-check
# unpacks):   tests/gpu/nccl_two_ranks.sh [OUTDIR]
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0). NCCL comes from the CUDA toolkit, or from
# NCCL_HOME (include/nccl.h, lib/libnccl.so.2) when set, e.g. pip's nvidia/nccl.
# Exit status: the test's (0 pass, 1 a check failed, 2 setup), 2 when it cannot be built here.
set -u
root=$(pwd)
out=${1:-${OUT:-/tmp/recap-gpu-out}}
mkdir -p "$out"
cuda=${CUDA_HOME:-/usr/local/cuda}
nccl=${NCCL_HOME:-$cuda}
lib=$root/src/.libs
[ -f "$lib/librecap.so" ] || { echo "nccl_two_ranks: no $lib/librecap.so: build the tree first" >&2; exit 2; }
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$gpus" -ge 2 ] || { echo "nccl_two_ranks: $gpus GPU(s) here; two are needed" >&2; exit 2; }
ncclinc=; nccllib=
for d in "$nccl/include" "$cuda/include"; do [ -f "$d/nccl.h" ] && { ncclinc=$d; break; }; done
for d in "$nccl/lib" "$nccl/lib64" "$cuda/lib64" "$cuda/lib"; do
    [ -e "$d/libnccl.so.2" ] && { nccllib=$d; break; }
done
[ -n "$ncclinc" ] && [ -n "$nccllib" ] || { echo "nccl_two_ranks: nccl.h or libnccl.so.2 not found (set NCCL_HOME)" >&2; exit 2; }
# pip's NCCL ships libnccl.so.2 without the libnccl.so link -lnccl needs: name the file.
"$cuda/bin/nvcc" -O2 -std=c++17 -arch=sm_90 -I"$root/include" -I"$root/tests/gpu" -I"$ncclinc" \
    "$root/tests/gpu/nccl_two_ranks.cu" -o "$out/nccl_two_ranks" \
    -L"$lib" -lrecap -L"$nccllib" -l:libnccl.so.2 -Xlinker -rpath="$lib" -Xlinker -rpath="$nccllib" \
    || { echo "nccl_two_ranks: build failed" >&2; exit 2; }
export NCCL_NVLS_ENABLE=0
# recap's log says which NCCL it uses (the process's, loaded by the test through -lnccl).
RECAP_LOG=${RECAP_LOG:-info} RECAP_CUDA_DRIVER= timeout "${STEP_TIMEOUT:-300}" "$out/nccl_two_ranks" \
    2>&1 | tee "$out/nccl-two-ranks.log"
exit "${PIPESTATUS[0]}"
