# SPDX-License-Identifier: Apache-2.0
"""Where librecap and its interposer are, found without loading them: the order recap._lib tries
(after a librecap already in the process), and what recap-run gives a command. Nothing heavy is
imported here (no ctypes): recap-run's own start-up is every launched job's cost."""
import os


def candidates():
    """RECAP_LIB (the library, or the folder holding it) alone when set; else the copy in the
    wheel, then a build tree this package sits in. Paths are str as os.fsdecode makes them."""
    env = os.environ.get("RECAP_LIB")
    if env:
        yield os.path.join(env, "librecap.so.1") if os.path.isdir(env) else env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "_lib", "librecap.so.1")
    for up in ("..", os.path.join("..", "..")):
        yield os.path.normpath(os.path.join(here, up, "..", "src", ".libs", "librecap.so.1"))


def loaded():
    """The librecap mapped into this process already (preloaded, or loaded by a plugin), read
    from /proc/self/maps (recap._lib asks the loader itself, through ctypes), or None."""
    try:
        with open("/proc/self/maps", "rb") as f:
            maps = f.read()
    except OSError:
        return None
    if b"/librecap.so" not in maps:  # (the usual case, decided without parsing)
        return None
    for line in maps.splitlines():
        path = line.split(None, 5)[-1]
        if path.startswith(b"/") and os.path.basename(path).startswith(b"librecap.so"):
            return os.fsdecode(path)
    return None


def library_file():
    """The librecap recap._lib would load, as a file: one in the process already, else the first
    of candidates() that is there, or None (then only the loader's search path is left, which
    recap._lib asks)."""
    pre = loaded()
    if pre:
        return pre
    for path in candidates():
        if os.path.exists(path):
            return path
    return None


def preload_beside(library: str) -> str:
    """The interposer object, librecap-preload.so, beside a librecap (it finds that librecap
    through its own run path)."""
    return os.path.join(os.path.dirname(os.path.realpath(library)), "librecap-preload.so")
