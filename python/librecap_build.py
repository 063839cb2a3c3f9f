# SPDX-License-Identifier: Apache-2.0
"""Where recap-rng's librecap comes from, and building it (used by setup.py; not installed).

The package bundles librecap (recap/_lib/librecap.so.1 and the interposer librecap-preload.so).
An sdist carries librecap's own source distribution (`make dist`'s tarball, in librecap/), so it
builds anywhere the C library builds (a C compiler, make, the CUDA toolkit's nvcc and headers,
libffi's headers; no autotools): setup.py configures it in the build folder and makes the two
libraries. A checkout uses the tree it sits in: the libraries ./scripts/bootstrap built, or,
when there are none, a build of its own under python/build (autoreconf first where the checkout
has no configure script yet). Making the sdist from a checkout runs `make dist` in a configured
tree (the checkout itself, or that build folder).
"""
import glob
import os
import shutil
import subprocess
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.normpath(os.path.join(HERE, ".."))
EMBED_DIR = os.path.join(HERE, "librecap")
OWN_BUILD = os.path.join(HERE, "build", "librecap-tree")
LIBS = ("src/librecap.la", "src/librecap-preload.la")


def in_checkout() -> bool:
    """Whether this package sits in recap's source tree (not an unpacked sdist)."""
    return os.path.exists(os.path.join(TREE, "configure.ac")) and \
        os.path.exists(os.path.join(TREE, "src", "librecap.map"))


def embedded():
    """The librecap source tarball an sdist carries, or None."""
    found = sorted(glob.glob(os.path.join(EMBED_DIR, "recap-*.tar.gz")))
    return found[-1] if found else None


def _run(cmd, cwd, what):
    try:
        subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"recap-rng: building librecap: {what} failed ({e}); librecap needs a "
                         "C compiler, make, the CUDA toolkit (nvcc, headers) and libffi's "
                         "headers (Debian: build-essential libffi-dev pkg-config)") from None


def _jobs() -> str:
    return str(max(1, min(os.cpu_count() or 1, 16)))


def configured_tree() -> str:
    """A configured build of the checkout: the tree itself when ./scripts/bootstrap configured
    it, else a build folder of its own (VPATH)."""
    if os.path.exists(os.path.join(TREE, "config.status")):
        return TREE
    if not os.path.exists(os.path.join(TREE, "configure")):
        _run(["autoreconf", "-fi"], TREE, "autoreconf -fi (autoconf, automake, libtool)")
    os.makedirs(OWN_BUILD, exist_ok=True)
    if not os.path.exists(os.path.join(OWN_BUILD, "config.status")):
        _run([os.path.join(TREE, "configure"), "-q"], OWN_BUILD, "configure")
    return OWN_BUILD


def version_header() -> str:
    """The configured include/recap/version.h of the checkout (configuring it if need be)."""
    return os.path.join(configured_tree(), "include", "recap", "version.h")


def make_dist() -> str:
    """librecap's source tarball into librecap/ (for the sdist); its path."""
    build = configured_tree()
    for old in glob.glob(os.path.join(build, "recap-*.tar.gz")):
        os.remove(old)
    _run(["make", "-s", "dist"], build, "make dist")
    made = glob.glob(os.path.join(build, "recap-*.tar.gz"))
    if len(made) != 1:
        raise SystemExit(f"recap-rng: make dist made {made}, not one tarball")
    shutil.rmtree(EMBED_DIR, ignore_errors=True)
    os.makedirs(EMBED_DIR)
    dest = os.path.join(EMBED_DIR, os.path.basename(made[0]))
    shutil.move(made[0], dest)
    return dest


def build(build_temp: str) -> str:
    """librecap built from the sdist's tarball (or from the checkout): the folder holding
    librecap.so.1 and librecap-preload.so."""
    tarball = embedded()
    if tarball is not None:
        src_root = os.path.join(build_temp, "librecap-src")
        if not os.path.isdir(src_root):
            with tarfile.open(tarball) as t:
                try:
                    t.extractall(src_root, filter="data")
                except TypeError:  # a Python without extraction filters
                    t.extractall(src_root)
        (src,) = glob.glob(os.path.join(src_root, "recap-*"))
        build_dir = os.path.join(build_temp, "librecap-build")
        os.makedirs(build_dir, exist_ok=True)
        if not os.path.exists(os.path.join(build_dir, "config.status")):
            _run([os.path.join(src, "configure"), "-q"], build_dir, "configure")
    else:
        build_dir = configured_tree()
    _run(["make", "-s", f"-j{_jobs()}", *LIBS], build_dir, "make")
    return os.path.join(build_dir, "src", ".libs")
