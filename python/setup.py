# SPDX-License-Identifier: Apache-2.0
"""recap's Python package (distribution recap-rng, import name recap).

- recap._C, recap.torch's compiled extension (recap/csrc, built as recap._C_torch), built by
  torch's own extension build against the torch of the build environment: ``pip install
  --no-build-isolation ./python`` after torch is installed (an isolated build compiles against
  the newest torch recap was tested on, which the wheel then requires). recap/_build.py records which torch it was
  built for; recap.torch refuses the extension under another, and the wheel's metadata requires
  that torch release (``torch==X.Y.Z``). A build that cannot make it fails, loudly:
  ``RECAP_PYTHON_OPS=1`` installs without it (recap.torch then runs its Python operations,
  slower), nothing else does. ``RECAP_EXT_TESTS=1`` compiles the test entries (``_test_*``,
  recap/csrc/test_entries.cpp) into it: for the package's own tests, never in a shipped wheel.
- librecap, bundled as recap/_lib/librecap.so.1 with its interposer librecap-preload.so:
  RECAP_BUNDLE_LIB names one, else the checkout's (../src/.libs after ./scripts/bootstrap), else
  one built here (librecap_build.py: from the sdist's librecap/ tarball, or from the checkout).
- recap.h and its headers (recap/include), which the extension compiles against and the CuPy
  dropout kernel includes: from the checkout's include/ (configured); an sdist carries its copy.

A wheel holding native code is tagged for its platform; ``python -m build`` makes the sdist and
the wheel from a checkout, scripts/wheel makes one a package index takes (manylinux, stripped).
"""
import glob
import os
import shutil
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import librecap_build  # noqa: E402 - beside this file, in the checkout and in the sdist

BUILT = os.path.join(HERE, "..", "src", ".libs", "librecap.so.1")
TREE_INCLUDE = os.path.join(HERE, "..", "include")
PKG_INCLUDE = os.path.join(HERE, "recap", "include")
PYTHON_OPS = os.environ.get("RECAP_PYTHON_OPS") == "1"
TEST_ENTRIES = os.environ.get("RECAP_EXT_TESTS") == "1"
# The commands that compile: only they need torch (metadata and the sdist do not, so a build
# frontend can ask for the build's requirements before torch is there).
COMPILING = any(c in sys.argv for c in ("build", "build_ext", "bdist_wheel", "install",
                                        "develop", "editable_wheel", "bdist_egg"))
# A sanitizer build of recap._C for scripts/ci-torch-threads: thread or address (never shipped;
# the sanitizer's runtime must be preloaded into python to import it).
SANITIZE = os.environ.get("RECAP_EXT_SANITIZE", "")


def copy_headers() -> str:
    """recap.h and include/recap/*.h into recap/include (from the checkout, configured where it
    is not yet; an sdist has them there already); the directory the extension compiles
    against."""
    if librecap_build.in_checkout():
        version = os.path.join(TREE_INCLUDE, "recap", "version.h")
        if not os.path.exists(version):
            version = librecap_build.version_header()
        os.makedirs(os.path.join(PKG_INCLUDE, "recap"), exist_ok=True)
        shutil.copy2(os.path.join(TREE_INCLUDE, "recap.h"), PKG_INCLUDE)
        for h in glob.glob(os.path.join(TREE_INCLUDE, "recap", "*.h")) + [version]:
            shutil.copy2(h, os.path.join(PKG_INCLUDE, "recap"))
    if not os.path.exists(os.path.join(PKG_INCLUDE, "recap", "version.h")):
        raise SystemExit("recap-rng: recap.h is missing: build from recap's checkout or from "
                         "recap-rng's sdist")
    return PKG_INCLUDE


def bundled_lib():
    """The librecap to bundle that exists already (RECAP_BUNDLE_LIB, the checkout's build)."""
    lib = os.environ.get("RECAP_BUNDLE_LIB", BUILT)
    return lib if os.path.exists(lib) else None


def can_bundle() -> bool:
    """Whether a librecap will be bundled: one exists, or one can be built here."""
    return bundled_lib() is not None or librecap_build.embedded() is not None or \
        librecap_build.in_checkout()


# The LICENSE of the checkout beside this file (setuptools puts LICENSE* of the project folder
# into the sdist and the wheel); an sdist has its copy.
if librecap_build.in_checkout() and os.path.exists(os.path.join(HERE, "..", "LICENSE")):
    shutil.copy2(os.path.join(HERE, "..", "LICENSE"), os.path.join(HERE, "LICENSE"))


# The torch releases recap._C compiles against (python/recap/csrc/torch_access.h names their
# generator-state layouts) and the newest one CI built and tested it on.
OLDEST_TORCH, NEWEST_TESTED_TORCH = (2, 11), (2, 15)


def supported(version: str) -> None:
    """Refuses a torch older than recap._C's oldest in one line; a newer one than CI tested builds,
    with a warning (its layout is taken to be the newest known)."""
    try:
        mm = tuple(int(x) for x in version.split("+")[0].split(".")[:2])
    except ValueError:
        return  # a local build with an odd version string: the compiler has the last word
    if mm < OLDEST_TORCH:
        raise SystemExit(
            f"recap-rng: its torch extension needs torch {OLDEST_TORCH[0]}.{OLDEST_TORCH[1]} or "
            f"later; this environment has torch {version}. Upgrade torch, or install with "
            "RECAP_PYTHON_OPS=1 (no extension, slower Python operations).")
    if mm > NEWEST_TESTED_TORCH:
        print(f"recap-rng: warning: torch {version} is newer than the newest release recap._C "
              f"was tested on ({NEWEST_TESTED_TORCH[0]}.{NEWEST_TESTED_TORCH[1]})",
              file=sys.stderr)


