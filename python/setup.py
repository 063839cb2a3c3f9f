# SPDX-License-Identifier: Apache-2.0
"""Bundles the librecap of the build tree this package sits in (../src/.libs, after
./scripts/bootstrap) into the wheel as recap/_lib/librecap.so.1, so `pip install ./python` gives a
package that finds its library (and include/recap/philox.h, for the CuPy dropout kernel). Without a built library the package is pure Python and finds an
installed librecap (or RECAP_LIB) at run time."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
BUILT = os.path.join(HERE, "..", "src", ".libs", "librecap.so.1")
PHILOX = os.path.join(HERE, "..", "include", "recap", "philox.h")


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = os.environ.get("RECAP_BUNDLE_LIB", BUILT)
        if os.path.exists(lib):
            dest = os.path.join(self.build_lib, "recap", "_lib")
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(os.path.realpath(lib), os.path.join(dest, "librecap.so.1"))
        if os.path.exists(PHILOX):  # the CuPy dropout kernel compiles against it
            dest = os.path.join(self.build_lib, "recap", "include", "recap")
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(PHILOX, dest)


setup(cmdclass={"build_py": BuildPy})
