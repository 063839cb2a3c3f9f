# SPDX-License-Identifier: Apache-2.0
"""Bundles the librecap of the build tree this package sits in (../src/.libs, after
./scripts/bootstrap) into the wheel as recap/_lib/librecap.so.1, with the interposer object
librecap-preload.so beside it (recap-run preloads it; it finds librecap.so.1 through $ORIGIN), so `pip install ./python` gives a
package that finds its library (and include/recap/philox.h, for the CuPy dropout kernel), and
builds recap/_torchops.c beside it. Without a built library the package is pure Python and finds
an installed librecap (or RECAP_LIB) at run time."""
import os
import shlex
import shutil
import subprocess
import sysconfig

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
BUILT = os.path.join(HERE, "..", "src", ".libs", "librecap.so.1")
PHILOX = os.path.join(HERE, "..", "include", "recap", "philox.h")
INCLUDE = os.path.join(HERE, "..", "include")


def build_torchops(dest):
    """recap/_lib/librecap_torch.so: torch generators' value operations in C (recap/_torchops.c;
    recap.torch uses it when it is there and passes its checks, and its Python table otherwise).
    Needs recap.h with its generated version.h (a configured tree) and a C compiler; without
    them the package goes without it. RECAP_BUILD_TORCHOPS=0 skips it."""
    if os.environ.get("RECAP_BUILD_TORCHOPS") == "0":
        return
    if not os.path.exists(os.path.join(INCLUDE, "recap", "version.h")):
        if os.environ.get("RECAP_BUILD_TORCHOPS") == "1":
            raise RuntimeError("recap/_torchops.c needs a configured tree (include/recap/version.h)")
        return
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    src = os.path.join(HERE, "recap", "_torchops.c")
    out = os.path.join(dest, "librecap_torch.so")
    cmd = cc + ["-std=gnu11", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall",
                "-Wextra", "-Werror", "-I" + INCLUDE, "-o", out, src]
    try:
        subprocess.run(cmd, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        if os.environ.get("RECAP_BUILD_TORCHOPS") == "1":
            raise
        print(f"recap: {src} not built ({e}); recap.torch uses its Python operations")


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = os.environ.get("RECAP_BUNDLE_LIB", BUILT)
        if os.path.exists(lib):
            dest = os.path.join(self.build_lib, "recap", "_lib")
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(os.path.realpath(lib), os.path.join(dest, "librecap.so.1"))
            interposer = os.path.join(os.path.dirname(lib), "librecap-preload.so")
            if os.path.exists(interposer):
                shutil.copy2(os.path.realpath(interposer), os.path.join(dest, "librecap-preload.so"))
        dest = os.path.join(self.build_lib, "recap", "_lib")
        os.makedirs(dest, exist_ok=True)
        build_torchops(dest)
        if os.path.exists(PHILOX):  # the CuPy dropout kernel compiles against it
            dest = os.path.join(self.build_lib, "recap", "include", "recap")
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(PHILOX, dest)


setup(cmdclass={"build_py": BuildPy})
