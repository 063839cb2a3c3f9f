# SPDX-License-Identifier: Apache-2.0
"""recap._C, recap.torch's compiled extension, when it is there and was built for the running
torch; otherwise None, and ``why`` says why (recap.torch then runs its Python operations).

The extension (recap/csrc) is built by ``pip install ./python`` against the torch of the build
environment, which recap/_build.py records. Loading it under another torch is refused here,
before the import (a C++ extension of another torch may not even link), by recap/_C.py for a
direct ``import recap._C``, and again by the compiled module itself. ``RECAP_TORCH_EXT=0`` turns
it off.
"""
from __future__ import annotations

import os
import threading
from typing import Optional

from ._torch_build import built_for, fix_command, refusal  # noqa: F401 - this module's API

why = ""
_lock = threading.Lock()
_tried = False
_module = None

# librecap's functions recap._C calls directly (no ctypes per call), by the entry of recap._C that
# takes their addresses: bound once, here, from the librecap the package loaded, when recap._C is.
_CALLS = {
    "fork": ("bind_tracker_calls", ("recap_tracker_fork", "recap_tracker_unfork")),
    "states": ("bind_state_calls", ("recap_tracker_get_states", "recap_tracker_set_states",
                                    "recap_states_create", "recap_states_put",
                                    "recap_states_lookup", "recap_states_free",
                                    "recap_tracker_state_object")),
}
_bound: dict = {}  # "fork"/"states" -> whether recap._C has them


def _bind(C) -> None:
    import ctypes

    from ._lib import lib
    for what, (entry, names) in _CALLS.items():
        try:
            addr = {n: ctypes.cast(getattr(lib(), n), ctypes.c_void_p).value for n in names}
            if what == "fork":  # (its entry takes them in order)
                getattr(C, entry)(*[addr[n] for n in names])
            else:
                getattr(C, entry)(addr)
            _bound[what] = True
        except Exception:  # noqa: BLE001 - a recap._C without the entry, or no librecap: ctypes
            _bound[what] = False


def bound(what: str) -> bool:
    """Whether recap._C is loaded and calls librecap's ``what`` ("fork": a tracker's fork and
    unfork; "states": its whole-map reads and writes) itself."""
    return module() is not None and _bound.get(what, False)


def module():
    """recap._C, or None (``why`` says why). The first call decides; the answer stays."""
    global _tried, _module, why
    if _tried:
        return _module
    with _lock:
        if _tried:
            return _module
        if os.environ.get("RECAP_TORCH_EXT") == "0":
            why = "RECAP_TORCH_EXT=0"
        else:
            why = refusal()
        if not why:
            try:
                from . import _C
                _bind(_C)
                _module = _C
            except ImportError as e:
                why = f"recap._C did not load: {e}"
        _tried = True
        if why:
            from . import _lib
            # Another torch than the build's is a mistake to fix, said even without RECAP_LOG;
            # a choice (RECAP_TORCH_EXT=0, an install without the extension) only when asked.
            _lib.log_once("warn", f"recap.torch: {why}; torch's generators run through "
                          "recap's Python operations (slower)",
                          default=why.startswith("recap's torch extension was built for"))
        return _module
