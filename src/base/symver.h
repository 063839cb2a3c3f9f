/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A public function added after ABI 1.0, placed after its definition:
 *     RECAP__SINCE(recap_cupti_holder, "RECAP_1.3");
 * gives it the version src/librecap.map lists it under as its default (name@@RECAP_1.3, what
 * new binaries link to) and keeps name@RECAP_1.0 beside it: binaries linked before the map had
 * a node per version found every recap_* function at RECAP_1.0 and must still run (libfabric's
 * COMPAT_SYMVER does the same). Both versions are the one function. Only in the shared library
 * (RECAP_SHARED_LIBRARY, set by its build): the fuzz harness links the sources into a program.
 */
#ifndef RECAP_BASE_SYMVER_H
#define RECAP_BASE_SYMVER_H

#ifdef RECAP_SHARED_LIBRARY
#define RECAP__SINCE(name, node)                                                             \
    extern __typeof__(name) recap__v1_0_##name                                              \
        __attribute__((alias(#name), visibility("default")));                                \
    __asm__(".symver " #name ", " #name "@@@" node);                                         \
    __asm__(".symver recap__v1_0_" #name ", " #name "@RECAP_1.0, remove")
#else
#define RECAP__SINCE(name, node) _Static_assert(sizeof(node) > 1, #name)
#endif

#endif
