# SPDX-License-Identifier: Apache-2.0
"""Loading librecap and calling it: statuses become exceptions that carry recap's message."""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Optional

from . import _abi, _paths

__all__ = ["RecapError", "lib", "check", "library_path"]


class RecapError(RuntimeError):
    """A recap call failed: ``status`` is the C status (negative), ``name`` its enum name, and
    the message is recap_last_error() of the failing call."""

    def __init__(self, status: int, message: str, call: str = ""):
        self.status = status
        self.name = _abi.STATUS_NAMES.get(status, f"status {status}")
        self.call = call
        super().__init__(f"{call + ': ' if call else ''}{message} ({self.name})")


class RecapStateError(RecapError):
    """RECAP_ERR_STATE: the call is not allowed in the object's current state or order."""


class RecapNotFoundError(RecapError, KeyError):
    """RECAP_ERR_NOT_FOUND: an unknown name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return RuntimeError.__str__(self)


class RecapUnsupportedError(RecapError):
    """RECAP_ERR_UNSUPPORTED: not supported by this build, driver, device or framework."""


_ERRORS = {_abi.RECAP_ERR_STATE: RecapStateError, _abi.RECAP_ERR_NOT_FOUND: RecapNotFoundError,
           _abi.RECAP_ERR_UNSUPPORTED: RecapUnsupportedError}

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[str] = None


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _preloaded():
    """The librecap already in the process (LD_PRELOAD of its interposer object, or loaded
    globally by a plugin): its hooks report captures to its own state, so the package must use
    that copy, never a second."""
    try:
        return _file_of(ctypes.CDLL(None).recap_abi_version)
    except (OSError, AttributeError):
        return None


def _file_of(fn):
    """The file of the object that defines the function `fn` (dladdr), or None."""
    info = _DlInfo()
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        if dladdr(ctypes.cast(fn, ctypes.c_void_p), ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)  # a path is bytes: any, not only UTF-8
    except AttributeError:
        pass
    return None


def _candidates():
    """A librecap already loaded (preloaded), then recap/_paths.py's order (RECAP_LIB, the copy
    bundled in the wheel, a build tree this package sits in), then the loader's search path (an
    installed librecap) unless RECAP_LIB named one. Paths are str as os.fsdecode makes them
    (bytes that are not UTF-8 kept as surrogates), which os.fsencode, ctypes and the environment
    turn back into the same bytes."""
    pre = _preloaded()
    if pre:
        yield pre
        return
    yield from _paths.candidates()
    if os.environ.get("RECAP_LIB"):
        return
    import ctypes.util  # only here: it imports subprocess and more (recap-run's start-up cost)
    found = ctypes.util.find_library("recap")
    yield found if found else "librecap.so.1"


class _Unusable(Exception):
    """A file that loads but is not a librecap this package can use (the reason is the text)."""


def _needed() -> str:
    return "%d.%d" % _abi.ABI_NEEDED


def _bind(path: str, handle: ctypes.CDLL) -> None:
    """Checks the ABI of the library at `path` before anything of it is called by name, then
    declares DECLS on it. A missing symbol becomes _Unusable naming the file and the ABI, never
    an AttributeError escaping an import."""
    try:
        version = handle.recap_abi_version
    except AttributeError:
        raise _Unusable(f"{path}: not a librecap (it has no recap_abi_version); this recap "
                        f"package needs librecap ABI {_needed()}") from None
    version.argtypes, version.restype = [], ctypes.c_int
    v = version()
    found = (v >> 16, v & 0xFFFF)
    major, minor = _abi.ABI_NEEDED
    if found[0] != major or found[1] < minor:
        raise _Unusable(f"{path}: librecap ABI {found[0]}.{found[1]}, this recap package needs "
                        f"ABI {major}.{minor} (a {major}.x with x >= {minor})")
    for name, (argtypes, restype) in _abi.DECLS.items():
        try:
            fn = getattr(handle, name)
        except AttributeError:
            raise _Unusable(f"{path}: librecap ABI {found[0]}.{found[1]} lacks {name}, which "
                            f"ABI {_needed()} has (a damaged or mislabelled build)") from None
        fn.argtypes = argtypes
        fn.restype = restype


def _load() -> ctypes.CDLL:
    global _path
    errors = []
    unusable = False
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            continue
        try:
            # RTLD_GLOBAL: under LD_PRELOAD this is the preloaded copy, and a plugin loaded
            # later finds the same symbols.
            handle = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            _bind(path, handle)
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        except _Unusable as e:
            errors.append(str(e))
            unusable = True
            continue
        _path = path
        return handle
    if unusable:
        raise ImportError("recap: no usable librecap: " + "; ".join(errors) + ". Reinstall "
                          "recap (its wheel carries a matching librecap), or set RECAP_LIB to "
                          f"the librecap of this release (ABI {_needed()}); a librecap already "
                          "in the process (LD_PRELOAD) must be that one too")
    raise ImportError("librecap not found (set RECAP_LIB to its path, install it, or build it "
                      "with ./scripts/bootstrap): " + "; ".join(errors or ["nothing tried"]))


def lib() -> ctypes.CDLL:
    """The loaded librecap (loaded on first use)."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                _lib = _load()
    return _lib


