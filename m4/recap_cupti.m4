# SPDX-License-Identifier: Apache-2.0
# RECAP_CHECK_CUPTI: CUPTI headers for the callback front end (the library dlopens libcupti).
AC_DEFUN([RECAP_CHECK_CUPTI], [
  AC_REQUIRE([RECAP_CHECK_CUDA])
  recap_save_CPPFLAGS=$CPPFLAGS
  CUPTI_CPPFLAGS=$CUDA_CPPFLAGS
  AS_IF([test -d "$CUDA_HOME/extras/CUPTI/include"], [CUPTI_CPPFLAGS="$CUPTI_CPPFLAGS -I$CUDA_HOME/extras/CUPTI/include"])
  CPPFLAGS="$CPPFLAGS $CUPTI_CPPFLAGS"
  AC_CHECK_HEADER([cupti.h], [have_cupti=yes], [have_cupti=no])
  CPPFLAGS=$recap_save_CPPFLAGS
  AS_IF([test "x$have_cupti" = xyes], [AC_DEFINE([HAVE_CUPTI], [1], [CUPTI headers present])])
  AC_SUBST([CUPTI_CPPFLAGS])
  AM_CONDITIONAL([HAVE_CUPTI], [test "x$have_cupti" = xyes])
])
