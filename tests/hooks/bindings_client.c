/* SPDX-License-Identifier: Apache-2.0 */
/*
 * For tests/hooks/bindings.sh: a program linked with -lrecap for its API, before the driver (the
 * CUDA test double stands in for libcuda), that also calls dlsym and driver graph entry points of
 * its own. Linking recap must bind none of them to recap; preloading recap's interposer object
 * must bind them to it.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

#include "recap.h"

int main(void)
{
    /* volatile: the references stay, though nothing is called */
    CUresult (*volatile launch)(CUgraphExec, CUstream) = cuGraphLaunch;
    CUresult (*volatile begin)(CUstream, CUstreamCaptureMode) = cuStreamBeginCapture;
    void *sym = dlsym(RTLD_DEFAULT, "recap_abi_version");

    if (recap_abi_version() <= 0 || sym == NULL || launch == NULL || begin == NULL) {
        fprintf(stderr, "bindings_client: recap's API or the driver's entry points are missing\n");
        return 1;
    }
    return 0;
}