def library_path() -> str:
    lib()
    return _path or ""


def preload_path() -> str:
    """recap's interposer object, the file LD_PRELOAD names for recap's LD_PRELOAD front end
    (librecap itself interposes nothing): librecap-preload.so beside the loaded librecap."""
    return _paths.preload_beside(_file_of(lib().recap_abi_version) or library_path())


def last_error() -> str:
    msg = lib().recap_last_error()
    return msg.decode(errors="replace") if msg else ""


def error(status: int, call: str = "") -> RecapError:
    return _ERRORS.get(status, RecapError)(status, last_error(), call)


def check(status: int, call: str = "") -> None:
    """Raises the RecapError for a failed status."""
    if status != _abi.RECAP_OK:
        raise error(status, call)


def call(name: str, *args) -> None:
    """lib().name(*args), raising on failure."""
    check(getattr(lib(), name)(*args), name)


_LEVELS = {"warn": _abi.RECAP_LOG_WARN, "info": _abi.RECAP_LOG_INFO,
           "debug": _abi.RECAP_LOG_DEBUG}
_logged = set()


def log_once(level: str, message: str, default: bool = False) -> None:
    """A line of the package's in recap's log, each message once per process: librecap writes
    it (recap_log_write), so it goes where librecap's own lines go (stderr or RECAP_LOG_FILE),
    with their prefix (RECAP_LOG_TIME's time, host:pid:tid, the rank) and only when RECAP_LOG
    asks for the level, as librecap decides for its own. Without a librecap to load, the line
    goes to stderr (RECAP_LOG read here), so the package still says it. ``default`` (warnings
    only): said also when RECAP_LOG is unset (RECAP_LOG_WARN_UNLESS_OFF; off or 0 silences
    it)."""
    if message in _logged:
        return
    _logged.add(message)
    try:
        handle = lib()
    except (ImportError, OSError, AttributeError):  # none, or one without recap_log_write
        _stderr_line(level, message, default)
        return
    # librecap escapes the message (src/base/text.h); escaping it here as well would show a
    # backslash as two. Only a NUL, which would end the C string early, is written as its escape,
    # and bytes a str holds as surrogates (os.fsdecode's) go as those bytes, for librecap to escape.
    code = _abi.RECAP_LOG_WARN_UNLESS_OFF if default and level == "warn" else _LEVELS[level]
    handle.recap_log_write(code, _c_bytes(message.replace("\0", "\\x00")))


def _c_bytes(message: str) -> bytes:
    """The bytes librecap gets: os.fsdecode's surrogates as the bytes they stand for, any other
    lone surrogate as its own (invalid UTF-8) bytes; librecap escapes both, as _one_line does."""
    try:
        return message.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        return b"".join(c.encode("utf-8", errors="surrogateescape" if 0xDC80 <= ord(c) <= 0xDCFF
                                 else "surrogatepass") for c in message)


def _one_line(message: str) -> str:
    """The message escaped as librecap escapes its log lines (src/base/text.h), for the line
    written here when librecap is not there: \\n, \\r, \\t, and \\xNN for each byte of a
    control character (C0, DEL, C1), of U+2028 and U+2029, and of what is not UTF-8 (surrogates:
    os.fsdecode's bytes, or a lone one's bytes as librecap would see them)."""
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

    def one(c: str) -> str:
        o = ord(c)
        if c in named:
            return named[c]
        if 0xDC80 <= o <= 0xDCFF:
            return f"\\x{o - 0xDC00:02x}"
        if o < 0x20 or 0x7F <= o <= 0x9F or o in (0x2028, 0x2029) or 0xD800 <= o <= 0xDFFF:
            return "".join(f"\\x{b:02x}" for b in c.encode("utf-8", errors="surrogatepass"))
        return c
    return "".join(one(c) for c in message)


def _stderr_line(level: str, message: str, default: bool = False) -> None:
    """log_once's line when librecap cannot be loaded: librecap's form without its time and
    rank, filtered by RECAP_LOG read here."""
    setting = os.environ.get("RECAP_LOG", "").strip().lower()
    want = _LEVELS.get(setting, 0) if setting or not default else _LEVELS["warn"]
    if want < _LEVELS[level]:
        return
    import socket
    import sys
    sys.stderr.write(f"{socket.gethostname()}:{os.getpid()}:{threading.get_native_id()} recap "
                     f"{level.upper()} {_one_line(message)}\n")
