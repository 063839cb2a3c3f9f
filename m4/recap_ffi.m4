# SPDX-License-Identifier: Apache-2.0
# RECAP_CHECK_LIBFFI: libffi through pkg-config, falling back to a plain header/library check
# (the GPU machine's kit unpacks Debian's libffi-dev into a private prefix).
AC_DEFUN([RECAP_CHECK_LIBFFI], [
  PKG_CHECK_MODULES([FFI], [libffi >= 3.2], [have_libffi=yes], [
    AC_CHECK_HEADER([ffi.h],
      [AC_CHECK_LIB([ffi], [ffi_call], [have_libffi=yes; FFI_LIBS=-lffi; FFI_CFLAGS=], [have_libffi=no])],
      [have_libffi=no])
  ])
  AS_IF([test "x$have_libffi" != xyes], [AC_MSG_ERROR([libffi not found (Debian: libffi-dev)])])
  AC_SUBST([FFI_CFLAGS])
  AC_SUBST([FFI_LIBS])
])
