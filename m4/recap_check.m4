# SPDX-License-Identifier: Apache-2.0
# RECAP_CHECK_CHECK: the Check unit-test framework (only needed for make check).
AC_DEFUN([RECAP_CHECK_CHECK], [
  PKG_CHECK_MODULES([CHECK], [check >= 0.11], [have_check=yes], [have_check=no])
  AS_IF([test "x$have_check" != xyes],
    [AC_MSG_WARN([Check not found: make check will fail (Debian: check)])])
])