def torch_requirement():
    """What the package's metadata says of torch: the release recap._C is built against, where
    torch is in the build environment (pip then installs that release beside the wheel, or says
    the environment's other torch conflicts: the extension works with that one only); none
    without the extension (recap.torch's Python operations: the `torch` extra's range)."""
    if PYTHON_OPS or "sdist" in sys.argv:  # (an sdist builds against whichever torch is there)
        return []
    try:
        import torch
    except ImportError:
        return []  # (asked for the build's requirements before torch is installed)
    return [f"torch=={torch.__version__.split('+')[0]}"]


def extension_build():
    """(ext_modules, cmdclass entries) for recap._C, or none with RECAP_PYTHON_OPS=1 or when
    not compiling."""
    if PYTHON_OPS or not COMPILING:
        return [], {}
    try:
        import torch
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension
    except ImportError as e:
        raise SystemExit(
            f"recap-rng: its torch extension needs torch in the build environment ({e}). "
            "Install torch, then: pip install --no-build-isolation ./python. "
            "RECAP_PYTHON_OPS=1 installs without the extension (slower Python operations).")
    supported(torch.__version__)
    if SANITIZE not in ("", "thread", "address"):
        raise SystemExit(f"recap-rng: RECAP_EXT_SANITIZE={SANITIZE!r}: thread or address")
    sanitize = [f"-fsanitize={SANITIZE}", "-fno-omit-frame-pointer", "-g"] if SANITIZE else []
    include = copy_headers()
    csrc = os.path.join("recap", "csrc")
    sources = sorted(f for f in glob.glob(os.path.join(csrc, "*.cpp"))
                     if TEST_ENTRIES or os.path.basename(f) != "test_entries.cpp")
    ext = CUDAExtension(
        "recap._C_torch", sources,
        include_dirs=[os.path.abspath(include), os.path.abspath(csrc)],
        define_macros=[("RECAP_TORCH_BUILT_FOR", '"%s"' % torch.__version__)] +
        ([("RECAP_TEST_ENTRIES", "1")] if TEST_ENTRIES else []),
        extra_compile_args={"cxx": ["-O2", "-Wall", "-Wextra", "-Werror",
                                    "-Wno-unused-parameter"] + sanitize},
        extra_link_args=sanitize)

    class BuildExt(BuildExtension):
        def run(self):
            super().run()
            # Which torch the extension is for, read before it is imported (recap/_ext.py).
            with open(os.path.join(self.build_lib, "recap", "_build.py"), "w") as f:
                f.write("# Written by setup.py: the torch recap._C was built against.\n"
                        f"TORCH_VERSION = {torch.__version__!r}\n")

    return [ext], {"build_ext": BuildExt}


class BuildPy(build_py):
    def run(self):
        super().run()
        if PYTHON_OPS:  # an extension an earlier build left in the build tree is not this one
            for stale in glob.glob(os.path.join(self.build_lib, "recap", "_C*.so")) + \
                    glob.glob(os.path.join(self.build_lib, "recap", "_build.py")):
                os.remove(stale)
        dest = os.path.join(self.build_lib, "recap", "_lib")
        lib = bundled_lib()
        if lib is None and can_bundle():
            temp = self.get_finalized_command("build").build_temp
            lib = os.path.join(librecap_build.build(os.path.abspath(temp)), "librecap.so.1")
        if lib:
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(os.path.realpath(lib), os.path.join(dest, "librecap.so.1"))
            interposer = os.path.join(os.path.dirname(lib), "librecap-preload.so")
            if os.path.exists(interposer):  # recap-run preloads it; it finds librecap.so.1 by $ORIGIN
                shutil.copy2(os.path.realpath(interposer),
                             os.path.join(dest, "librecap-preload.so"))
        try:
            include = copy_headers()
        except SystemExit:
            if not PYTHON_OPS:
                raise
            return
        shutil.copytree(include, os.path.join(self.build_lib, "recap", "include"),
                        dirs_exist_ok=True)


class Sdist(sdist):
    def run(self):
        # The sdist carries recap.h and librecap's own source tarball: it builds without a
        # checkout beside it.
        if librecap_build.in_checkout():
            librecap_build.make_dist()
        copy_headers()
        super().run()


class NativeDistribution(Distribution):
    """A wheel holding librecap or recap._C is native code: tagged for its platform."""

    def has_ext_modules(self):
        return bool(self.ext_modules) or can_bundle()


ext_modules, ext_cmds = extension_build()
# recap-run is a shell front (python/bin/recap-run says why), installed as a script.
setup(distclass=NativeDistribution, ext_modules=ext_modules, scripts=["bin/recap-run"],
      install_requires=torch_requirement(),
      cmdclass={"build_py": BuildPy, "sdist": Sdist, **ext_cmds})
