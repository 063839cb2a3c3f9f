# SPDX-License-Identifier: Apache-2.0
# RECAP_CHECK_CUDA: find the CUDA toolkit (headers, nvcc, bin2c; cuRAND as a test reference).
# librecap never links libcuda or cudart: it needs only cuda.h at build time and nvcc for its
# own kernels, and dlopens the driver at run time (as libfabric's --enable-cuda-dlopen does).
AC_DEFUN([RECAP_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit prefix (default: /usr/local/cuda, else nvcc on PATH)])],
    [], [with_cuda=guess])
  AS_IF([test "x$with_cuda" = xno], [AC_MSG_ERROR([recap needs the CUDA toolkit (headers and nvcc)])])
  AS_IF([test "x$with_cuda" = xguess || test "x$with_cuda" = xyes], [
    with_cuda=/usr/local/cuda
    AS_IF([test ! -d "$with_cuda"], [
      AC_PATH_PROG([recap_nvcc_guess], [nvcc])
      AS_IF([test -n "$recap_nvcc_guess"], [with_cuda=`dirname "$recap_nvcc_guess"`/..])
    ])
  ])
  CUDA_HOME=$with_cuda
  CUDA_CPPFLAGS="-I$CUDA_HOME/include"
  # The toolkit's library folder (for the tests' cuRAND reference): the target folder of this
  # host (targets/x86_64-linux, targets/sbsa-linux on Arm servers, targets/aarch64-linux on
  # Jetson), else lib64 or lib, whichever holds the CUDA libraries.
  AC_REQUIRE([AC_CANONICAL_HOST])
  AC_MSG_CHECKING([for the CUDA library folder])
  CUDA_LIBDIR=
  AS_CASE([$host_cpu], [aarch64], [recap_cuda_target="sbsa-linux aarch64-linux"],
          [recap_cuda_target="$host_cpu-linux"])
  for recap_dir in `for t in $recap_cuda_target; do echo "$CUDA_HOME/targets/$t/lib"; done` \
                   "$CUDA_HOME/lib64" "$CUDA_HOME/lib"; do
    AS_IF([test -z "$CUDA_LIBDIR" && ls "$recap_dir"/libcudart.so* "$recap_dir"/libcurand.so* \
           >/dev/null 2>&1], [CUDA_LIBDIR=$recap_dir])
  done
  AS_IF([test -z "$CUDA_LIBDIR"], [CUDA_LIBDIR="$CUDA_HOME/lib64"
    AC_MSG_RESULT([none found, assuming $CUDA_LIBDIR])], [AC_MSG_RESULT([$CUDA_LIBDIR])])
  CUDA_LDFLAGS="-L$CUDA_LIBDIR"

  recap_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
  AC_CHECK_HEADER([cuda.h], [], [AC_MSG_ERROR([cuda.h not found under $CUDA_HOME/include; use --with-cuda=DIR])])
  CPPFLAGS=$recap_save_CPPFLAGS

  AC_PATH_PROG([NVCC], [nvcc], [], [$CUDA_HOME/bin$PATH_SEPARATOR$PATH])
  AS_IF([test -z "$NVCC"], [AC_MSG_ERROR([nvcc not found: recap compiles its own kernels])])
  AC_PATH_PROG([BIN2C], [bin2c], [], [$CUDA_HOME/bin$PATH_SEPARATOR$PATH])
  AS_IF([test -z "$BIN2C"], [AC_MSG_ERROR([bin2c (CUDA toolkit) not found: it embeds the kernels])])

  # Turing (sm_75, T4), Ampere (sm_80), Hopper (sm_90) as cubins, and compute_90 PTX for newer
  # GPUs (the driver JIT-compiles it): the GPUs PyTorch's CUDA 13 wheels cover, down to T4s.
  AC_ARG_VAR([NVCC_GENCODE], [nvcc -gencode (or -arch) flags for recap's kernels (default: sm_75 sm_80 sm_90 cubins and compute_90 PTX)])
  recap_gencode_default=no
  AS_IF([test -z "$NVCC_GENCODE"], [
    recap_gencode_default=yes
    NVCC_GENCODE="-gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"])
  # What the flags make, as nvcc resolves them (not a restatement of the default).
  AC_MSG_CHECKING([what nvcc builds for NVCC_GENCODE])
  NVCC_GENCODE_SUMMARY=`$SHELL "$srcdir/scripts/gencode-summary" "$NVCC" $NVCC_GENCODE 2>conftest.err`
  AS_IF([test -z "$NVCC_GENCODE_SUMMARY"], [
    AC_MSG_RESULT([nothing])
    recap_gencode_err=`cat conftest.err`
    cat conftest.err >&AS_MESSAGE_LOG_FD
    AC_MSG_ERROR([nvcc does not build GPU code for NVCC_GENCODE=$NVCC_GENCODE: $recap_gencode_err])])
  rm -f conftest.err
  AC_MSG_RESULT([$NVCC_GENCODE_SUMMARY])
  AC_SUBST([NVCC_GENCODE_DEFAULT], [$recap_gencode_default])

  # NVTX3 (header-only, in the toolkit's include/nvtx3): recap's ranges on Nsight timelines.
  # Without it the range calls compile to nothing.
  recap_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
  AC_CHECK_HEADER([nvtx3/nvToolsExt.h], [have_nvtx3=yes], [have_nvtx3=no])
  CPPFLAGS=$recap_save_CPPFLAGS
  AS_IF([test "x$have_nvtx3" = xyes], [AC_DEFINE([HAVE_NVTX3], [1], [NVTX3 headers present])])
  AM_CONDITIONAL([HAVE_NVTX3], [test "x$have_nvtx3" = xyes])

  # cuRAND is only a reference for the tests (its host generator runs without a GPU): the
  # library builds without it, make check does not.
  recap_save_LDFLAGS=$LDFLAGS
  LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
  AC_CHECK_LIB([curand], [curandCreateGeneratorHost], [have_curand=yes], [have_curand=no])
  LDFLAGS=$recap_save_LDFLAGS
  AS_IF([test "x$have_curand" != xyes],
    [AC_MSG_WARN([cuRAND not found under $CUDA_LIBDIR: make check will fail (its tests compare against it)])])

  AC_SUBST([CUDA_HOME])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AC_SUBST([CUDA_LIBDIR])
  AC_SUBST([NVCC_GENCODE_SUMMARY])
])
