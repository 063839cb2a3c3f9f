# SPDX-License-Identifier: Apache-2.0
# The C library's version (configure.ac's AC_INIT); python/tests/unit/test_abi.py keeps them equal.
__version__ = "0.1.0"
